"""Detectors never write into what they read: each one, run in the pipeline's order on a real or a brief
log, leaves the evidence, the facts and the record before it as they were, and returns what it found. The
whole diagnosis leaves its Readings (the parsed log the caller keeps) as they were read."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from bot.core.logparse import parse_text
from bot.core.triage import diagnose, evidence_of
from bot.core.triage.atlas_findings import place_unexplained
from bot.core.triage.context import Flags
from bot.core.triage.detectors.state import Found, State
from bot.core.triage.differential import BUGS, LAST, LOG_LINES, TUNING, Detector, start
from bot.core.triage.evidence import Readings
from bot.core.triage.knowledge import Knowledge, Thresholds, default_knowledge

ROOT = Path(__file__).resolve().parents[3]
LOGS = ROOT / "bot" / "sim" / "logs"
FIXTURES = ROOT / "tests" / "fixtures"
ZLAB = "z-lab/Qwen3.6-27B-DFlash"
PREFIX = "(APIServer pid=1) INFO 06-01 10:00:00 "
STARTED = "INFO:     Started server process [593]\nINFO:     Waiting for application startup.\n" \
          "INFO:     Application startup complete.\n"
ENGINE = (f"{PREFIX}[loggers.py:271] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
          "41.0 tokens/s, Running: 12 reqs, Waiting: 5 reqs, GPU KV cache usage: 99.1%, Prefix cache hit rate: 0.0%\n")

_DETECTORS: tuple[Detector, ...] = (*LOG_LINES, *BUGS, *TUNING, *LAST)


def spec(rates: list[float], drafts: int = 200) -> str:
    acc, drafted = round(sum(rates) * drafts), len(rates) * drafts
    return (f"{PREFIX}[metrics.py:101] SpecDecoding metrics: Mean acceptance length: {1 + acc / drafts:.2f}, "
            f"Accepted throughput: 1.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: {acc} tokens, "
            f"Drafted: {drafted} tokens, Per-position acceptance rate: {', '.join(f'{r:.3f}' for r in rates)}, "
            f"Avg Draft acceptance rate: {100 * acc / drafted:.1f}%\n")


SHIFTED = {"dflash_config": {"target_layer_ids": [2, 17, 32, 47, 62]}, "layer_types": ["full_attention"]}
HEALTHY_DFLASH = spec([0.93, 0.85, 0.75, 0.62, 0.50, 0.35, 0.20])
# (name, log text, flags): between them every detector finds something, and the atlas places a line
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("brief", (LOGS / "brief-dflash-0.20.1.log").read_text(),
     {"vllm_version": "0.20.1", "method": "dflash", "drafter": ZLAB, "num_speculative_tokens": 15}),
    ("shifted-ids-on-an-affected-release", HEALTHY_DFLASH,  # the layer-offset detector's note
     {"vllm_version": "0.20.1", "method": "dflash", "drafter": ZLAB, "drafter_config": SHIFTED}),
    ("shifted-ids-on-a-fixed-release", HEALTHY_DFLASH,
     {"vllm_version": "0.26.0", "method": "dflash", "drafter": ZLAB, "drafter_config": SHIFTED}),
    ("kv-saturated-dflash", ENGINE + spec([0.9, 0.8, 0.7, 0.6, 0.5]),
     {"method": "dflash", "vllm_version": "0.26.0", "drafter": "z-lab/Qwen3.5-27B-DFlash"}),
    ("mtp-tail-under-load", "".join(ENGINE + spec([0.9, 0.7, 0.4, 0.12, 0.04, 0.02, 0.01]) for _ in range(3)),
     {"method": "mtp", "baseline_tps": 60.0}),
    ("mtp-collapse", spec([0.05, 0.0, 0.0]), {"method": "mtp", "vllm_version": "0.20.1"}),
    ("low-acceptance-eagle3", spec([0.35, 0.2, 0.1]), {"method": "eagle3"}),
    ("started-no-metrics", STARTED, {}),
    ("hybrid-drafter-without-v2", STARTED,
     {"vllm_version": "0.26.0", "method": "dflash", "drafter": ZLAB, "model_runner_v2": False}),
    ("method-before-its-release", STARTED, {"vllm_version": "0.19.0", "method": "dflash", "drafter": ZLAB}),
    ("started-then-metrics", STARTED + spec([0.8, 0.7]), {"method": "mtp"}),
    ("server-down", (LOGS / "mtp-0.20.1-healthy.log").read_text(), {"server_alive": False, "health_ok": False}),
    ("counts-only-fragment", "SpecDecoding metrics: Accepted: 300 tokens, Drafted: 800 tokens\n",
     {"num_speculative_tokens": 4}),
    ("atlas-refusal", (FIXTURES / "atlas" / "vllm-0.32.0-max-model-len-over-derived.log").read_text(), {}),
    ("real-ngram", (FIXTURES / "real-vllm-0.32.0-ngram.log").read_text(), {}),
    ("cut-traceback-under-spawn", "Traceback (most recent call last):\n"  # the frame-signature detector's case
     '  File "/usr/lib/python3.11/multiprocessing/spawn.py", line 297, in _fixup_main_from_path\n'
     "    main_content = runpy.run_path(main_path,\n"
     '  File "/srv/app/run.py", line 9, in <module>\n    llm = LLM(model="m")\n', {}),
    ("unwritable-cache", "PermissionError: [Errno 13] Permission denied: '/.triton'\n", {}),
    ("engine-stalled", ENGINE + ENGINE.replace("throughput: 1.0 ", "throughput: 0.0 ").replace("41.0", "0.0"), {}),
]


def readings(text: str, flags: dict[str, Any]) -> Readings:
    return Readings(parsed=parse_text(text), flags=Flags(**flags))


def _changed(before: State, after: State) -> list[str]:
    return [f.name for f in dataclasses.fields(State) if getattr(before, f.name) != getattr(after, f.name)]


@pytest.mark.parametrize(("text", "flags"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_detector_leaves_its_input_as_it_was(text: str, flags: dict[str, Any]) -> None:
    knowledge = default_knowledge()
    st = start(evidence_of(readings(text, flags), knowledge), knowledge)
    for detector in LOG_LINES:
        st = _run_and_check(detector, st)
    before = copy.deepcopy(st)
    place_unexplained(st)  # it writes the record itself; what it reads stays
    assert (st.ev, st.kb, st.base, st.curve) == (before.ev, before.kb, before.base, before.curve)
    for detector in (*BUGS, *TUNING, *LAST):
        st = _run_and_check(detector, st)


def _run_and_check(detector: Detector, st: State) -> State:
    before = copy.deepcopy(st)
    found = detector(st)
    assert isinstance(found, Found), detector.__name__
    assert not _changed(before, st), f"{detector.__name__} changed {_changed(before, st)}"
    st.record(found)
    return st


def test_between_them_the_cases_exercise_every_detector() -> None:
    knowledge = default_knowledge()
    found_by: set[str] = set()
    for _, text, flags in CASES:
        st = start(evidence_of(readings(text, flags), knowledge), knowledge)
        for detector in _DETECTORS:
            found = detector(st)
            if found.findings or found.considered or found.notes or found.withdrawn:
                found_by.add(detector.__name__)
            st.record(found)
    assert found_by == {detector.__name__ for detector in _DETECTORS}


@pytest.mark.parametrize(("text", "flags"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_diagnosis_leaves_what_was_read_as_it_was_read(text: str, flags: dict[str, Any]) -> None:
    read = readings(text, flags)
    before = copy.deepcopy(read)
    first = diagnose(read)
    assert read == before
    assert diagnose(read) == first  # so the same readings diagnosed twice say the same


def test_a_completed_fragment_is_a_copy() -> None:
    read = readings("SpecDecoding metrics: Accepted: 300 tokens, Drafted: 800 tokens\n", {"num_speculative_tokens": 4})
    ev = evidence_of(read)
    assert ev.window is not None and ev.window.mean == pytest.approx(2.5)
    assert ev.window.samples[0] is not read.parsed.samples[0] and not read.parsed.samples[0].derived


def test_the_evidence_and_the_context_are_frozen() -> None:
    ev = evidence_of(readings(spec([0.8, 0.7]), {"method": "mtp"}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ev.notes = ()  # type: ignore[misc]
    with pytest.raises(ValueError):
        ev.context.method = "dflash"


def test_the_kv_threshold_comes_from_the_knowledge_passed_in() -> None:
    text = ENGINE + spec([0.9, 0.8, 0.7, 0.6, 0.5])
    flags = {"method": "mtp"}
    assert "kv-cache-saturated" in {f.id for f in diagnose(readings(text, flags)).findings}  # 99.1% ≥ 95%
    base = default_knowledge()
    lenient = Knowledge(facts=base.facts, base=base.base, thresholds=Thresholds(kv_saturated=99.5))
    assert "kv-cache-saturated" not in {f.id for f in diagnose(readings(text, flags), lenient).findings}
