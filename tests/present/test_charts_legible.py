"""The charts as Slack shows them (its preview is 480 px wide) and what they draw, read from the figures
matplotlib made — the axes' limits, their colours, the markers — and from the PNG scaled down with Pillow."""

from __future__ import annotations

import io
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from matplotlib import dates
from matplotlib.lines import Line2D
from matplotlib.text import Text
from PIL import Image

from bot.app.diagnosis.diagnose import diagnose_parsed
from bot.core.logparse import parse_text
from bot.core.results.tune import BestAt, Failed, Measured, Recommendation, TuneResult
from bot.core.triage.context import Flags
from bot.present import charts
from tests.present.test_results import tune_result

MIN_PX = 9.0  # the smallest text still read at a glance in Slack's 480 px preview
NOW = time.time()
Sample = tuple[float, bool, dict[str, Any]]

PREVIEW_PX = 480  # Slack's preview scales an image to this width


def px_at(points: float, fig: Any, width_px: int = PREVIEW_PX) -> float:
    """How many pixels high `points` of text are once `fig` is scaled down to `width_px` wide."""
    return float(points * width_px / (72.0 * fig.get_figwidth()))


def samples(n: int, every: float, end: float = NOW) -> list[Sample]:
    return [(end - every * (n - 1 - i), i != 1, {"mean": 2.5 + (i % 5) / 10, "gen_tps": 60.0 + i % 7})
            for i in range(n)]


def sweep() -> TuneResult:
    """Three concurrencies (4 the middle one), k = 0 measured as a setting of its own, and k = 4 failed."""
    rows: list[Measured | Failed] = []
    for c, scale in ((1, 1.0), (4, 3.0), (16, 8.0)):
        rows.append(Measured("mtp", 0, "mtp@k0", c, 2, 512, 10.0, 60.0 * scale, None, (), None))
        rows += [Measured("mtp", k, f"mtp@k{k}", c, 2, 512, 10.0, 60.0 * scale * f, 1.0 + 0.8 * k, (), None)
                 for k, f in ((1, 1.3), (2, 1.45), (3, 1.4))]
    rows.append(Failed("mtp", 4, "mtp@k4", "CUDA out of memory", "7. start vLLM"))
    return tune_result(results=tuple(rows), concurrency=(1, 4, 16),
                       recommended=Recommendation("mtp", 2, 1, 87.0, 1.04, 1.45),
                       best_under_load=(BestAt(4, "mtp", 2, 261.0), BestAt(16, "mtp", 2, 696.0)))


def reports(logs: Path) -> dict[str, Any]:
    dflash = diagnose_parsed(parse_text(logs.joinpath("brief-dflash-line.log").read_text()),
                             Flags(vllm_version="0.20.1", method="dflash", num_speculative_tokens=15))
    mtp = diagnose_parsed(parse_text(logs.joinpath("mtp-0.20.1-healthy.log").read_text()), Flags(method="mtp"))
    return {"acceptance dflash k=15": charts.acceptance_figure(dflash),
            "acceptance mtp": charts.acceptance_figure(mtp),
            "history 1 h, one watch": charts.trend_figure("a6000", samples(1, 60), 70.0, (NOW - 3600, NOW)),
            "history 24 h": charts.trend_figure("a6000", samples(96, 900), 55.0, (NOW - 86400, NOW)),
            "tune (2 concurrencies, a failure)": charts.tune_figure(tune_result()),
            "tune (3 concurrencies, k=0)": charts.tune_figure(sweep())}


def texts(fig: Any) -> list[Text]:
    """The words drawn: visible, not empty, not the labels of ticks beyond an axis's limits (never drawn)."""
    fig.canvas.draw()
    hidden = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                if not lo - 1e-9 <= tick.get_loc() <= hi + 1e-9:
                    hidden |= {id(tick.label1), id(tick.label2)}
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and id(t) not in hidden]


