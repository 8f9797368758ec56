"""The SpecDecoding line read as (label, value) pairs: variants of its wording parse like the line itself,
and a line that looks like metrics but cannot be read is counted and shown, never dropped (issue 19)."""

from __future__ import annotations

import pytest

from bot.core.logparse import parse_text
from bot.core.metrics_lines import parse_spec_message
from bot.core.specline import spec_fields
from tests.support.core_views import metric_pairs

LINE = ("Mean acceptance length: 4.74, Accepted throughput: 98.70 tokens/s, Drafted throughput: 158.40 tokens/s, "
        "Accepted: 987 tokens, Drafted: 1584 tokens, Per-position acceptance rate: 0.917, 0.837, 0.648, 0.538, "
        "0.451, 0.348, Avg Draft acceptance rate: 62.3%")
WANT = {"mean": "4.74", "atps": "98.70", "dtps": "158.40", "acc": "987", "dr": "1584",
        "pp": "0.917, 0.837, 0.648, 0.538, 0.451, 0.348", "avg_rate": "62.3", "rate_pct": "1"}
FIELDS = [f.strip() for f in LINE.replace("tokens, ", "tokens| ").replace("tokens/s, ", "tokens/s| ")
          .replace("length: 4.74, ", "length: 4.74| ").replace("0.348, ", "0.348| ").split("| ")]


def _check(text: str) -> None:
    got = spec_fields(text)
    assert {k: got.get(k) for k in WANT} == WANT, text
    s = parse_spec_message("SpecDecoding metrics: " + text)
    assert s is not None and s.per_position == [0.917, 0.837, 0.648, 0.538, 0.451, 0.348]
    assert (s.accepted, s.drafted, s.mean_acceptance_length) == (987, 1584, 4.74)


def test_the_fields_are_six_plus_two() -> None:
    assert len(FIELDS) == 7


@pytest.mark.parametrize("sep", [", ", "; ", " | ", " - ", ",", ";"])
def test_any_separator(sep: str) -> None:
    _check(sep.join(FIELDS))


def test_any_field_order() -> None:
    _check(", ".join(reversed(FIELDS)))
    _check(", ".join(FIELDS[3:] + FIELDS[:3]))


def test_equals_instead_of_colon_and_any_case() -> None:
    _check(", ".join(f.replace(": ", "=", 1) for f in FIELDS))
    _check(", ".join(f.replace(": ", " = ", 1) for f in FIELDS))
    _check(LINE.upper().replace("TOKENS", "tokens"))
    _check(LINE.lower())


def test_a_doubled_word_and_an_extra_field() -> None:
    _check(LINE.replace("Mean acceptance", "Mean mean acceptance").replace("Per-position", "Per-position position"))
    _check("Step time: 12.5 ms, " + LINE + ", Rejected drafts: 17")


def test_underscored_labels() -> None:
    _check(", ".join(f.replace(" ", "_", f.index(":") and f[:f.index(":")].count(" ")) for f in FIELDS))


def test_a_throughput_written_as_a_count_is_still_a_throughput() -> None:
    assert spec_fields("accepted=74 tok/s, drafted=90 tok/s") == {"atps": "74", "dtps": "90"}


def test_a_shortened_curve_is_expanded() -> None:
    got = spec_fields("Per-position acceptance rate: 0.166, 0.017, 0.000 (x13), Avg Draft acceptance rate: 1.2%")
    assert got["pp"].split(", ") == ["0.166", "0.017"] + ["0.000"] * 13


def test_words_after_the_rates_end_them() -> None:
    assert spec_fields("Per-position acceptance: 0.933 / 0.850 / 0.687  (avg 82.3%)")["pp"] == "0.933, 0.850, 0.687"


def test_pairs_keep_their_order() -> None:
    labels = [w for w, _v in metric_pairs("SpecDecoding metrics: Accepted: 3 tokens, Drafted: 9 tokens")]
    assert labels == [("specdecoding", "metrics"), ("accepted",), ("drafted",)]


def test_a_metrics_line_that_cannot_be_read_is_counted_with_its_text() -> None:
    bad = ("(APIServer pid=1) INFO 05-08 16:26:29 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
           "1.50, Per-position acceptance rate: 0.2, 0.9")  # rates never rise: cut or interleaved
    parsed = parse_text(bad + "\n" + bad.replace("1.50", "1.60"))
    assert parsed.samples == [] and parsed.stats.skipped == 2
    assert parsed.stats.skipped_examples[0].startswith("(APIServer pid=1)")
    assert len(parsed.stats.skipped_examples) == 2


def test_skipped_examples_are_bounded_and_merge() -> None:
    bad = "SpecDecoding metrics: Mean acceptance length: 0.50, Per-position acceptance rate: 0.7"
    parsed = parse_text("\n".join([bad] * 10))
    assert parsed.stats.skipped == 10 and len(parsed.stats.skipped_examples) == 3
    other = parse_text(bad)
    parsed.stats.merge(other.stats)
    assert parsed.stats.skipped == 11 and len(parsed.stats.skipped_examples) == 3


def test_prose_about_acceptance_is_not_metrics() -> None:
    parsed = parse_text("(APIServer pid=1) WARNING 05-08 16:26:29 [x.py:1] acceptance is low on this prompt set")
    assert parsed.stats.skipped == 0 and parsed.samples == []
