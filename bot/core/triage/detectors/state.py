"""What the detectors read and what each returns: the State (the evidence, the facts, the record so far) and a
Found; a known issue's finding in its own words."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.core.kb import KB
from bot.core.triage.acceptance import Curve, classify
from bot.core.triage.detectors.common import base_params, fill
from bot.core.triage.evidence import Evidence
from bot.core.triage.findings import ADVICE_KINDS, Confidence, Considered, Finding, Severity, Status
from bot.core.triage.knowledge import KnowledgeBase, Thresholds


@dataclass(frozen=True)
class State:
    """What the detectors read — the evidence, the facts, the curve, the knowledge base, the thresholds — and the
    record so far (findings, hypotheses considered, notes). A detector reads the record to weigh what came before
    it (a bug explains a collapse) and returns what it found; only the pipeline writes the record."""

    ev: Evidence
    kb: KnowledgeBase
    curve: Curve | None
    findings: list[Finding]
    considered: list[Considered]
    base: KB
    thresholds: Thresholds = field(default_factory=Thresholds)
    notes: list[str] = field(default_factory=list)

    @property
    def bug_fits(self) -> bool:
        return any(f.is_bug and f.severity in ("critical", "warning") for f in self.findings)

    @property
    def bug_known(self) -> bool:
        """A bug whose every premise is known (not a guessed version): it explains what it covers."""
        return any(f.is_bug and f.severity in ("critical", "warning") and f.confidence == "high" for f in self.findings)

    def record(self, found: Found) -> None:
        if found.withdrawn:
            self.findings[:] = [f for f in self.findings if f.id not in found.withdrawn]
        self.findings.extend(found.findings)
        self.considered.extend(found.considered)
        self.notes.extend(found.notes)


@dataclass
class Found:
    """What one detector concluded, for the pipeline to add to the record."""

    findings: list[Finding] = field(default_factory=list)
    considered: list[Considered] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # for the report: what the evidence shows beside any finding
    withdrawn: list[str] = field(default_factory=list)  # ids of findings in the record that this one supersedes

    def consider(self, st: State, issue_id: str, status: Status, why: str,
                 params: dict[str, Any] | None = None) -> None:
        facts = st.kb.issues[issue_id]
        title = fill(facts.title, base_params(st.ev) | (params or {}))
        self.considered.append(Considered(id=issue_id, title=title, status=status, why=why,
                                          upstream=list(facts.upstream)))

    def merge(self, other: Found) -> Found:
        self.findings += other.findings
        self.considered += other.considered
        self.notes += other.notes
        self.withdrawn += other.withdrawn
        return self


def issue_finding(st: State, issue_id: str, *, severity: Severity, confidence: Confidence, evidence: list[str],
                  params: dict[str, Any], finding_id: str | None = None, is_bug: bool = False, priority: int = 50,
                  sources: list[str] | None = None) -> Finding:
    facts = st.kb.issues[issue_id]
    return Finding(
        id=finding_id or issue_id, title=fill(facts.title, params), severity=severity, confidence=confidence,
        summary=fill(facts.summary, params).strip(), evidence=evidence,
        upstream=list(facts.upstream), sources=list(sources or facts.sources),
        remediation=[fill(r, params).strip() for r in facts.remediation], is_bug=is_bug, priority=priority,
        part=facts.part, inputs=list(facts.inputs), knobs=list(facts.knobs),
        advice=[a for a in facts.advice if a in ADVICE_KINDS],
    )


def curve_of(ev: Evidence) -> Curve | None:
    w = ev.window
    if w is None:
        return None
    k = w.k or ev.context.num_speculative_tokens
    return classify(w.per_position, w.mean, k, ev.context.method, w.accepted if w.counts_known else None,
                    ev.context.first_position_floor)
