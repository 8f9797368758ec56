"""Triage: what was read in, a Diagnosis out — findings ranked, hypotheses considered and ruled out, a verdict.

`diagnose(readings, knowledge)` is the core's one entry: it completes the context from the log, gathers the
evidence of the latest launch and runs the differential diagnosis (differential.py). The app only reads files,
hosts and Prometheus into Readings; bot.core.report.build_report gives the Diagnosis its JSON form.
"""

from __future__ import annotations

from bot.core.triage.context import build_context
from bot.core.triage.differential import Diagnosis, differential
from bot.core.triage.evidence import Evidence, Readings, gather
from bot.core.triage.knowledge import Knowledge, default_knowledge

__all__ = ["diagnose", "evidence_of"]


def diagnose(readings: Readings, knowledge: Knowledge | None = None) -> Diagnosis:
    knowledge = knowledge or default_knowledge()
    return differential(evidence_of(readings, knowledge), knowledge)


def evidence_of(readings: Readings, knowledge: Knowledge | None = None) -> Evidence:
    """The evidence the detectors weigh: the context completed from the log, the latest launch's window."""
    knowledge = knowledge or default_knowledge()
    return gather(readings, build_context(readings.flags, readings.parsed, knowledge.facts))
