"""A report of a few log lines, as the batch-rule tests read it: the whole pipeline, pure (no I/O)."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def report_of(text: str, version: str | None = None, gpu: str | None = None) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags(vllm_version=version, gpu=gpu))))


def claims_of(text: str, version: str | None = None, gpu: str | None = None) -> list[Finding]:
    """The report's warning and critical findings: what it claims."""
    return [f for f in report_of(text, version, gpu).findings if f.severity in ("critical", "warning")]
