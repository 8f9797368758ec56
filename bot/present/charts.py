"""matplotlib PNGs, as bytes (Agg backend, imported lazily: it costs ~0.3 s). Where they go — a Slack upload,
a file — is the caller's.

Every chart is drawn for Slack's preview, which scales an image to 480 px wide: the figure is WIDTH inches
wide and no text is smaller than FONT points, so a letter is FONT * 480 / (72 * WIDTH) ≈ 10 px high there
(`px_at`), whatever the dpi. The dpi only makes the full-size image sharp (960 px wide)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.core.report import Report
    from bot.core.results.rollout import HostOutcome, RolloutResult
    from bot.core.results.tune import Failed, Measured, Measurement, TuneResult

WIDTH = 6.4  # inches; 480 px of preview is then 75 px an inch
DPI = 150
FONT = 10.0  # points: the smallest text of any chart (ticks, legends, notes)
LABEL = 10.5
TITLE = 12.0
TPS_COLOR = "#1565c0"  # tok/s: its lines, its axis, its label
ACC_COLOR = "#e65100"  # mean acceptance: the same on its own axis
NONE_COLOR = "#616161"
FAIL_COLOR = "#c62828"
STAR_COLOR = "#fbc02d"
VERDICT_COLORS = {"healthy": "#2e7d32", "degraded": "#f9a825", "failing": "#c62828"}
MARKERS = ("o", "^", "D", "v", "P")  # one per speculative method in the tune chart


def write_png(png: bytes, path: Path) -> Path:
    """`png` written to exactly `path` (a user who names `/dev/null` or `chart` gets that, not `chart.png`), its
    folders made; the path written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return path


def chart_path_problem(path: Path) -> str | None:
    """Why a chart cannot be written to `path`, before anything runs: the charts are PNG images, so a name with
    another image or document suffix (`out.svg`) would hold something it does not say."""
    import mimetypes

    kind, _ = mimetypes.guess_type(path.name)
    if str(path) == "-" or kind in (None, "image/png"):
        return None
    return (f"--chart {path}: the charts are PNG images, not {kind}; name it .png (or - for standard output)")


def _blank(height: float) -> Any:
    """A figure of its own (no pyplot): job threads draw charts at the same time, and pyplot's global
    state is not thread-safe; a Figure that goes out of scope is simply collected. Constrained layout keeps
    a legend below the axes inside the image."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _figure(height: float, rows: int = 1) -> tuple[Any, list[Any]]:
    """`rows` axes one under the other, sharing x, in a figure of its own (`_blank`)."""
    fig = _blank(height)
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False)
    return fig, [row[0] for row in axes]


def _png(fig: Any) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _style(ax: Any) -> None:
    ax.tick_params(labelsize=FONT)
    ax.grid(alpha=0.3)


def _colour_axis(ax: Any, side: str, color: str, label: str) -> None:
    """An axis in its line's colour: its label, its ticks and its spine, so which line reads on which axis
    needs no legend."""
    ax.set_ylabel(label, color=color, fontsize=LABEL)
    ax.tick_params(axis="y", colors=color, labelsize=FONT)
    ax.spines[side].set_color(color)


def _legend_below(fig: Any, axes: list[Any], ncol: int = 2, order: tuple[str, ...] = ()) -> None:
    """One legend under the axes (never over the data), each label once, those ending in `order`'s words in
    that order first."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(lab, h)
    rank = {lab: next((i for i, word in enumerate(order) if word in lab), len(order)) for lab in seen}
    labels = sorted(seen, key=lambda lab: rank[lab])
    handles = [seen[lab] for lab in labels]
    if labels:
        fig.legend(handles, labels, loc="outside lower center", ncol=min(ncol, len(labels)), fontsize=FONT,
                   frameon=False)


# -- per-position acceptance ---------------------------------------------------------------------------------

