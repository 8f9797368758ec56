"""Rules from earlier batches' misses, written while the forty-sixth batch was collected (before any of it was
scored): a log that holds only notices another library prints at a known site of its own is "only notices", as
vLLM's own are."""

from __future__ import annotations

from tests.core.triage.reports import report_of


def test_a_lone_notice_of_another_library_at_its_own_site_is_only_notices() -> None:
    report = report_of("Setting `pad_token_id` to `eos_token_id`:2 for open-end generation.")
    assert report.verdict == "healthy"
    assert any(f.site is not None and f.site.package == "transformers" for f in report.findings)


def test_a_library_refusal_or_an_error_line_is_not_a_notice() -> None:
    refusal = report_of("ValueError: Tokenizer class FooTokenizer does not exist or is not currently imported.")
    assert refusal.verdict == "failing"
    stray = report_of("ERROR 05-01 10:00:00 something went wrong while loading")
    assert stray.verdict != "healthy"
