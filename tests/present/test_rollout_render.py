"""A rollout's plan and its run in every medium — text (rich markup), Markdown, Slack Block Kit within its limits,
JSON (its `as_json()`) — its chart, and the line a finished chat job leaves; built by hand, no host."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from PIL import Image
from rich.console import Console

from bot.core.results.rollout import GateClause, HostOutcome, RolloutPlan, RolloutResult
from bot.core.results.tune import Measurement
from bot.present import charts
from bot.present.render import chart_of, files_of, render
from bot.present.rendered import Format
from bot.present.summary import ICON, summary_of
from tests.present.test_charts_legible import MIN_PX, texts
from tests.present.test_results import FORMATS, PNG, slack_payload

GATE = "no bug and tok/s >= 0.95x before and mean acceptance >= 0.9x before"


def m(c: int, tps: float, mean: float, per: tuple[float | None, ...], ttft: float | None = None) -> Measurement:
    return Measurement(c, 4, int(tps * 10), 10.0, tps, mean, per, ttft)


BEFORE = (m(1, 73.5, 3.1, (0.8, 0.6, 0.4), 0.12), m(8, 320.0, 3.0, (0.78, 0.58, 0.38)))
GOOD = (m(1, 74.2, 3.12, (0.81, 0.6, 0.41), 0.11), m(8, 322.5, 3.02, (0.79, 0.59, 0.39)))
BAD = (m(1, 40.1, 1.2, (0.15, 0.04, 0.01), 0.2), m(8, 150.0, 1.18, (0.14, 0.03, None)))
PASSED = (GateClause("no bug", True, "no bug finding"),
          GateClause("tok/s >= 0.95x before", True, "74.2 tok/s after vs 73.5 before at concurrency 1: 1.01x"),
          GateClause("mean acceptance >= 0.9x before", True, "3.12 after vs 3.10 before: 1.01x"))
FAILED = (GateClause("no bug", False, "1 bug finding: DFlash reads the wrong target layers"),
          GateClause("tok/s >= 0.95x before", False, "40.1 tok/s after vs 73.5 before at concurrency 1: 0.55x"),
          GateClause("mean acceptance >= 0.9x before", False, "1.20 after vs 3.10 before: 0.39x"))


def plan(batches: tuple[tuple[str, ...], ...] = (("a6000",), ("a6000-b", "a6000-c")),
         profile: str = "dflash-0.20.1") -> RolloutPlan:
    serving = tuple((h, None if h == "a6000-c" else "mtp") for b in batches for h in b)
    return RolloutPlan("r-1", profile, batches, GATE, 300.0, serving, (1, 8))


def passed(host: str, batch: int, **changes: Any) -> HostOutcome:
    fields: dict[str, Any] = dict(state="passed", before_profile="mtp", before=BEFORE, after=GOOD, gate_passed=True,
                                  clauses=PASSED, why="every clause held",
                                  diagnosis="Healthy: mean acceptance length 3.12")
    return HostOutcome(host, batch, **{**fields, **changes})


def stopped_at_the_canary() -> RolloutResult:
    canary = HostOutcome("a6000", 0, "failed", "mtp", BEFORE, BAD, False, FAILED,
                         "tok/s fell to 0.55x of before", ("DFlash reads the wrong target layers",),
                         "Failing: DFlash reads the wrong target layers · mean acceptance length 1.20",
                         "mtp serving again")
    return RolloutResult("r-1", "dflash-0.20.1", "failed",
                         "Rollout of dflash-0.20.1 stopped at the canary (a6000): tok/s fell to 0.55x of before; "
                         "0 host(s) kept it, the batch was restored", plan(),
                         (canary, HostOutcome("a6000-b", 1, "pending", "mtp"),
                          HostOutcome("a6000-c", 1, "untouched", None)),
                         ((0.0, "a6000: measuring mtp before the change"), (31.4, "a6000: deploying dflash-0.20.1"),
                          (95.0, "a6000: gate failed: tok/s fell to 0.55x of before"),
                          (412.6, "a6000: mtp serving again")))


def all_passed(batches: tuple[tuple[str, ...], ...], said: str = "") -> RolloutResult:
    hosts = tuple(passed(h, i, clauses=tuple(GateClause(c.text, True, c.said + said) for c in PASSED))
                  for i, b in enumerate(batches) for h in b)
    events = tuple((60.0 * i, f"{h.host}: gate passed: every clause held") for i, h in enumerate(hosts))
    return RolloutResult("r-2", "dflash-fixed", "passed", f"Rollout of dflash-fixed: all {len(hosts)} host(s) "
                         "passed the gate", plan(batches, "dflash-fixed"), hosts, events)


def cancelled() -> RolloutResult:
    hosts = (passed("a6000", 0, state="restored", restored="mtp serving again"),
             HostOutcome("a6000-b", 1, "restored", "mtp", BEFORE, (), None, (), "cancelled during the soak",
                         restored="mtp serving again"),
             HostOutcome("a6000-c", 1, "pending", None))
    return RolloutResult("r-3", "dflash-fixed", "cancelled",
                         "Rollout of dflash-fixed cancelled: every host it changed was restored",
                         plan(profile="dflash-fixed"), hosts, ((0.0, "a6000: started"), (75.3, "cancelled")))


def nothing_measured() -> RolloutResult:
    canary = HostOutcome("a6000", 0, "failed", "mtp", why="measuring mtp before the change failed: timed out")
    return RolloutResult("r-4", "dflash-fixed", "failed", "Rollout of dflash-fixed stopped at the canary (a6000): "
                         "measuring mtp before the change failed: timed out", plan(profile="dflash-fixed"),
                         (canary, HostOutcome("a6000-b", 1, "pending", "mtp"), HostOutcome("a6000-c", 1, "pending",
                                                                                          None)))


def shown(text: str) -> str:
    """The text as a terminal shows it: rich reads its markup (a bad tag raises here)."""
    out = Console(file=io.StringIO(), highlight=False, color_system=None, width=220, soft_wrap=True)
    out.print(text, end="")
    assert isinstance(out.file, io.StringIO)
    return out.file.getvalue()


RESULTS: dict[str, Callable[[], RolloutResult | RolloutPlan]] = {
    "stopped": stopped_at_the_canary, "passed": lambda: all_passed((("a6000",), ("a6000-b", "a6000-c"))),
    "cancelled": cancelled, "nothing measured": nothing_measured, "plan": plan}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(RESULTS))
def test_every_rollout_result_renders_in_every_medium(name: str, fmt: Format) -> None:
    result = RESULTS[name]()
    out = render(result, fmt)
    assert out.text.endswith("\n")
    if fmt == "json":
        assert json.loads(out.text) == result.as_json()
        assert out.text == json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n"
    if fmt == "slack":
        slack_payload(out)
    if fmt == "text":
        shown(out.text)


def test_the_text_names_the_failed_clause_its_numbers_and_how_the_host_was_restored() -> None:
    text = shown(render(stopped_at_the_canary(), "text").text)
    assert text.startswith("specops rollout · dflash-0.20.1 · failed · r-1\n")
    assert "Rollout of dflash-0.20.1 stopped at the canary (a6000)" in text
    assert "canary · a6000: gate failed on a6000" in text
    assert "✗ tok/s >= 0.95x before: 40.1 tok/s after vs 73.5 before at concurrency 1: 0.55x" in text
    assert "✗ mean acceptance >= 0.9x before: 1.20 after vs 3.10 before: 0.39x" in text
    assert re.search(r"a6000 +failed +1 +73\.5 → 40\.1 +0\.55x +3\.10 → 1\.20", text), text
    assert re.search(r"a6000 +8 +320\.0 → 150\.0 +0\.47x +3\.00 → 1\.18", text) is None  # the host once, its rows
    assert "bugs: DFlash reads the wrong target layers" in text
    assert "diagnosis: Failing: DFlash reads the wrong target layers" in text
    assert "restored: mtp serving again" in text
    assert "batch 1 · a6000-b, a6000-c: not reached" in text
    # the timeline, m:ss since the start
    assert "  0:00  a6000: measuring mtp before the change" in text and "  6:52  a6000: mtp serving again" in text
    ok = shown(render(all_passed((("a6000",),)), "text").text)
    assert "✓ tok/s >= 0.95x before: 74.2 tok/s after vs 73.5 before at concurrency 1: 1.01x" in ok
    assert "canary · a6000: gate passed" in ok


def test_the_text_escapes_what_a_host_said() -> None:
    hostile = RolloutResult("r-5", "p", "failed", "h", plan(), (HostOutcome(
        "a6000", 0, "failed", "mtp", why="[bold]no[/bold]", diagnosis="vLLM exited: [/]"),))
    text = shown(render(hostile, "text").text)
    assert "[bold]no[/bold]" in text and "vLLM exited: [/]" in text


def test_markdown_has_a_table_per_batch() -> None:
    md = render(stopped_at_the_canary(), "md").text
    assert md.startswith("# specops rollout · dflash-0.20.1 · failed · r-1\n")
    heads = [ln for ln in md.splitlines() if ln.startswith("| host |")]
    assert len(heads) == 1  # the canary's; the batch not reached is its heading alone
    assert "## canary · a6000: gate failed on a6000" in md
    assert "| a6000 | failed | 1 | 73.5 | 40.1 | 0.55x | 3.10 | 1.20 | 0.120 | 0.200 |" in md
    assert "|  |  | 8 | 320.0 | 150.0 | 0.47x | 3.00 | 1.18 | — | — |" in md
    assert "## batch 1 · a6000-b, a6000-c: not reached\n" in md and "| a6000-b |" not in md
    assert "  - ✗ tok/s >= 0.95x before: 40.1 tok/s after vs 73.5 before at concurrency 1: 0.55x" in md
    assert "- `6:52` a6000: mtp serving again" in md
    three = render(all_passed((("a", ), ("b",), ("c", "d"))), "md").text
    assert len([ln for ln in three.splitlines() if ln.startswith("| host |")]) == 3


def test_the_plan_lists_the_batches_the_gate_the_soak_and_what_serves_now() -> None:
    p = plan()
    text = shown(render(p, "text").text)
    assert text.startswith("specops rollout · plan · dflash-0.20.1 · r-1\n")
    assert "nothing ran" in text
    assert "canary   a6000 (serves mtp)" in text
    assert "batch 1  a6000-b (serves mtp), a6000-c (serves nothing specops started)" in text
    assert f"gate: {GATE}" in text and "soak: 5 min on each host" in text and "concurrency 1, 8" in text
    md = render(p, "md").text
    assert "- **canary**: a6000 (serves mtp)" in md
    blocks = slack_payload(render(p, "slack"))["blocks"]
    assert blocks[1]["text"]["text"].startswith(":clipboard: *Plan* (nothing ran")
    assert "*canary*" in json.dumps(blocks)


@pytest.mark.parametrize("batches", [(("h0",), tuple(f"h{i}" for i in range(1, 20))),
                                     tuple((f"host-{i:03d}",) for i in range(120))],
                         ids=["20 hosts in 2 batches", "120 batches of one"])
def test_slack_stays_within_its_limits_however_many_hosts(batches: tuple[tuple[str, ...], ...]) -> None:
    result = all_passed(batches, said=" <!channel> " + "x" * 200)
    out = render(result, "slack")
    payload = slack_payload(out)  # valid JSON, ≤ 50 blocks, every text ≤ 3000 characters
    assert payload["text"] == result.headline
    body = json.dumps(payload)
    assert "<!channel>" not in body and "&lt;!channel&gt;" in body
    if len(batches) == 120:  # more than 50 blocks hold: the rest, and the whole report, in the file beside
        assert out.attachments and out.attachments[0][0] == "specops-rollout.md"
        assert "host-119" in out.attachments[0][1]
        assert "more section(s) of hosts in the attached report" in body
    else:
        assert out.attachments == [] and "h19" in body


def test_slack_shows_the_gate_per_host() -> None:
    payload = slack_payload(render(stopped_at_the_canary(), "slack"))
    body = "\n".join(b["text"]["text"] for b in payload["blocks"] if b["type"] == "section")
    assert "*canary* · a6000: gate failed on a6000" in body
    assert "✗ tok/s &gt;= 0.95x before: 40.1 tok/s after vs 73.5 before at concurrency 1: 0.55x" in body
    assert "73.5 → 40.1 (0.55x) at 1" in body and "restored: mtp serving again" in body
    assert "6:52" in body


def test_the_chart_draws_the_hosts_reached() -> None:
    result = stopped_at_the_canary()
    png = chart_of(result)
    assert png is not None and png.startswith(PNG)
    fig = charts.rollout_figure(result)
    words = " ".join(t.get_text() for t in texts(fig))
    assert "a6000" in words and "a6000-b" not in words and "a6000-c" not in words
    assert chart_of(nothing_measured()) is None and chart_of(plan()) is None
    many = all_passed((("h0",), tuple(f"h{i}" for i in range(1, 6))))
    assert charts.rollout_png(many).startswith(PNG)
    assert [f[0] for f in files_of(result, render(result, "slack"))] == ["rollout-dflash-0.20.1-r-1.png"]


@pytest.mark.parametrize("result", [stopped_at_the_canary(), all_passed((("h0",), ("h1", "h2", "h3", "h4")))],
                         ids=["canary", "5 hosts"])
def test_every_text_of_the_chart_is_readable_at_480_px(result: RolloutResult) -> None:
    fig = charts.rollout_figure(result)
    png = charts._png(fig)
    width, _ = Image.open(io.BytesIO(png)).size
    box = fig.bbox
    for t in texts(fig):
        px = t.get_fontsize() * fig.dpi / 72 * 480 / width
        assert px >= MIN_PX, f"{t.get_text()!r} is {px:.1f} px high at 480 px wide"
        ext = t.get_window_extent()
        assert ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1 and ext.y0 >= box.y0 - 1 and ext.y1 <= box.y1 + 1, \
            f"{t.get_text()!r} runs off the image"


def test_the_chat_summary_in_the_reports_words() -> None:
    assert summary_of(all_passed((("a",), ("b", "c")))) == (ICON["healthy"], "*passed* on 3 hosts")
    assert summary_of(stopped_at_the_canary()) == (ICON["degraded"],
                                                   "*stopped* at the canary (a6000): gate failed, restored")
    assert summary_of(cancelled()) == (ICON["degraded"], "*cancelled*, 2 hosts restored")
    bad = stopped_at_the_canary()
    broken = RolloutResult(bad.rollout_id, bad.profile, "failed", bad.headline, bad.plan,
                           (HostOutcome("a6000", 0, "restore-failed", "mtp", BEFORE, BAD, False, FAILED,
                                        "tok/s fell", restored="the restore failed: ssh timed out"),))
    assert summary_of(broken) == (ICON["failing"], "*stopped* at the canary (a6000): gate failed, "
                                                   "restore FAILED on a6000")
    assert summary_of(nothing_measured())[1] == ("*stopped* at the canary (a6000): measuring mtp before the change "
                                                 "failed: timed out")
    assert summary_of(plan()) == (":information_source:", "planned, nothing ran")
