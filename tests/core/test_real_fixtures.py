"""The triage core on what a real vLLM 0.32.0 (CPU build) printed in this project's real-vLLM runs
(short excerpts captured by bench/realvllm.py --fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.logparse import parse_text
from bot.core.report import build_report
from bot.core.triage import diagnose
from bot.core.triage.evidence import Readings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_real_ngram_log() -> None:
    parsed = parse_text((FIXTURES / "real-vllm-0.32.0-ngram.log").read_text())
    assert parsed.stats.skipped == 0 and len(parsed.samples) >= 2
    for s in parsed.samples:
        # ngram drafts fewer than k tokens at times: drafts come from vLLM's identity, not drafted / k
        assert s.num_drafts is not None
        assert 1 + s.accepted / s.num_drafts == pytest.approx(s.mean_acceptance_length, abs=0.01)
    report = build_report(diagnose(Readings(parsed=parsed)))
    assert report.context["vllm_version"] == "0.32.0" and report.context["method"] == "ngram"
    assert report.context["num_speculative_tokens"] == 3
    assert report.verdict == "healthy" and not any(f.upstream for f in report.findings)
    logged = [s.mean_acceptance_length for s in parsed.samples]
    assert min(logged) - 0.01 <= (report.metrics.mean_acceptance_length or 0) <= max(logged) + 0.01