def acceptance_figure(report: Report) -> Any:
    """Per-position acceptance bars, with the healthy reference for the method drawn beside them."""
    ours = report.metrics.per_position
    ref = report.reference.per_position if report.reference else []
    n = max(len(ours), len(ref), 1)
    fig, (ax,) = _figure(4.2)
    width = 0.4 if ref else 0.7
    mean = report.metrics.mean_acceptance_length
    if ours:
        ax.bar([x - (width / 2 if ref else 0) for x in range(len(ours))], ours, width,
               label=f"measured (mean {mean:.2f})" if mean is not None else "measured",
               color=VERDICT_COLORS.get(report.verdict, TPS_COLOR))
    if ref and report.reference is not None:
        ax.bar([x + width / 2 for x in range(len(ref))], ref, width, label=_reference_label(report.reference.label),
               color="#9e9e9e", alpha=0.8)
    step = 1 if n <= 16 else math.ceil(n / 16)  # ~16 labels fit across 480 px at FONT
    ax.set_xticks(list(range(0, n, step)), [str(x) for x in range(0, n, step)])
    ax.set_xlabel("speculative position", fontsize=LABEL)
    ax.set_ylabel("acceptance rate", fontsize=LABEL)
    ax.set_ylim(0, 1.05)
    _style(ax)
    ax.grid(axis="x", visible=False)
    method = report.context.get("method") or "speculative decoding"
    version = report.context.get("vllm_version")
    ax.set_title(f"{method}{', vLLM ' + str(version) if version else ''}: acceptance by position",
                 fontsize=TITLE)
    _legend_below(fig, [ax], ncol=1)
    return fig


def acceptance_png(report: Report) -> bytes:
    return _png(acceptance_figure(report))


def _reference_label(label: str) -> str:
    """"healthy MTP (Qwen3.6-27B, vLLM 0.20.1, 6 tokens, mean 4.74)" as "healthy MTP reference (mean 4.74)":
    what it is and the number to compare, in a legend line that fits 480 px."""
    import re

    m = re.fullmatch(r"(.*?) \((.*)\)", label)
    if m is None:
        return label if len(label) <= 48 else label[:47].rstrip() + "…"
    mean = next((part for part in m.group(2).split(", ") if "mean" in part), None)
    return f"{m.group(1)} reference" + (f" ({mean})" if mean else "")


# -- the trend (history, health report) ----------------------------------------------------------------------

def _window(samples: list[tuple[float, bool, dict[str, Any]]],
            window: tuple[float, float] | None) -> tuple[float, float]:
    """The time axis: the window asked, else the samples' span padded by 5% (at least 5 minutes a side) —
    never matplotlib's default for one timestamp, which is years wide."""
    if window is not None:
        start, end = window
        return start, end + (end - start) * 0.03  # the newest watch sits at the window's end: not cut in half
    first, last = samples[0][0], samples[-1][0]
    pad = max((last - first) * 0.05, 300.0)
    return first - pad, last + pad


def _time_axis(ax: Any, start: float, end: float) -> None:
    """Local-time ticks: HH:MM over hours, dates over days, and the zone said."""
    from importlib import import_module

    dates: Any = import_module("matplotlib.dates")  # its locators are untyped
    ax.set_xlim(datetime.fromtimestamp(start), datetime.fromtimestamp(end))
    days = (end - start) / 86400
    if days > 1.1:
        ax.xaxis.set_major_locator(dates.DayLocator(interval=max(1, math.ceil(days / 6))))
        ax.xaxis.set_major_formatter(dates.DateFormatter("%b %d"))
    else:
        ax.xaxis.set_major_locator(dates.AutoDateLocator(minticks=3, maxticks=6))
        # under a quarter of an hour the ticks are seconds apart: HH:MM alone would repeat the same label
        ax.xaxis.set_major_formatter(dates.DateFormatter("%H:%M:%S" if end - start < 900 else "%H:%M"))
    ax.set_xlabel(f"local time ({time.strftime('%Z', time.localtime(end))})", fontsize=LABEL)


