"""Lower k as its own finding, per load; ruled out when a guessed premise meets a contradicting curve; advice
that fits a deployment without speculation (issue 19). Pure: only bot.core."""

from __future__ import annotations

from typing import Any

from bot.core.kb import load_kb
from bot.core.logparse import parse_text
from bot.core.triage import diagnose, evidence_of
from bot.core.triage.acceptance import batch_step_cost, best_k_at, k_advice, step_cost
from bot.core.triage.context import Flags
from bot.core.triage.detectors.common import spec_decoding
from bot.core.triage.detectors.log_lines import log_event_findings, smaller_k_workaround
from bot.core.triage.differential import Diagnosis, start
from bot.core.triage.evidence import Evidence, Readings
from bot.core.triage.knowledge import default_knowledge

PREFIX = "(APIServer pid=1) INFO 06-01 10:00:00 "


def spec_line(rates: list[float], drafts: int = 200) -> str:
    k = len(rates)
    acc = round(sum(rates) * drafts)
    return (f"{PREFIX}[metrics.py:101] SpecDecoding metrics: Mean acceptance length: {1 + acc / drafts:.2f}, "
            f"Accepted throughput: 1.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: {acc} tokens, "
            f"Drafted: {k * drafts} tokens, Per-position acceptance rate: {', '.join(f'{r:.3f}' for r in rates)}, "
            f"Avg Draft acceptance rate: {100 * acc / (k * drafts):.1f}%")


def engine_line(running: int) -> str:
    return (f"{PREFIX}[loggers.py:271] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
            f"90.0 tokens/s, Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%, "
            "Prefix cache hit rate: 0.0%")


def readings(text: str, **flags: Any) -> Readings:
    return Readings(parsed=parse_text(text), flags=Flags(**flags))


def evidence(text: str, **flags: Any) -> Evidence:
    return evidence_of(readings(text, **flags))


def run(text: str, **flags: Any) -> Diagnosis:
    return diagnose(readings(text, **flags))


def lower_k(dx: Diagnosis) -> list[Any]:
    return [f for f in dx.findings if f.id.startswith("lower-k:")]


HEALTHY = [0.917, 0.837, 0.648, 0.538, 0.451, 0.348]  # the public Qwen3.6-27B MTP curve (acceptance.md)
TAILED = [0.9, 0.7, 0.4, 0.12, 0.04, 0.02, 0.01]


# --- the cost model under batching ---------------------------------------------------------------------

def test_batch_cost_is_the_batch_one_cost_at_one_request() -> None:
    for method in ("mtp", "dflash", "ngram", None):
        for k in (1, 4, 15):
            assert abs(batch_step_cost(method, k, 1) - step_cost(method, k)) < 1e-12


def test_each_verified_token_costs_more_as_more_requests_run() -> None:
    costs = [batch_step_cost("mtp", 4, b) for b in (1, 2, 8, 32)]
    assert costs == sorted(costs) and costs[-1] > 1.5 * costs[0]


def test_the_best_k_falls_with_load() -> None:
    ks = [best_k_at(HEALTHY, "mtp", b)[0] for b in (1, 8, 32, 128)]
    assert ks == sorted(ks, reverse=True) and ks[0] == 6 and ks[-1] < ks[0]


def test_k_advice_per_load() -> None:
    a1, a8 = k_advice(TAILED, "mtp", [1, 8])
    assert (a1.running, a8.running) == (1, 8) and a1.k == a8.k == 7
    assert a8.best_k <= a1.best_k < 7 and a1.gain > 0


# --- the finding ---------------------------------------------------------------------------------------

def test_lower_k_names_k_in_its_id_and_its_text() -> None:
    dx = run(spec_line(TAILED), method="mtp")
    (f,) = lower_k(dx)
    n = int(f.id.split(":")[1])
    assert n < 7 and f"num_speculative_tokens: {n}" in f.evidence[0] and f"num_speculative_tokens: {n}" in \
        f.remediation[0]
    assert f.advice == ["lower-k"]
    assert any("estimated per load" in e for e in f.evidence)


def test_no_lower_k_on_a_curve_where_every_position_pays() -> None:
    assert lower_k(run(spec_line(HEALTHY), method="mtp")) == []
    assert lower_k(run(engine_line(1) + "\n" + spec_line(HEALTHY), method="mtp")) == []


def test_a_small_gain_is_a_note_a_large_one_a_warning() -> None:
    small = [0.74, 0.473, 0.309, 0.187, 0.099, 0.057]  # a few percent at one request
    (f,) = lower_k(run(engine_line(1) + "\n" + spec_line(small), method="mtp"))
    assert f.severity == "info"
    big = [0.5] + [0.01] * 14  # 14 idle DFlash positions
    (g,) = lower_k(run(engine_line(1) + "\n" + spec_line(big), method="dflash", vllm_version="0.26.0"))
    assert g.severity == "warning" and g.id == "lower-k:1"


