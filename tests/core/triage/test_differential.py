"""The acceptance model and the differential diagnosis: judged against k, every hypothesis weighed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose as triage
from bot.core.triage.acceptance import classify, estimated_speedup, step_cost
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings

ZLAB = "z-lab/Qwen3.6-27B-DFlash"
BRIEF = {"vllm_version": "0.20.1", "method": "dflash", "drafter": ZLAB, "num_speculative_tokens": 15}
BRIEF_RATES = "0.166, 0.017" + ", 0.000" * 13


def diagnose(text: str, **flags: Any) -> Report:
    return build_report(triage(Readings(parsed=parse_text(text), flags=Flags(**flags))))


def considered(report: Report, hypothesis: str) -> Any:
    return next(c for c in report.considered if c.id == hypothesis)


def line(rates: list[float], drafts: int = 400, prefix: str = "(APIServer pid=7) INFO 06-01 10:00:00 "
         "[metrics.py:101] ") -> str:
    k = len(rates)
    acc = round(sum(rates) * drafts)
    return (f"{prefix}SpecDecoding metrics: Mean acceptance length: {1 + acc / drafts:.2f}, Accepted throughput: "
            f"1.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: {acc} tokens, Drafted: {k * drafts} tokens, "
            f"Per-position acceptance rate: {', '.join(f'{r:.3f}' for r in rates)}, Avg Draft acceptance rate: "
            f"{100 * acc / (k * drafts):.1f}%")


# --- the acceptance model -----------------------------------------------------------------------

@pytest.mark.parametrize(("rates", "shape"), [
    ([0.0, 0.0, 0.0], "all-zero"),
    ([0.166, 0.017] + [0.0] * 13, "collapse"),
    ([0.8, 0.6, 0.4, 0.0, 0.0], "cliff"),
    ([0.600, 0.385, 0.215, 0.108, 0.062] + [0.0] * 10, "cliff"),  # the decay says position 5 should still show
    ([0.7, 0.5, 0.3, 0.12, 0.04, 0.01, 0.0], "long-tail"),  # decayed into rounding: not a cliff
    ([0.9, 0.8, 0.7, 0.6], "smooth-decay"),
])
def test_curve_shapes(rates: list[float], shape: str) -> None:
    assert classify(rates, 1 + sum(rates), None, "dflash").shape == shape


def test_the_ceiling_is_k_plus_one_and_a_mean_alone_bounds_position_0() -> None:
    c = classify([0.8, 0.62], 2.42, None, "mtp")
    assert c.ceiling == 3.0 and c.efficiency == pytest.approx(0.71)
    bound = classify([], 1.05, None, "mtp")  # no rates, no k: position 0 accepts at most mean - 1
    assert bound.shape == "collapse" and bound.p1 == pytest.approx(0.05)
    assert classify([], 1.4, 6, "eagle3").shape == "no-curve"


def test_cost_model_orders_methods_and_grows_with_k() -> None:
    assert step_cost("ngram", 4) < step_cost("mtp", 4) < step_cost("draft_model", 4)
    assert step_cost("dflash", 15) > step_cost("dflash", 4)
    assert estimated_speedup(1.18, "dflash", 15) < 1.0 < estimated_speedup(2.42, "mtp", 2)


# --- the acceptance criteria --------------------------------------------------------------

def test_brief_line_is_failing_with_both_upstream_causes(logs: Path) -> None:
    r = diagnose(logs.joinpath("brief-dflash-line.log").read_text(), **BRIEF)
    assert r.verdict == "failing"
    numbers = {u.number for f in r.findings for u in f.upstream}
    assert {40727, 40898} <= numbers


def test_healthy_mtp_reference_stays_healthy(logs: Path) -> None:
    assert diagnose(logs.joinpath("mtp-0.20.1-healthy.log").read_text(), method="mtp").verdict == "healthy"


def test_healthy_prefix_dflash_on_a_guessed_version_rules_out_the_offset() -> None:
    rates = [0.73, 0.62, 0.52, 0.44, 0.36, 0.29, 0.23, 0.18, 0.14, 0.11, 0.08, 0.06, 0.05, 0.04, 0.02]
    r = diagnose(line(rates), method="dflash")  # [metrics.py:101]: 0.19.0-0.23.0, only a guess
    assert r.verdict == "healthy"
    assert "dflash-layer-offset" not in [f.id for f in r.findings]
    c = considered(r, "dflash-layer-offset")
    assert c.status == "ruled-out" and 40727 in {u.number for u in c.upstream}
    assert "0.19.0–0.23.0" in c.why and "0.73" in c.why and "collapses position 0" in c.why
    assert "Considered and ruled out" in __import__("bot.present.render", fromlist=["render"]).render(r, "md").text


def test_mtp_with_two_tokens_at_080_062_is_healthy() -> None:
    r = diagnose(line([0.80, 0.62]), method="mtp", num_speculative_tokens=2)
    assert r.verdict == "healthy" and r.metrics.mean_acceptance_length == 2.42 and r.metrics.ceiling == 3.0


def test_eagle3_with_six_tokens_and_mean_14_is_not_healthy() -> None:
    r = diagnose("Mean acceptance length: 1.40", method="eagle3", num_speculative_tokens=6)
    assert r.verdict in ("degraded", "failing")
    assert {"low-acceptance", "not-paying-off"} & {f.id for f in r.findings}


def test_a_fragment_of_the_brief_without_prefix_and_mean_gives_1_18_and_the_same_verdict(logs: Path) -> None:
    whole = diagnose(logs.joinpath("brief-dflash-line.log").read_text(), **BRIEF)
    fragment = diagnose(f"Accepted: 33 tokens, Drafted: 2715 tokens, Per-position acceptance rate: {BRIEF_RATES}",
                        **BRIEF)
    assert fragment.metrics.mean_acceptance_length == 1.18 and fragment.metrics.fragment
    assert any("counts" in d for d in fragment.metrics.derived)
    assert fragment.verdict == whole.verdict == "failing"
    assert {f.id for f in fragment.findings if f.severity != "info"} == {f.id for f in whole.findings
                                                                        if f.severity != "info"}
    assert any("fragment" in n for n in fragment.notes)


def test_only_per_position_and_rate_fragments_are_read() -> None:
    r = diagnose("Per-position acceptance rate: 0.800, 0.620\nAvg Draft acceptance rate: 71.0%", method="mtp")
    assert r.metrics.mean_acceptance_length == 2.42 and r.verdict == "healthy"


@pytest.mark.parametrize("wrap", [
    lambda s: "May 09 11:40:42 gpu-1 vllm[1234]: " + s,  # journald
    lambda s: "2026-05-09T11:40:42.123456789Z " + s,  # docker --timestamps
    lambda s: "2026-05-09T11:40:42.1Z stdout F " + s,  # containerd / CRI
    lambda s: "[pod/vllm-0/vllm] " + s,  # kubectl logs --prefix
    lambda s: s + "\r",  # CRLF
])
def test_every_outer_prefix(wrap: Any, logs: Path) -> None:
    text = logs.joinpath("brief-dflash-line.log").read_text().strip()
    r = diagnose(wrap(text), **BRIEF)
    assert r.metrics.mean_acceptance_length == 1.18 and r.verdict == "failing"


def test_a_line_a_terminal_wrapped_is_joined(logs: Path) -> None:
    text = logs.joinpath("brief-dflash-line.log").read_text().strip()
    cut = text.index("0.000, 0.000, 0.000")
    r = diagnose(text[:cut] + "\n" + text[cut:], **BRIEF)
    assert r.metrics.samples == 1 and len(r.metrics.per_position) == 15 and r.metrics.accepted == 33


def test_two_prefixless_intervals_are_not_merged() -> None:
    one = "Mean acceptance length: 2.42, Accepted: 968 tokens, Drafted: 800 tokens"
    r = diagnose(f"{one}\n{one}", method="mtp", num_speculative_tokens=2)
    assert r.metrics.samples == 2


def test_v0_speculative_metrics_layouts() -> None:
    v0 = ("INFO 10-14 08:00:00 metrics.py:367] Speculative metrics: Draft acceptance rate: 0.651, System efficiency: "
          "0.553, Number of speculative tokens: 5, Number of accepted tokens: 6510, Number of draft tokens: 10000, "
          "Number of emitted tokens: 8295.")
    r = diagnose(v0, method="draft_model")
    assert r.metrics.mean_acceptance_length == pytest.approx(4.26, abs=0.01)
    assert r.metrics.avg_draft_acceptance_rate == pytest.approx(65.1)


def test_tuning_never_sits_on_top_of_a_bug(logs: Path) -> None:
    r = diagnose(logs.joinpath("brief-dflash-line.log").read_text(), **BRIEF)
    assert "too-many-tokens" not in [f.id for f in r.findings]
    assert considered(r, "too-many-tokens").status == "possible"


def test_a_swa_cliff_is_recognised_on_any_dflash_drafter() -> None:
    r = diagnose(line([0.600, 0.385, 0.215, 0.108, 0.062] + [0.0] * 10), method="dflash")
    assert r.metrics.shape == "cliff" and "dflash-swa-full-attention" in [f.id for f in r.findings]
    assert r.verdict == "degraded"


def test_a_collapse_on_an_unknown_version_names_the_mismatch_and_keeps_the_offset_possible() -> None:
    r = diagnose("Per-position acceptance rate: 0.207" + ", 0.000" * 14 + ", Avg Draft acceptance rate: 1.4%",
                 method="dflash")
    assert r.verdict == "failing" and r.findings[0].id == "drafter-mismatch"
    assert considered(r, "dflash-layer-offset").status == "possible"


def test_an_unknown_crash_is_still_a_failure() -> None:
    # not a model class, not a line of vLLM's: nothing places it, and the catch-all still calls it a failure
    r = diagnose("(EngineCore_DP0 pid=1) ERROR 05-21 08:22:26 [core.py:1] AttributeError: 'NoneType' object has no "
                 "attribute 'use_mha'", method="eagle")
    assert r.verdict == "failing" and r.findings[0].id == "engine-crashed"
    assert "use_mha" in r.findings[0].evidence[0]


def test_a_specific_signature_beats_the_catch_all() -> None:
    r = diagnose("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                 "when initializing the engine.")
    assert r.findings[0].id == "no-available-memory-cache-blocks"