def trend_figure(host: str, samples: list[tuple[float, bool, dict[str, Any]]], baseline: float | None,
                 window: tuple[float, float] | None = None) -> Any:
    """Mean acceptance length and generation throughput over time (the history's and the health report's chart),
    over `window` (start, end as epoch seconds) when given."""
    times: list[Any] = [datetime.fromtimestamp(at) for at, _, _ in samples]  # matplotlib plots datetimes
    means = [d.get("mean") for _, _, d in samples]
    tps = [d.get("single_tps") or d.get("gen_tps") for _, _, d in samples]
    fig, (ax1,) = _figure(4.0)
    size = 6.0 if len(samples) <= 3 else 4.0 if len(samples) <= 60 else 0.0  # a few points seen, many a line
    ax1.plot(times, [m if m is not None else float("nan") for m in means], color=TPS_COLOR, marker="o",
             markersize=size, label="mean acceptance length")
    # 1.0 is the floor (nothing accepted): start the axis there so a 0.07 change does not look like a crash
    known = [m for m in means if m is not None]
    ax1.set_ylim(1.0, max([*known, 2.0]) * 1.1)
    _style(ax1)
    _colour_axis(ax1, "left", TPS_COLOR, "mean acceptance length")
    ax2 = ax1.twinx()
    ax2.plot(times, [t if t is not None else float("nan") for t in tps], color=ACC_COLOR, marker="s",
             markersize=size * 0.8, alpha=0.8, label="generation tok/s")
    if baseline:
        ax2.axhline(baseline, color=ACC_COLOR, linestyle="--", linewidth=1, label=f"reference {baseline:g} tok/s")
    known_tps = [t for t in tps if t is not None] + ([baseline] if baseline else [])
    ax2.set_ylim(0, max([*known_tps, 1.0]) * 1.15)
    _colour_axis(ax2, "right", ACC_COLOR, "tokens/s")
    ax2.spines["left"].set_color(TPS_COLOR)  # the twin's spines are drawn over the first axes'
    down = [t for t, (_, up, _) in zip(times, samples, strict=True) if not up]
    for i, t in enumerate(down):
        ax1.axvline(t, color=FAIL_COLOR, alpha=0.25, label="down" if i == 0 else None)
    _time_axis(ax1, *_window(samples, window))
    if not known and not [t for t in tps if t is not None]:
        # an empty plot reads as a broken chart: say why there is nothing to draw
        n = len(samples)
        ax1.text(0.5, 0.5, f"nothing measured in {n} watch{'es' if n != 1 else ''}:\nno requests ran, or the "
                 "server was down", transform=ax1.transAxes, ha="center", va="center", fontsize=LABEL, color="0.35")
    ax1.set_title(f"{host}: acceptance and throughput", fontsize=TITLE)
    _legend_below(fig, [ax1, ax2])
    return fig


def trend_chart(host: str, samples: list[tuple[float, bool, dict[str, Any]]], baseline: float | None,
                window: tuple[float, float] | None = None) -> bytes:
    return _png(trend_figure(host, samples, baseline, window))


# -- the tune sweep ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _TunePoints:
    """What the tune chart draws: per concurrency measured, each method's (k, tok/s, mean acceptance) by k and
    no speculation's tok/s there; the settings that failed; every k on the axis (0: no speculation)."""

    by_concurrency: dict[int, dict[str, list[tuple[int, float, float | None]]]]
    none_tps: dict[int, float]
    failed: list[Failed]
    ks: list[int]


def _no_speculation(method: str, k: int | None) -> bool:
    """A row of no speculation: method none, or k 0 (a sweep's "k = 0" measured as one of its settings)."""
    return method == "none" or not k


def _tune_points(result: TuneResult) -> _TunePoints:
    from bot.core.results.tune import Failed

    by_c: dict[int, dict[str, list[tuple[int, float, float | None]]]] = {}
    none_tps: dict[int, float] = {}
    rated: list[Measured] = [r for r in result.measured if r.tokens_per_s]
    for r in rated:
        assert r.tokens_per_s is not None
        by_c.setdefault(r.concurrency, {})
        if _no_speculation(r.method, r.k):
            none_tps[r.concurrency] = r.tokens_per_s
        elif r.k is not None:
            by_c[r.concurrency].setdefault(r.method, []).append((r.k, r.tokens_per_s, r.mean_acceptance_length))
    failed = [r for r in result.results if isinstance(r, Failed)]
    ks = {r.k for r in rated if r.k and not _no_speculation(r.method, r.k)} | {f.k for f in failed if f.k}
    if none_tps or any(_no_speculation(f.method, f.k) for f in failed):
        ks.add(0)
    by_c = {c: {m: sorted(pts) for m, pts in sorted(by_c[c].items())} for c in sorted(by_c)}
    return _TunePoints(by_c, none_tps, failed, sorted(k for k in ks if k is not None))