def test_every_text_of_every_chart_is_readable_at_480_px(logs: Path) -> None:
    for name, fig in reports(logs).items():
        png = charts._png(fig)
        width, height = Image.open(io.BytesIO(png)).size
        small = Image.open(io.BytesIO(png)).resize((480, round(height * 480 / width)), Image.LANCZOS)
        scale = small.size[0] / width  # what Slack's preview does to the image
        box = fig.bbox
        for t in texts(fig):
            px = t.get_fontsize() * fig.dpi / 72 * scale
            assert px >= MIN_PX, f"{name}: {t.get_text()!r} is {px:.1f} px high at 480 px wide"
            assert px == pytest.approx(px_at(t.get_fontsize(), fig))
            ext = t.get_window_extent()
            # inside the image: a legend or a title cut at the edge is not read either
            assert ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1 and ext.y0 >= box.y0 - 1 and ext.y1 <= box.y1 + 1, \
                f"{name}: {t.get_text()!r} runs off the image ({ext} outside {box})"


def test_the_acceptance_title_is_short_and_the_legend_is_below_the_bars(logs: Path) -> None:
    fig = reports(logs)["acceptance dflash k=15"]
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.get_title() == "dflash, vLLM 0.20.1: acceptance by position"
    [legend] = fig.legends
    assert legend.get_window_extent().y1 <= ax.get_window_extent().y0  # under the axes, over no bar
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["measured (mean 1.18)", "healthy DFlash reference (gsm8k mean 5.40)"]


def _xlim(ax: Any) -> tuple[datetime, datetime]:
    lo, hi = ax.get_xlim()
    return dates.num2date(lo).replace(tzinfo=None), dates.num2date(hi).replace(tzinfo=None)


def test_the_history_axis_spans_the_window_asked_in_local_hours() -> None:
    for watches in (samples(1, 60), samples(3, 60)):
        fig = charts.trend_figure("a6000", watches, None, (NOW - 3600, NOW))
        fig.canvas.draw()
        ax = fig.axes[0]
        lo, hi = _xlim(ax)
        assert abs((lo - datetime.fromtimestamp(NOW - 3600)).total_seconds()) < 1
        # the window's end, and a little room for the newest watch's mark (not cut in half by the edge)
        assert 0 < (hi - datetime.fromtimestamp(NOW)).total_seconds() <= 0.05 * 3600
        ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert len(ticks) >= 3 and all(re.fullmatch(r"\d\d:\d\d", t) for t in ticks), ticks
        assert ax.get_xlabel().startswith("local time (")


def test_without_a_window_the_axis_is_the_watches_padded_not_years() -> None:
    fig = charts.trend_figure("a6000", samples(1, 60), None)
    lo, hi = _xlim(fig.axes[0])
    assert 300 <= (hi - lo).total_seconds() <= 3600
    fig = charts.trend_figure("a6000", samples(3, 60), None)
    lo, hi = _xlim(fig.axes[0])
    assert 120 < (hi - lo).total_seconds() <= 900


def test_days_are_dates_on_the_axis() -> None:
    fig = charts.trend_figure("a6000", samples(190, 3600), None, (NOW - 8 * 86400, NOW))
    fig.canvas.draw()
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]
    assert 3 <= len(ticks) <= 8 and all(re.fullmatch(r"[A-Z][a-z]{2} \d\d", t) for t in ticks), ticks


def _lines(fig: Any) -> dict[str, Line2D]:
    return {str(line.get_gid()): line for ax in fig.axes for line in ax.get_lines() if line.get_gid()}


def _panels(fig: Any) -> dict[int, Any]:
    """The tok/s axes by their concurrency (their twins have no title)."""
    out = {}
    for ax in fig.axes:
        m = re.fullmatch(r"concurrency (\d+)", ax.get_title(loc="left"))
        if m:
            out[int(m.group(1))] = ax
    return out


def test_each_tune_axis_has_its_own_colour_matching_its_lines() -> None:
    fig = charts.tune_figure(sweep())
    fig.canvas.draw()
    pairs = [(a, b) for a in fig.axes for b in fig.axes if a is not b and a.bbox.bounds == b.bbox.bounds
             and a.yaxis.get_label_position() == "left" and b.yaxis.get_label_position() == "right"]
    assert len(pairs) == 3  # a tok/s axis and its acceptance twin per concurrency
    for ax, twin in pairs:
        tps = next(ln.get_color() for ln in ax.get_lines() if ln.get_label().endswith("tok/s"))
        acc = next(ln.get_color() for ln in twin.get_lines() if ln.get_label().endswith("mean acceptance"))
        assert tps != acc
        assert ax.yaxis.label.get_color() == tps and twin.yaxis.label.get_color() == acc
        assert all(t.get_color() == tps for t in ax.get_yticklabels())
        assert all(t.get_color() == acc for t in twin.get_yticklabels())
        assert twin.spines["left"].get_edgecolor() == ax.spines["left"].get_edgecolor()  # the one drawn on top


