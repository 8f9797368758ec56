"""The Report model and its JSON contract (README "Report JSON"). Pure: renderings live in bot.present."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.core.triage.findings import Considered, Finding
from bot.core.triage.knowledge import ReferenceCurve

if TYPE_CHECKING:
    from bot.core.triage.differential import Diagnosis

Verdict = Literal["healthy", "degraded", "failing", "unknown"]


class MetricsOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    mean_acceptance_length: float | None = None
    per_position: list[float] = Field(default_factory=list)
    avg_draft_acceptance_rate: float | None = None
    accepted: int | None = None
    drafted: int | None = None
    samples: int = 0
    num_speculative_tokens: int | None = None
    min_mean: float | None = None
    max_mean: float | None = None
    first_sample_at: str | None = None
    last_sample_at: str | None = None
    prometheus_mean_acceptance_length: float | None = None
    prometheus_per_position: list[float] = Field(default_factory=list)
    generation_tps: float | None = None  # vLLM's log: the mean of its intervals with a request running
    single_request_tps: float | None = None  # the same, over the intervals with exactly one request running
    probe_tps: float | None = None  # specops' probe: one request timed end to end, the best of its runs
    estimated_speedup: float | None = None
    measured_speedup: float | None = None  # one request's tok/s over the reference's (profile baseline_tps)
    shape: Literal["all-zero", "collapse", "cliff", "long-tail", "smooth-decay", "no-curve"] | None = None
    ceiling: float | None = None  # k + 1: the most a step can give
    fragment: bool = False  # read from a fragment of the SpecDecoding line
    derived: list[str] = Field(default_factory=list)  # what was computed rather than read


StepStatus = Literal["ok", "changed", "failed", "skipped", "planned"]


@dataclass
class StepResult:
    """One step of a playbook as it ran (the engine fills it in) and as a report shows it: one model for both."""

    index: int
    name: str
    kind: str
    status: StepStatus
    duration: float = 0.0
    message: str = ""
    output: list[str] = field(default_factory=list)
    command: str | None = None


class OperationOut(BaseModel):
    """What a deploy, stop or host diagnosis did, step by step."""

    model_config = ConfigDict(defer_build=True)

    kind: Literal["deploy", "stop", "diagnose", "status"]
    host: str
    profile: str | None = None
    status: Literal["changed", "ok", "unchanged", "failed", "planned", "refused"]
    message: str = ""
    failed_step: str | None = None
    steps: list[StepResult] = Field(default_factory=list)
    probe_tps: float | None = None
    duration: float = 0.0
    forced: list[str] = Field(default_factory=list)  # the refusing checks before launch a `--force` deploy went past


class Report(BaseModel):
    model_config = ConfigDict(defer_build=True)

    verdict: Verdict
    headline: str
    metrics: MetricsOut
    findings: list[Finding]
    considered: list[Considered] = Field(default_factory=list)
    plan: list[str] = Field(default_factory=list)
    context: dict[str, Any] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    source: str = ""
    parse: dict[str, int] = Field(default_factory=lambda: {"lines": 0, "parsed": 0, "skipped": 0, "undecodable": 0})
    reference: ReferenceCurve | None = None  # the method's published curve, as the knowledge holds it
    operation: OperationOut | None = None

    def contract(self) -> dict[str, Any]:
        """The documented JSON contract (plus additive keys)."""
        data = self.model_dump(mode="json")
        for f in data["findings"]:
            f.pop("priority", None)
        return data


def _num(x: float | None, digits: int = 3) -> float | None:
    if x is None or math.isnan(x) or math.isinf(x):
        return None
    return round(x, digits)


def _stamp(origin: Any) -> str | None:
    st = getattr(origin, "stamp", None)
    dt: datetime | None = st.as_datetime() if st is not None else None
    return dt.isoformat(sep=" ") if dt else None


def build_report(diagnosis: Diagnosis) -> Report:
    """The Diagnosis in the documented form: its numbers rounded, its context flattened for the JSON contract."""
    ev = diagnosis.evidence
    w = ev.window
    metrics = MetricsOut()
    if w is not None:
        metrics = MetricsOut(
            mean_acceptance_length=_num(w.mean, 2), per_position=[_num(x) or 0.0 for x in w.per_position],
            avg_draft_acceptance_rate=_num(w.rate, 1), accepted=w.accepted, drafted=w.drafted,
            samples=len(w.samples), num_speculative_tokens=w.k or ev.context.num_speculative_tokens,
            min_mean=_num(min(w.means), 2) if w.means else None,
            max_mean=_num(max(w.means), 2) if w.means else None,
            first_sample_at=_stamp(w.samples[0].origin), last_sample_at=_stamp(w.samples[-1].origin),
            estimated_speedup=_num(diagnosis.speedup, 2), shape=diagnosis.shape,
            ceiling=float(k + 1) if (k := w.k or ev.context.num_speculative_tokens) else None,
            fragment=w.fragment, derived=sorted({d for s in w.samples for d in s.derived}),
        )
        if not w.counts_known:
            metrics.accepted = metrics.drafted = None
    if ev.prom_window is not None:
        metrics.prometheus_mean_acceptance_length = _num(ev.prom_window.mean_acceptance_length, 2)
        metrics.prometheus_per_position = [_num(x) or 0.0 for x in ev.prom_window.per_position]
    if ev.engine is not None:
        metrics.generation_tps = _num(ev.engine.generation_tps, 1)
        metrics.single_request_tps = _num(ev.engine.single_request_tps, 1)
    metrics.probe_tps = _num(ev.context.probe_tps, 1)
    one = ev.context.probe_tps or (ev.engine.single_request_tps if ev.engine else None)
    if one and ev.context.baseline_tps:
        metrics.measured_speedup = _num(one / ev.context.baseline_tps, 2)
    ctx = ev.context
    context = ctx.model_dump(exclude={"drafter_config"}, exclude_none=True)
    context["version_text"] = ctx.version_text()
    # after the word "vLLM" in a report's context line ("vLLM version unknown", not "vLLM an unknown …")
    context["version_label"] = ctx.version_text() if (ctx.vllm_version or ctx.version_range) else "version unknown"
    if ctx.drafter_config is not None:
        context["drafter_config_keys"] = sorted(ctx.drafter_config)
    stats = ev.parsed.stats
    return Report(
        verdict=diagnosis.verdict,
        headline=headline(diagnosis.verdict, diagnosis.findings, metrics),
        metrics=metrics, findings=diagnosis.findings, considered=diagnosis.considered, plan=diagnosis.plan,
        context=context,
        notes=list(diagnosis.notes), source=ev.source,
        parse={"lines": stats.lines, "parsed": stats.parsed, "skipped": stats.skipped,
               "undecodable": stats.undecodable},
        reference=diagnosis.reference,
    )


def headline(verdict: str, findings: list[Finding], metrics: MetricsOut) -> str:
    mean = metrics.mean_acceptance_length
    top = next((f for f in findings if f.severity != "info"), None)
    if verdict == "healthy":
        if mean is not None:
            return f"Healthy: mean acceptance length {mean:.2f}"
        started = next((f for f in findings if f.id == "healthy"), None)
        return f"Healthy: {started.title.lower()} (no acceptance measured yet)" if started else "Healthy"
    if verdict == "unknown":
        return findings[0].title if findings else "Nothing to judge"
    assert top is not None
    tail = f" · mean acceptance length {mean:.2f}" if mean is not None else ""
    return f"{verdict.capitalize()}: {top.title}{tail}"