def _tune_panel(ax: Any, concurrency: int, pts: _TunePoints, methods: list[str]) -> Any:
    """One concurrency: tok/s by k per method (from no speculation at k = 0), mean acceptance on its own axis."""
    none = pts.none_tps.get(concurrency)
    ax2 = ax.twinx()
    for method, points in pts.by_concurrency[concurrency].items():
        marker = MARKERS[methods.index(method) % len(MARKERS)]
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        if none is not None:
            xs, ys = [0, *xs], [none, *ys]
        line, = ax.plot(xs, ys, marker=marker, color=TPS_COLOR, label=f"{method} tok/s")
        line.set_gid(f"tps:{method}:{concurrency}")
        acc = [(p[0], p[2]) for p in points if p[2] is not None]
        if acc:
            line, = ax2.plot([a[0] for a in acc], [a[1] for a in acc], marker=marker, markersize=5,
                             linestyle="--", color=ACC_COLOR, label=f"{method} mean acceptance")
            line.set_gid(f"acc:{method}:{concurrency}")
    if none is not None:
        ax.axhline(none, color=NONE_COLOR, linestyle=":", linewidth=1)
        line, = ax.plot([0], [none], marker="o", color=NONE_COLOR, linestyle="none", label="no speculation (k=0)")
        line.set_gid(f"none:{concurrency}")
    top = max([none or 0.0, *(p[1] for ps in pts.by_concurrency[concurrency].values() for p in ps), 1.0])
    ax.set_ylim(0, top * 1.3)  # room above the best point for its label
    acc_top = max([p[2] or 1.0 for ps in pts.by_concurrency[concurrency].values() for p in ps] + [2.0])
    ax2.set_ylim(1.0, acc_top * 1.15)
    _style(ax)
    _colour_axis(ax, "left", TPS_COLOR, "tok/s")
    _colour_axis(ax2, "right", ACC_COLOR, "acceptance")
    ax2.spines["left"].set_color(TPS_COLOR)
    ax.set_title(f"concurrency {concurrency}", loc="left", fontsize=LABEL)
    # tok/s, its stars and their words above the acceptance lines (a twin is drawn over its host otherwise)
    ax.set_zorder(ax2.get_zorder() + 1)
    ax.patch.set_visible(False)
    return ax2


def _mark_failed(ax: Any, failed: list[Failed]) -> None:
    """A setting that could not be measured: a red ✗ on the axis at its k, said "failed"."""
    tx = ax.get_xaxis_transform()  # x in data, y in axes fraction: the ✗ sits on the floor of any scale
    seen: dict[int | None, int] = {}
    for f in failed:
        x = 0 if _no_speculation(f.method, f.k) else f.k
        line, = ax.plot([x], [0.06], transform=tx, marker="X", markersize=11, color=FAIL_COLOR, linestyle="none",
                        label="failed (not measured)", clip_on=False)
        line.set_gid(f"failed:{f.label}")
        # which method failed: a sweep over two methods puts both at one k (the ✗ alone did not say whose)
        above = seen.get(x, 0)
        seen[x] = above + 1
        what = "failed" if _no_speculation(f.method, f.k) else f"{f.method} failed"
        ax.annotate(what, (x, 0.06), xycoords=tx, xytext=(0, 9 + 11 * above), textcoords="offset points",
                    ha="center", fontsize=FONT, color=FAIL_COLOR)


def _mark_best(ax: Any, k: int | None, method: str, tps: float, text: str, gid: str, ks: list[int]) -> None:
    """A star on the point, and what it is beside it (toward the middle, so the words stay in the image)."""
    x = 0 if _no_speculation(method, k) else k
    line, = ax.plot([x], [tps], marker="*", markersize=17, color=STAR_COLOR, markeredgecolor="black",
                    linestyle="none", label="recommended" if gid == "recommended" else "best at this load",
                    zorder=5)
    line.set_gid(gid)
    right = bool(ks) and x is not None and x > (ks[0] + ks[-1]) / 2
    ax.annotate(text, (x, tps), xytext=(-10 if right else 10, 6), textcoords="offset points",
                ha="right" if right else "left", va="bottom", fontsize=FONT, fontweight="bold",
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85})


