"""The redactor's prefilters (bot/redact.py, Rule.prefilter): a rule runs only where its prefilter matches, so a
prefilter must match on every line its rule matches on — checked over the secret corpus, every case log and the
fixtures. And the windowed reading of a large text masks what the whole-text reading masks."""

from __future__ import annotations

from pathlib import Path

from bot.redact import WINDOW, Redactor, _apply, _spans_in, rule_set
from tests.support.secret_corpus import SHAPES

TESTS = Path(__file__).resolve().parent


def _lines() -> list[str]:
    files = [*TESTS.glob("fixtures/*.log"), *TESTS.glob("cases*/*/log.txt")]
    lines = [line for f in sorted(files) for line in f.read_text(errors="replace").splitlines()]
    return [*lines, *(line for s in SHAPES for line in s.line.splitlines())]


def test_every_prefilter_matches_wherever_its_rule_does() -> None:
    rules = [r for r in rule_set().rules if r.prefilter is not None]
    assert len(rules) >= 50  # gitleaks' generic shape, and specops' own costly or keyword-anchored rules
    missed = []
    for line in _lines():
        low = line.lower()
        for rule in rules:
            if rule.pattern.search(line) and not rule.prefilter.search(low if len(low) == len(line) else line):
                missed.append((rule.id, line[:120]))
    assert not missed, missed[:5]


def test_a_rule_with_a_lead_finds_what_a_whole_line_search_finds() -> None:
    r = Redactor()
    checked = 0
    for shape in SHAPES:
        whole = [(s, e) for rule in rule_set().rules if rule.lead is not None
                 for s, e in _spans_in(rule, shape.line, 0, len(shape.line))]
        if whole:
            checked += 1
            assert all(shape.line[s:e] not in r.text(shape.line) for s, e in whole), shape.name
    assert checked >= 5  # the corpus holds shapes these rules read: the check is not vacuous


def test_a_large_text_read_in_windows_masks_what_the_whole_reading_masks() -> None:
    filler = "INFO 12-01 10:00:00 [loggers.py:123] Engine 000: Avg prompt throughput: 812.4 tokens/s, Running: 4 reqs\n"
    text = "".join(filler * 400 + shape.line + "\n" for shape in SHAPES)
    assert len(text) > 2 * WINDOW
    r = Redactor()
    windowed = r.text(text)
    assert windowed == _apply(text, r._all_found(text))
    assert not [s for shape in SHAPES for s in shape.secrets if s in windowed]


def test_a_value_longer_than_a_window_is_masked_whole() -> None:
    value = "Q7x" * (WINDOW // 2)
    out = Redactor().text(f"start\npassword={value}\nend")
    assert out == "start\npassword=(redacted)\nend"


def test_a_generic_value_running_past_the_search_reach_is_masked_to_its_line_end() -> None:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789+/"
    value = "".join(alphabet[(i * 7 + i * i) % len(alphabet)] for i in range(6000))
    out = Redactor().text(f"export api_key={value}\nnext line")
    assert value[-40:] not in out and value[:40] not in out and out.endswith("\nnext line"), out[:200]