def test_the_tune_chart_draws_every_concurrency_and_k_zero_as_no_speculation() -> None:
    result = sweep()
    fig = charts.tune_figure(result)
    fig.canvas.draw()
    lines, panels = _lines(fig), _panels(fig)
    assert sorted(panels) == [1, 4, 16]
    for r in result.measured:
        if r.k == 0:
            none = lines[f"none:{r.concurrency}"]
            assert list(none.get_xdata()) == [0] and list(none.get_ydata()) == [r.tokens_per_s]
            assert none.get_label() == "no speculation (k=0)"
        drawn = lines[f"tps:mtp:{r.concurrency}"]
        assert (r.k, r.tokens_per_s) in zip(drawn.get_xdata(), drawn.get_ydata(), strict=True)
    assert [t.get_text() for t in panels[16].get_xticklabels()] == ["0\nnone", "1", "2", "3", "4"]


def test_the_recommended_setting_is_starred_and_said() -> None:
    result = sweep()
    fig = charts.tune_figure(result)
    lines, panels = _lines(fig), _panels(fig)
    star = lines["recommended"]
    assert star.get_marker() == "*" and star.axes is panels[1]
    assert (list(star.get_xdata()), list(star.get_ydata())) == ([2], [87.0])
    notes = [t.get_text() for t in texts(fig)]
    assert "recommended: mtp k=2\n87.0 tok/s" in notes
    assert lines["best:4"].axes is panels[4] and "best here: mtp k=2" in notes
    assert "recommended" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_a_failed_setting_is_shown_not_dropped() -> None:
    fig = charts.tune_figure(sweep())
    lines = _lines(fig)
    cross = lines["failed:mtp k=4"]
    assert cross.get_marker() == "X" and list(cross.get_xdata()) == [4]
    assert sum(t.get_text() == "mtp failed" for t in texts(fig)) == 3  # in each concurrency's panel, by method
    assert "failed (not measured)" in [t.get_text() for t in fig.legends[0].get_texts()]
    empty = charts.tune_figure(tune_result(results=(Failed("mtp", 2, "mtp@k2", "boom", None),), recommended=None))
    assert "failed:mtp k=2" in _lines(empty)


def test_two_methods_failed_at_one_k_are_each_named() -> None:
    rows = (*sweep().results, Failed("dflash", 4, "dflash@k4", "no /health", "12. wait for /health"))
    fig = charts.tune_figure(tune_result(results=rows, concurrency=(1, 4, 16)))
    words = [t for t in texts(fig) if t.get_text().endswith(" failed")]
    assert {t.get_text() for t in words} == {"mtp failed", "dflash failed"}
    by_panel: dict[int, list[Any]] = {}
    for t in words:
        by_panel.setdefault(id(t.axes), []).append(t.get_window_extent())
    for boxes in by_panel.values():  # stacked, not drawn over each other
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_a_short_window_has_ticks_in_seconds_that_do_not_repeat() -> None:
    fig = charts.trend_figure("a6000", samples(2, 15, end=NOW - 2), None, (NOW - 36, NOW))
    fig.canvas.draw()
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]
    assert len(ticks) >= 3 and len(set(ticks)) == len(ticks), ticks
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d", t) for t in ticks), ticks


def test_watches_with_nothing_measured_say_so_instead_of_an_empty_plot() -> None:
    idle = [(NOW - 60 * (2 - i), True, {"mean": None, "gen_tps": None}) for i in range(3)]
    fig = charts.trend_figure("a6000", idle, 73.5, (NOW - 3600, NOW))
    assert any(t.get_text().startswith("nothing measured in 3 watches") for t in texts(fig))
    fig = charts.trend_figure("a6000", samples(3, 60), 73.5, (NOW - 3600, NOW))
    assert not any(t.get_text().startswith("nothing measured") for t in texts(fig))