def tune_figure(result: TuneResult) -> Any:
    """tok/s against k, a panel per concurrency measured (each on its own scale: 8 requests make several times
    one's tok/s), one line per method starting from no speculation at k = 0, mean acceptance on a second axis
    (dashed, its own colour); the recommended setting starred, every failed setting a ✗."""
    pts = _tune_points(result)
    concurrencies = list(pts.by_concurrency) or [min(result.concurrency, default=1)]
    methods = sorted({m for by_m in pts.by_concurrency.values() for m in by_m})
    fig, axes = _figure(1.6 + 2.3 * len(concurrencies), rows=len(concurrencies))
    twins: list[Any] = []
    for ax, c in zip(axes, concurrencies, strict=True):
        pts.by_concurrency.setdefault(c, {})
        twins.append(_tune_panel(ax, c, pts, methods))
        _mark_failed(ax, pts.failed)
    rec = result.recommended
    if rec is not None and rec.concurrency in concurrencies:
        _mark_best(axes[concurrencies.index(rec.concurrency)], rec.k, rec.method, rec.tokens_per_s,
                   f"recommended: {rec.label}\n{rec.tokens_per_s:.1f} tok/s", "recommended", pts.ks)
    for best in result.best_under_load:
        if best.concurrency in concurrencies and best.concurrency != (rec.concurrency if rec else None):
            _mark_best(axes[concurrencies.index(best.concurrency)], best.k, best.method, best.tokens_per_s,
                       f"best here: {best.label}", f"best:{best.concurrency}", pts.ks)
    if not result.measured and not pts.failed:
        axes[0].text(0.5, 0.5, "nothing was measured", transform=axes[0].transAxes, ha="center", fontsize=LABEL)
    if pts.ks:
        axes[-1].set_xticks(pts.ks, ["0\nnone" if k == 0 else str(k) for k in pts.ks])
        axes[-1].set_xlim(pts.ks[0] - 0.5, pts.ks[-1] + 0.5)
    else:
        axes[-1].set_xticks([])  # no k measured: no made-up 0.2 steps of k
    axes[-1].set_xlabel("num_speculative_tokens (k)", fontsize=LABEL)
    fig.suptitle(f"tune {result.profile} on {result.host}", fontsize=TITLE)
    _legend_below(fig, [*axes, *twins], order=("tok/s", "acceptance", "no speculation", "recommended", "best",
                                                "failed"))
    return fig


def tune_png(result: TuneResult) -> bytes:
    return _png(tune_figure(result))


# -- the rollout ---------------------------------------------------------------------------------------------

BEFORE_COLOR = "#9e9e9e"  # what the host served before: grey, the new setting in colour beside it
PASSED_COLOR = VERDICT_COLORS["healthy"]


def _after_colour(h: HostOutcome) -> tuple[str, str]:
    """The new setting's colour and legend label: green through the gate, red when it failed there."""
    if h.gate_passed is False or h.state in ("failed", "restore-failed"):
        return FAIL_COLOR, "after (gate failed)"
    return (PASSED_COLOR, "after (gate passed)") if h.gate_passed else (TPS_COLOR, "after")


def _short(host: str, n: int = 16) -> str:
    return host if len(host) <= n else host[: n - 1] + "…"


