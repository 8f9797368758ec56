"""Triage: evidence in, a Diagnosis out — findings ranked, hypotheses considered and ruled out, a verdict.

`diagnose(evidence)` is the core's one entry point (bot.app.diagnose builds the evidence)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.core.kb import KB, load_kb
from bot.core.triage import detectors as d
from bot.core.triage.atlas_findings import place_unexplained
from bot.core.triage.evidence import Evidence
from bot.core.triage.findings import STATUS_RANK, Considered, Finding
from bot.core.triage.knowledge import KnowledgeBase, load_knowledge

__all__ = ["Diagnosis", "diagnose", "evaluate"]


@dataclass
class Diagnosis:
    verdict: str  # healthy | degraded | failing | unknown
    findings: list[Finding]
    plan: list[str] = field(default_factory=list)
    considered: list[Considered] = field(default_factory=list)
    shape: str | None = None


def diagnose(ev: Evidence, kb: KnowledgeBase | None = None, base: KB | None = None) -> Diagnosis:
    kb = kb or load_knowledge()
    base = base or load_kb()
    st = d.State(ev, kb, d.curve_of(ev), [], [], base)
    d.h_server_down(st)
    d.log_event_findings(st, base)
    place_unexplained(st)  # what no entry explains: where vLLM's own source prints it
    # upstream bugs first: what they explain is not blamed on the drafter or on tuning
    for hypothesis in (d.h_method_not_in_release, d.h_layer_offset, d.h_layer_offset_double,
                       d.h_swa_full_attention, d.h_swa_needs_v2, d.h_zero_acceptance):
        hypothesis(st)
    if any(f.is_bug and f.severity == "critical" for f in st.findings):
        pass  # a launch failure or a hard bug: the drafter's quality is not the question
    for hypothesis in (d.h_drafter_mismatch, d.h_low_acceptance, d.h_too_many_tokens, d.h_not_paying,
                       d.h_kv_saturation, d.h_high_concurrency):
        hypothesis(st)
    d.no_metrics(st)
    d.healthy(st)
    st.findings.sort(key=Finding.rank_key)
    considered = sorted(st.considered, key=lambda c: STATUS_RANK[c.status])
    return Diagnosis(verdict=verdict_of(ev, st.findings), findings=st.findings, plan=plan_for(ev, st.findings),
                     considered=considered, shape=st.curve.shape if st.curve else None)


evaluate = diagnose  # the old name


def verdict_of(ev: Evidence, findings: list[Finding]) -> str:
    if any(f.severity == "critical" for f in findings):
        return "failing"
    if any(f.severity == "warning" for f in findings):
        return "degraded"
    if ev.window is not None or any(f.id == "healthy" for f in findings):
        return "healthy"
    return "unknown"


def plan_for(ev: Evidence, findings: list[Finding]) -> list[str]:
    """What to try first when more than one cause fits, and why."""
    ids = {f.id for f in findings if f.severity in ("critical", "warning")}
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
            "drafted position the wrong target features, which is what a collapse at short context looks like; "
            "the full-attention SWA layers cost most past the 2048-token window and have no switch on this "
            "release. Until then MTP is faster on this host "
            f"(`specops deploy mtp --host {host}`).",
        ]
    return []
