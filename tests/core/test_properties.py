"""Hypothesis: the parsers and the triage never raise, whatever they are fed."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.core.logparse import LineParser, parse_text
from bot.core.report import build_report
from bot.core.triage import diagnose
from bot.core.triage.evidence import Readings

FRAGMENTS = [
    "SpecDecoding metrics: ", "Mean acceptance length: ", "Accepted: ", " tokens, ", "Drafted: ",
    "Per-position acceptance rate: ", "0.917, ", "nan", "Avg Draft acceptance rate: ", "%", "Engine 000: ",
    "Avg prompt throughput: ", "Running: ", " reqs", "(APIServer pid=1) ", "INFO 05-08 16:26:29 [metrics.py:101] ",
    "non-default args: {", "'speculative_config': ", "}", "Error", "\x1b[36m", "\n", ", ", "1.18", "13 Engines "
    "Aggregated: ", "vLLM server version ", "Speculative metrics: ", "DFlash does not yet support", "[Errno 98]",
]
line_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)), max_size=40).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line_text)
def test_parser_and_triage_never_raise_on_text(text: str) -> None:
    parsed = parse_text(text)
    lines = len(text.splitlines())
    assert parsed.stats.lines == lines
    assert len(parsed.samples) + len(parsed.engine) <= parsed.stats.parsed <= lines
    for s in parsed.samples:  # what the parser keeps obeys vLLM's own bounds
        assert all(0.0 <= x <= 1.0 for x in s.per_position if x == x), s
    report = build_report(diagnose(Readings(parsed=parsed)))
    assert report.verdict in ("healthy", "degraded", "failing", "unknown")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_line_parser_never_raises_on_bytes(data: bytes) -> None:
    p = LineParser()
    for line in data.split(b"\n"):
        p.feed(line)
    assert p.result.stats.lines == data.count(b"\n") + 1