def _tps_panel(ax: Any, concurrency: int, hosts: list[HostOutcome]) -> None:
    """tok/s at one concurrency: a pair of bars per host, before (grey) and after (its gate's colour), and the
    change above the pair while there is room for the words."""
    width = 0.38
    top = 1.0
    for x, h in enumerate(hosts):
        before = next((m.tokens_per_s for m in h.before if m.concurrency == concurrency), None)
        after = next((m.tokens_per_s for m in h.after if m.concurrency == concurrency), None)
        colour, label = _after_colour(h)
        if before is not None:
            ax.bar(x - width / 2, before, width, color=BEFORE_COLOR, label="before").patches[0].set_gid(
                f"before:{h.host}:{concurrency}")
        if after is not None:
            ax.bar(x + width / 2, after, width, color=colour, label=label).patches[0].set_gid(
                f"after:{h.host}:{concurrency}")
        top = max(top, before or 0.0, after or 0.0)
        if before and after is not None and len(hosts) <= 6:
            ax.annotate(f"{after / before:.2f}x", (x + width / 2, after), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", fontsize=FONT)
    ax.set_ylim(0, top * 1.25)  # room above the bars for the change
    ax.set_xlim(-0.6, len(hosts) - 0.4)
    rotate = 0 if len(hosts) <= 4 else 30 if len(hosts) <= 10 else 90
    ax.set_xticks(list(range(len(hosts))), [_short(h.host) for h in hosts], rotation=rotate,
                  ha="right" if rotate == 30 else "center")
    _style(ax)
    ax.grid(axis="x", visible=False)
    ax.set_ylabel("tok/s", fontsize=LABEL)
    ax.set_title(f"tok/s at concurrency {concurrency}", loc="left", fontsize=LABEL)


def _per_position_at(ms: tuple[Measurement, ...], concurrency: int) -> list[float]:
    m = next((m for m in ms if m.concurrency == concurrency), None)
    return [float("nan") if r is None else r for r in (m.per_position if m else ())]


def _mean_at(ms: tuple[Measurement, ...], concurrency: int) -> str:
    m = next((m for m in ms if m.concurrency == concurrency), None)
    return "—" if m is None or m.mean_acceptance_length is None else f"{m.mean_acceptance_length:.2f}"


def _acceptance_panel(ax: Any, h: HostOutcome, first: bool) -> None:
    """A host's acceptance by position, before (grey, dashed) and after, at the lowest concurrency measured."""
    cs = sorted({m.concurrency for m in (*h.before, *h.after) if m.per_position})
    if not cs:
        ax.text(0.5, 0.5, "no acceptance measured", transform=ax.transAxes, ha="center", fontsize=FONT)
        ax.set_xticks([])
    else:
        c = cs[0]
        before, after = _per_position_at(h.before, c), _per_position_at(h.after, c)
        colour, label = _after_colour(h)
        if before:
            line, = ax.plot(range(len(before)), before, color=BEFORE_COLOR, linestyle="--", marker="o",
                            markersize=4, label="before")
            line.set_gid(f"acc-before:{h.host}")
        if after:
            line, = ax.plot(range(len(after)), after, color=colour, marker="^", markersize=5, label=label)
            line.set_gid(f"acc-after:{h.host}")
        n = max(len(before), len(after), 1)
        step = 1 if n <= 8 else math.ceil(n / 8)  # ~8 labels fit across half of 480 px at FONT
        ax.set_xticks(list(range(0, n, step)), [str(x) for x in range(0, n, step)])
        ax.set_xlim(-0.3, n - 0.7)
    ax.set_ylim(0, 1.05)
    _style(ax)
    if first:
        ax.set_ylabel("acceptance", fontsize=LABEL)
    c0 = cs[0] if cs else 0
    ax.set_title(f"{_short(h.host, 12)}: mean {_mean_at(h.before, c0)} → {_mean_at(h.after, c0)}", loc="left",
                 fontsize=LABEL)


def rollout_figure(result: RolloutResult) -> Any:
    """Before and after on each host the rollout measured (those not reached are left out): tok/s as a pair of
    bars per host, a panel per concurrency (each on its own scale), then each host's acceptance by position,
    before and after (two hosts a row; one host: the whole width)."""
    hosts = [h for h in result.hosts if h.before or h.after]
    concurrencies = sorted({m.concurrency for h in hosts for m in (*h.before, *h.after) if m.tokens_per_s})
    cols = 1 if len(hosts) <= 1 else 2
    acc_rows = math.ceil(len(hosts) / cols)
    ratios = [2.4] * len(concurrencies) + [2.0] * acc_rows
    fig = _blank(1.0 + sum(ratios) if ratios else 3.0)
    if not hosts:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "nothing was measured", transform=ax.transAxes, ha="center", fontsize=LABEL)
        ax.set_axis_off()
        fig.suptitle(f"rollout {result.profile}", fontsize=TITLE)
        return fig
    grid = fig.add_gridspec(len(ratios), cols, height_ratios=ratios)
    axes: list[Any] = []
    for row, c in enumerate(concurrencies):
        ax = fig.add_subplot(grid[row, :])
        _tps_panel(ax, c, hosts)
        axes.append(ax)
    for i, h in enumerate(hosts):
        row, col = len(concurrencies) + i // cols, i % cols
        ax = fig.add_subplot(grid[row, col])
        _acceptance_panel(ax, h, col == 0)
        if row == len(ratios) - 1 or (row == len(ratios) - 2 and i + cols >= len(hosts)):
            ax.set_xlabel("speculative position", fontsize=LABEL)
        axes.append(ax)
    fig.suptitle(f"rollout {result.profile}: before and after", fontsize=TITLE)
    _legend_below(fig, axes, ncol=3, order=("before", "passed", "failed", "after"))
    return fig


def rollout_png(result: RolloutResult) -> bytes:
    return _png(rollout_figure(result))
