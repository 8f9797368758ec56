"""/metrics text read through prometheus_client's parser into the core's snapshot and window."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.app.prometheus.text import parse_prometheus
from bot.core.prom_samples import split_scrapes, window

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_prometheus_window_from_two_scrapes(fixtures: Path) -> None:
    blocks = split_scrapes(fixtures.joinpath("metrics-0.32.0.prom").read_text())
    assert len(blocks) == 2
    a, b = (parse_prometheus(x) for x in blocks)
    assert a.num_drafts == 100 and b.accepted_per_pos == {0: 166.0, 1: 105.0, 2: 56.0}
    assert b.gauges["vllm:num_requests_running"] == 1.0
    w = window(a, b)
    assert w is not None
    assert w.mean_acceptance_length == pytest.approx(1 + 177 / 107)
    assert w.per_position == pytest.approx([86 / 107, 55 / 107, 36 / 107])
    assert w.avg_draft_acceptance_rate == pytest.approx(100 * 177 / 321)
    # the identity holds for the window as for the log line
    assert w.mean_acceptance_length - 1 == pytest.approx(sum(w.per_position))


def test_prometheus_restart_between_scrapes_gives_no_window(fixtures: Path) -> None:
    a, b = (parse_prometheus(x) for x in split_scrapes(fixtures.joinpath("metrics-0.32.0.prom").read_text()))
    assert window(b, a) is None


def test_prometheus_garbage_is_skipped() -> None:
    snap = parse_prometheus('vllm:spec_decode_num_drafts_total{engine="0"} notanumber\n}{ junk\n'
                            'vllm:spec_decode_num_drafts_total{engine="0"} 4\n')
    assert snap.num_drafts == 4 and snap.skipped == 2


def test_a_label_value_with_a_brace_still_counts() -> None:
    # a hand-written `{[^}]*}` pattern dropped this line without a word
    snap = parse_prometheus('vllm:spec_decode_num_drafts_total{engine="0",model_name="org/m}x"} 7\n'
                            'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="org/m}x"} 9\n')
    assert snap.num_drafts == 7 and snap.num_accepted_tokens == 9 and snap.model_names == {"org/m}x"}
    assert snap.skipped == 0


def test_escaped_quotes_and_timestamps_are_read() -> None:
    snap = parse_prometheus('vllm:num_requests_running{model_name="a\\"b"} 3 1700000000000\n')
    assert snap.gauges["vllm:num_requests_running"] == 3 and snap.model_names == {'a"b'}


def test_real_metrics_scrape() -> None:
    snap = parse_prometheus((FIXTURES / "real-vllm-0.32.0.prom").read_text())
    assert snap.has_spec_decode and sorted(snap.accepted_per_pos) == [0, 1, 2]
    sample = snap.as_sample()
    assert sample is not None
    assert sample.mean_acceptance_length == pytest.approx(1 + snap.num_accepted_tokens / snap.num_drafts)
    assert sample.mean_acceptance_length - 1 == pytest.approx(sum(sample.per_position))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=2000))
def test_prometheus_parser_never_raises(text: str) -> None:
    for block in split_scrapes(text) or [text]:
        parse_prometheus(block)
