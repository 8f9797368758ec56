"""Triage: evidence in, ranked findings and a verdict out. No I/O beyond reading the knowledge base."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.core.triage.detectors import (
    TUNING_DETECTORS,
    UPSTREAM_DETECTORS,
    detect_collapse,
    detect_healthy,
)
from bot.core.triage.evidence import Evidence
from bot.core.triage.findings import Finding
from bot.core.triage.knowledge import KnowledgeBase, load_knowledge

__all__ = ["Diagnosis", "evaluate"]

UPSTREAM_BUGS = {"dflash-layer-offset", "dflash-layer-offset-double", "dflash-swa-full-attention", "zero-acceptance"}


@dataclass
class Diagnosis:
    verdict: str  # healthy | degraded | failing | unknown
    findings: list[Finding]
    plan: list[str] = field(default_factory=list)


def evaluate(ev: Evidence, kb: KnowledgeBase | None = None) -> Diagnosis:
    kb = kb or load_knowledge()
    findings: list[Finding] = []
    for detector in UPSTREAM_DETECTORS:
        findings += detector(ev, kb)
    explained = any(f.id in UPSTREAM_BUGS or (f.id.startswith("launch:") and f.severity == "critical")
                    for f in findings)
    findings += detect_collapse(ev, kb, explained)
    for detector in TUNING_DETECTORS:
        findings += detector(ev, kb)
    findings += detect_healthy(ev, kb, findings)
    findings.sort(key=Finding.rank_key)
    return Diagnosis(verdict=verdict_of(ev, findings), findings=findings, plan=plan_for(ev, findings))


def verdict_of(ev: Evidence, findings: list[Finding]) -> str:
    if any(f.severity == "critical" for f in findings):
        return "failing"
    if any(f.severity == "warning" for f in findings):
        return "degraded"
    if ev.window is not None:
        return "healthy"
    return "unknown"


def plan_for(ev: Evidence, findings: list[Finding]) -> list[str]:
    """What to try first when more than one cause fits, and why."""
    ids = {f.id for f in findings}
    host = ev.context.host or "<host>"
    version = ev.context.version_text()
    if {"dflash-layer-offset", "dflash-swa-full-attention"} <= ids:
        return [
            "Two known upstream causes fit: the layer-index offset (vllm#40727) and the sliding-window "
            "drafter layers run as full attention (vllm#40898, then vllm#46104).",
            "Try first: upgrade to vLLM ≥ 0.26.0 with `VLLM_USE_V2_MODEL_RUNNER=1` "
            f"(`specops deploy dflash --host {host}`). One change fixes both: #40727 is in every release from "
            "0.22.0, and hybrid sliding/full drafters run correctly on Model Runner V2 from 0.26.0.",
            f"If you must stay on {version}: shift `target_layer_ids` by one first. The offset feeds every "
            "drafted position the wrong target features, which is what a cliff at short context looks like; "
            "the full-attention SWA layers cost most past the 2048-token window and have no switch on this "
            "release. Until then MTP is faster on this host "
            f"(`specops deploy mtp --host {host}`).",
        ]
    return []
