"""Triage: the brief's failure, a healthy MTP log, and every detector's edges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose as triage
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings

ZLAB = "z-lab/Qwen3.6-27B-DFlash"
BRIEF_FLAGS = {"vllm_version": "0.20.1", "method": "dflash", "drafter": ZLAB, "num_speculative_tokens": 15}


def diagnose(text: str, **flags: Any) -> Report:
    return build_report(triage(Readings(parsed=parse_text(text), flags=Flags(**flags))))


def ids(report: Report) -> list[str]:
    return [f.id for f in report.findings]


def spec_line(mean: float, rates: list[float], drafted: int | None = None, accepted: int | None = None,
              prefix: str = "(APIServer pid=1) INFO 06-01 10:00:00 [metrics.py:101] ") -> str:
    k = len(rates)
    drafts = 200
    acc = round(sum(rates) * drafts) if accepted is None else accepted
    dr = k * drafts if drafted is None else drafted
    rate = f"{100 * acc / dr:.1f}" if dr else "nan"
    return (f"{prefix}SpecDecoding metrics: Mean acceptance length: {mean:.2f}, Accepted throughput: 1.00 tokens/s, "
            f"Drafted throughput: 2.00 tokens/s, Accepted: {acc} tokens, Drafted: {dr} tokens, Per-position "
            f"acceptance rate: {', '.join(f'{r:.3f}' for r in rates)}, Avg Draft acceptance rate: {rate}%")


def test_brief_line_is_failing_with_both_upstream_causes(logs: Path) -> None:
    r = diagnose(logs.joinpath("brief-dflash-line.log").read_text(), **BRIEF_FLAGS)
    assert r.verdict == "failing"
    by_id = {f.id: f for f in r.findings}
    offset, swa = by_id["dflash-layer-offset"], by_id["dflash-swa-full-attention"]
    assert offset.severity == "critical" and offset.confidence == "high"
    assert {u.number: u.state for u in offset.upstream}[40727] == "merged"
    assert any("0.22.0" in step for step in offset.remediation)
    assert any("[2, 17, 32, 47, 62]" in step for step in offset.remediation)  # shift the ids by one
    assert {u.number for u in swa.upstream} >= {40898, 46104}
    assert {u.number: u.state for u in swa.upstream}[40898] == "closed, not merged"
    assert any("VLLM_USE_V2_MODEL_RUNNER=1" in step and "0.26" in step for step in swa.remediation)
    # the report says which fix to try first, and why
    assert r.plan and "Try first" in r.plan[1] and "#40727" in " ".join(r.plan) and "#40898" in r.plan[0]
    # no tuning on top of a bug (fix first, then tune); MTP until fixed
    assert "too-many-tokens" not in by_id
    considered = {c.id: c for c in r.considered}
    assert considered["too-many-tokens"].status == "possible" and "first" in considered["too-many-tokens"].why
    assert any("specops deploy mtp" in step for step in by_id["not-paying-off"].remediation)
    assert r.findings[0].id == "dflash-layer-offset"  # ranked first
    assert r.metrics.mean_acceptance_length == 1.18 and r.metrics.accepted == 33 and r.metrics.drafted == 2715


def test_brief_full_log_needs_no_flags(logs: Path) -> None:
    r = diagnose(logs.joinpath("brief-dflash-0.20.1.log").read_text())
    assert r.context["vllm_version"] == "0.20.1" and r.context["method"] == "dflash"
    assert r.context["drafter"] == ZLAB and r.context["num_speculative_tokens"] == 15
    assert r.verdict == "failing"
    assert {"dflash-layer-offset", "dflash-swa-full-attention"} <= set(ids(r))


def test_healthy_mtp_line_is_healthy_with_no_bug(logs: Path) -> None:
    r = diagnose(logs.joinpath("mtp-0.20.1-healthy.log").read_text(), method="mtp", baseline_tps=73.5)
    assert r.verdict == "healthy"
    assert not any(f.is_bug or f.upstream for f in r.findings)
    assert ids(r) == ["healthy"]
    assert r.metrics.mean_acceptance_length == 4.74


def test_healthy_without_any_context(logs: Path) -> None:
    r = diagnose(logs.joinpath("mtp-0.20.1-healthy.log").read_text())
    assert r.verdict == "healthy" and r.context["version_range"] == ("0.19.0", "0.23.0")


def test_no_metrics_is_unknown_not_healthy() -> None:
    r = diagnose("(APIServer pid=1) INFO:     127.0.0.1:1 - \"GET /health HTTP/1.1\" 200 OK\n")
    assert r.verdict == "unknown" and ids(r) == ["no-metrics"]
    assert "DEBUG" in r.findings[0].summary


def test_zero_acceptance_is_a_hard_bug() -> None:
    r = diagnose(spec_line(1.0, [0.0] * 7, accepted=0), vllm_version="0.22.1", method="dflash",
                 drafter="some-org/MiMo-DFlash")
    assert r.verdict == "failing"
    f = r.findings[0]
    assert f.id == "zero-acceptance" and f.severity == "critical" and f.is_bug
    assert 45343 in {u.number for u in f.upstream}


def test_layer_offset_fixed_release_and_local_shift() -> None:
    healthy = spec_line(5.2, [0.93, 0.85, 0.75, 0.62, 0.50, 0.35, 0.20])
    assert "dflash-layer-offset" not in ids(diagnose(healthy, vllm_version="0.22.0", method="dflash", drafter=ZLAB))
    shifted = {"dflash_config": {"target_layer_ids": [2, 17, 32, 47, 62]}, "layer_types": ["full_attention"]}
    on_old = diagnose(healthy, vllm_version="0.20.1", method="dflash", drafter=ZLAB, drafter_config=shifted)
    assert "dflash-layer-offset" not in ids(on_old)
    assert any("workaround is applied" in n for n in on_old.notes)
    on_new = diagnose(healthy, vllm_version="0.26.0", method="dflash", drafter=ZLAB, drafter_config=shifted)
    assert "dflash-layer-offset-double" in ids(on_new)


def test_layer_offset_on_a_known_release_with_healthy_acceptance_is_only_a_note() -> None:
    mild = spec_line(3.6, [0.85, 0.70, 0.50, 0.30, 0.15, 0.10])
    r = diagnose(mild, vllm_version="0.21.0", method="dflash", drafter="z-lab/Qwen3.5-27B-DFlash")
    f = next(f for f in r.findings if f.id == "dflash-layer-offset")
    assert f.severity == "info" and f.confidence == "low" and "no collapse" in f.summary
    assert r.verdict == "healthy"
    assert "dflash-swa-full-attention" not in ids(r)  # the Qwen3.5 drafter is all full attention


def test_guessed_version_lowers_confidence() -> None:
    cliff = spec_line(1.2, [0.18, 0.02] + [0.0] * 13)  # [metrics.py:101] -> 0.19.0-0.23.0
    r = diagnose(cliff, method="dflash", drafter=ZLAB)
    f = next(f for f in r.findings if f.id == "dflash-layer-offset")
    assert f.confidence == "medium" and "not known for sure" in f.summary
    assert r.context["version_range"] == ("0.19.0", "0.23.0")


def test_swa_from_a_drafter_config_file() -> None:
    cfg = {"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 4096,
           "dflash_config": {"target_layer_ids": [1, 10]}}
    r = diagnose(spec_line(3.0, [0.8, 0.6, 0.4, 0.2]), vllm_version="0.24.0", method="dflash",
                 drafter="/models/my-dflash", drafter_config=cfg)
    f = next(f for f in r.findings if f.id == "dflash-swa-full-attention")
    assert "4096" in f.summary and f.severity == "info"  # affected release and drafter, but no cliff measured
    assert "dflash-layer-offset" not in ids(r)  # 0.24.0 has #40727
    cliff = spec_line(2.2, [0.8, 0.4, 0.0, 0.0])
    r = diagnose(cliff, vllm_version="0.24.0", method="dflash", drafter="/models/my-dflash", drafter_config=cfg)
    f = next(f for f in r.findings if f.id == "dflash-swa-full-attention")
    assert f.severity == "warning" and f.confidence == "high" and r.metrics.shape == "cliff"


def test_swa_cliff_on_a_drafter_described_as_sliding_window() -> None:
    cliff = spec_line(2.2, [0.8, 0.4, 0.0, 0.0])
    r = diagnose(cliff, vllm_version="0.23.0", method="dflash", drafter="some-org/Unlisted-DFlash",
                 drafter_config={"layer_types": ["sliding_attention"] * 3 + ["full_attention"]})
    assert "dflash-swa-full-attention" in ids(r) and "dflash-layer-offset" not in ids(r)
    r = diagnose(cliff, vllm_version="0.23.0", method="dflash", drafter="some-org/Unlisted-DFlash")
    swa = next(c for c in r.considered if c.id == "dflash-swa-full-attention")
    assert swa.status == "fits"  # its own signature, though nothing says the drafter slides


def test_v2_runner_on_026_is_fine() -> None:
    good = spec_line(5.9, [0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.45])
    r = diagnose(good, vllm_version="0.26.0", method="dflash", drafter=ZLAB)
    assert r.verdict == "healthy"


@pytest.mark.parametrize(
    ("line", "finding", "pr"),
    [
        ("NotImplementedError: DFlash does not yet support mixed sliding/full attention via layer_types; see "
         "https://github.com/vllm-project/vllm/issues/40898.", "dflash-mixed-swa-refused", 40898),
        ("NotImplementedError: DFlash drafters with mixed sliding/full attention require the V2 model runner; "
         "relaunch with VLLM_USE_V2_MODEL_RUNNER=1.", "dflash-mixed-swa-refused", 46104),
    ],
)
def test_refusal_errors_point_upstream(line: str, finding: str, pr: int) -> None:
    r = diagnose(line, method="dflash", drafter=ZLAB)
    assert r.verdict == "failing" and r.findings[0].id == finding
    assert pr in {u.number for u in r.findings[0].upstream}
    assert any("VLLM_USE_V2_MODEL_RUNNER=1" in s for s in r.findings[0].remediation)
    assert "dflash-swa-full-attention" not in ids(r)


def test_every_failure_string_gets_a_finding(fixtures: Path) -> None:
    r = diagnose(fixtures.joinpath("failures.log").read_text(), host="a6000")
    found = {f.id for f in r.findings}
    for kind in ("spec-config-json-split", "main-guard-missing", "cuda-out-of-memory-with-drafter",
                 "no-available-memory-cache-blocks", "kv-cache-smaller-than-max-model-len", "nvidia-smi-no-devices",
                 "nvidia-kernel-driver-not-loaded", "nccl-unhandled-system-error",
                 "eagle3-target-missing-supportseagle3", "gated-repo", "address-in-use", "spec-config-no-model",
                 "spec-method-unknown", "dflash-swa-no-window"):
        assert kind in found, kind
    stop = next(f for f in r.findings if f.id == "address-in-use")
    assert "specops stop --host a6000" in stop.remediation[0]
    p2p = next(f for f in r.findings if f.id == "p2p-disabled")
    assert p2p.severity == "info"
    assert all(f.evidence and f.sources for f in r.findings if f.id not in ("no-metrics", "healthy"))


def test_too_many_tokens_recommends_k_and_expected_mean() -> None:
    rates = [0.9, 0.7, 0.4, 0.12, 0.04, 0.02, 0.01]
    r = diagnose(spec_line(1 + sum(rates), rates), method="mtp")
    f = next(f for f in r.findings if f.id.startswith("lower-k"))  # the advice is its own finding (issue 19)
    assert "num_speculative_tokens: 3" in f.remediation[0]  # the cost model: the 4th adds 0.12, costs more
    assert "3.00" in f.summary  # 1 + 0.9 + 0.7 + 0.4
    assert f.severity == "info" and r.verdict == "healthy"


def test_slower_than_baseline() -> None:
    text = ("(APIServer pid=1) INFO 06-01 10:00:00 [loggers.py:271] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
            "Avg generation throughput: 41.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%, "
            "Prefix cache hit rate: 0.0%\n" + spec_line(2.9, [0.7, 0.5, 0.4, 0.3]))
    r = diagnose(text, method="eagle3", baseline_tps=73.5)
    f = next(f for f in r.findings if f.id == "not-paying-off")
    assert f.confidence == "high" and "73.5" in f.summary and r.verdict == "degraded"


def test_a_few_percent_under_the_reference_is_noise_not_a_finding() -> None:
    # issue 38: MTP measured 71.8 tok/s against its 73.5 reference read "Degraded: not paying off"
    def engine(tps: float) -> str:
        return ("(APIServer pid=1) INFO 06-01 10:00:00 [loggers.py:271] Engine 000: Avg prompt throughput: 1.0 "
                f"tokens/s, Avg generation throughput: {tps} tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache "
                "usage: 3.0%, Prefix cache hit rate: 0.0%\n" + spec_line(3.4, [0.9, 0.8, 0.7]))
    near = diagnose(engine(71.8), method="mtp", baseline_tps=73.5)
    assert "not-paying-off" not in {f.id for f in near.findings} and near.verdict == "healthy", near.headline
    far = diagnose(engine(60.0), method="mtp", baseline_tps=73.5)
    assert "not-paying-off" in {f.id for f in far.findings}


def test_mismatched_draft_model_is_not_an_upstream_bug() -> None:
    text = ("(APIServer pid=1) INFO 11-29 17:51:04 [api_utils.py:286] non-default args: {'model': '/m/tiny-a', "
            "'speculative_config': {'method': 'draft_model', 'model': '/m/tiny-b', 'num_speculative_tokens': 3}}\n"
            + spec_line(1.0, [0.0, 0.0, 0.0], accepted=0, prefix="(APIServer pid=1) INFO 11-29 17:52:00 "
                        "[metrics.py:120] "))
    r = diagnose(text, vllm_version="0.32.0")
    assert r.findings[0].id == "drafter-mismatch" and not r.findings[0].upstream
    assert not any(f.is_bug for f in r.findings)
    assert r.verdict == "failing"


def test_kv_saturation() -> None:
    text = ("(APIServer pid=1) INFO 06-01 10:00:00 [loggers.py:271] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
            "Avg generation throughput: 41.0 tokens/s, Running: 12 reqs, Waiting: 5 reqs, GPU KV cache usage: 99.1%, "
            "Prefix cache hit rate: 0.0%\n" + spec_line(4.5, [0.9, 0.8, 0.7, 0.6, 0.5]))
    r = diagnose(text, method="dflash", vllm_version="0.26.0", drafter="z-lab/Qwen3.5-27B-DFlash")
    assert {"kv-cache-saturated", "dflash-high-concurrency"} <= set(ids(r))


def test_samples_of_an_earlier_launch_are_left_out() -> None:
    args = ("(APIServer pid={pid}) INFO 06-01 10:00:00 [api_utils.py:1] non-default args: {{'model': 'Q', "
            "'speculative_config': {{'method': '{m}', 'num_speculative_tokens': 2}}}}")
    text = "\n".join([args.format(pid=1, m="ngram"), spec_line(1.1, [0.08, 0.02]),
                      args.format(pid=2, m="mtp"), spec_line(2.5, [0.8, 0.7])])
    r = diagnose(text)
    assert r.context["method"] == "mtp" and r.metrics.samples == 1 and r.metrics.mean_acceptance_length == 2.5
    assert any("earlier launch" in n for n in r.notes)
