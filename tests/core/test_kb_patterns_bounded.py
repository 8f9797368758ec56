"""Every knowledge-base pattern is linear in the line it reads (issue 36: no regular expression runs on
untrusted text without a bound): no unbounded repeat inside another, checked on each pattern's parse tree; and
each pattern answers a 2 KB adversarial line — its own words repeated, the last one missing — at once."""

from __future__ import annotations

import re
import time
from re import _parser as parser  # type: ignore[attr-defined]

from bot.core.kb import load_kb
from tests.core.test_catalogs import _nested_repeat


def _patterns() -> list[tuple[str, str]]:
    return [(e.id, p) for e in load_kb().entries for p in e.patterns]


def test_no_pattern_nests_an_unbounded_repeat() -> None:
    found = _patterns()
    assert len(found) > 100
    assert not [(i, p) for i, p in found if _nested_repeat(parser.parse(p))]


def test_each_pattern_on_its_own_words_repeated_without_the_last() -> None:
    begun = time.perf_counter()
    for _id, p in _patterns():
        words = re.findall(r"[A-Za-z]{3,}", p)
        if len(words) < 2:
            continue
        line = (" ".join(words[:-1]) + " x ") * (2048 // (len(" ".join(words)) + 3) + 1)
        re.search(p, line[:2048], re.IGNORECASE)
    # a guard against minutes of backtracking, not a timing of speed (bench/ measures that)
    assert time.perf_counter() - begun < 10