def test_load_changes_the_advice() -> None:
    one = lower_k(run(engine_line(1) + "\n" + spec_line(HEALTHY), method="mtp"))
    assert one == []  # k = 6 pays at one request ...
    many = "\n".join(engine_line(32) + "\n" + spec_line(HEALTHY) for _ in range(3))
    (f,) = lower_k(run(many, method="mtp"))  # ... not at 32
    n = int(f.id.split(":")[1])
    assert n < 6 and "~32 running requests" in f.summary and "1 request" in f.summary
    assert "Engine lines: 32 running" in f.evidence[0]


def test_the_scrape_gauge_gives_the_load_without_engine_lines() -> None:
    (f,) = lower_k(diagnose(Readings(parsed=parse_text(spec_line(HEALTHY)), flags=Flags(method="mtp"), running=32)))
    assert "/metrics: vllm:num_requests_running 32" in f.evidence[0]


def test_beside_a_bug_lower_k_is_the_interim_step() -> None:
    brief = [0.166, 0.017] + [0.0] * 13
    dx = run(spec_line(brief), method="dflash", vllm_version="0.20.1", drafter="z-lab/Qwen3.6-27B-DFlash",
             num_speculative_tokens=15)
    bugs = [f for f in dx.findings if f.is_bug and f.severity in ("critical", "warning")]
    (f,) = lower_k(dx)
    assert bugs and f.severity == "info" and f.title.startswith("Meanwhile")
    assert f.summary.startswith("Fix ") and "meanwhile" in f.summary.lower()
    assert f.remediation[0].startswith("First")


# --- ruled out when the premise is only guessed ---------------------------------------------------------

def _offset(dx: Diagnosis) -> str:
    return next(c.status for c in dx.considered if c.id == "dflash-layer-offset")


def test_a_healthy_position_0_rules_out_the_offset_when_the_version_is_guessed() -> None:
    cliff = [0.8, 0.6, 0.45, 0.0, 0.0, 0.0, 0.0]  # healthy position 0, then a cliff (another cause's signature)
    dx = run(spec_line(cliff), method="dflash")  # the version only from [metrics.py:101]
    assert _offset(dx) == "ruled-out"
    assert not any(f.id == "dflash-layer-offset" for f in dx.findings)


def test_a_known_version_keeps_it_possible() -> None:
    cliff = [0.8, 0.6, 0.45, 0.0, 0.0, 0.0, 0.0]
    dx = run(spec_line(cliff), method="dflash", vllm_version="0.20.1")
    assert _offset(dx) == "possible"


# --- advice that fits the deployment ------------------------------------------------------------------

KV_ERR = ("(EngineCore_DP0 pid=2) ERROR 06-01 10:00:01 [core.py:700] ValueError: To serve at least one request "
          "with the models's max seq len (262144), (16.00 GiB KV cache is needed, which is larger than the available "
          "KV cache memory (9.50 GiB). Based on the available memory, the estimated maximum model length is 155648.")


def _kv_finding(text: str, **flags: Any) -> Any:
    found = log_event_findings(start(evidence(text, **flags), default_knowledge()))
    return next(f for f in found.findings if f.id == "kv-cache-smaller-than-max-model-len")


def test_no_drafter_advice_without_speculative_decoding() -> None:
    args = f"{PREFIX}[utils.py:1] non-default args: {{'model': 'Qwen/Qwen3-8B', 'max_model_len': 262144}}\n"
    f = _kv_finding(args + KV_ERR)
    assert not any("speculative" in r.lower() or "drafter" in r.lower() for r in f.remediation)
    assert f.remediation  # the sizing advice stays


def test_drafter_advice_with_speculative_decoding() -> None:
    args = (f"{PREFIX}[utils.py:1] non-default args: {{'model': 'Qwen/Qwen3-8B', 'speculative_config': "
            "{'method': 'mtp', 'num_speculative_tokens': 2}}\n")
    f = _kv_finding(args + KV_ERR)
    assert any("--speculative-config" in r for r in f.remediation)
    assert spec_decoding(evidence(args)) == "on"
    assert spec_decoding(evidence("nothing here")) == "unknown"


def test_a_crash_whose_workaround_is_a_smaller_k_says_so() -> None:
    kb = load_kb()
    with_k = [e for e in kb.entries if smaller_k_workaround(e)]
    assert with_k, "the knowledge base has entries worked around by a smaller k"
    assert smaller_k_workaround(next(e for e in kb.entries if e.id == "address-in-use")) is None
