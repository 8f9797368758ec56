"""The one failure table: every knowledge-base signature compiled once, with its pre-scan needles.

A log line is matched in two steps so the cost does not grow with the number of signatures: one
Aho-Corasick pass over the needles (the longest literal of each pattern, lower-cased) finds which
signatures a line could match, then only those patterns run, compiled the first time they do.
When several signatures match one line, the most specific wins: the longest matched text, then
the longest pattern.

Process events that are not failures (the server's own shutdown line) live here too, so the parser
has one table to consult.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from re import _parser as _sre_parse  # type: ignore[attr-defined]  # the re module's own parser (3.11+)
from typing import Any

import ahocorasick_rs

from bot.core.kb import KB, Entry, Fixture, compile_kb, compiled_needles, load_kb
from bot.core.lines import strip_for_matching

MIN_NEEDLE = 4  # a shorter literal finds too many lines to be worth a pre-scan


@dataclass(frozen=True)
class Signature:
    id: str
    family: str
    kind: str
    severity: str
    fatal_at_launch: bool
    fallback: bool
    sources: tuple[str, ...]  # the patterns' text; compiled the first time a line reaches this signature
    needles: tuple[tuple[str, ...] | None, ...]  # per pattern; None: tried on every line that reaches the table

    @cached_property
    def patterns(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p, re.IGNORECASE) for p in self.sources)


@dataclass(frozen=True)
class Match:
    signature: Signature
    detail: dict[str, str]
    span: int


# process events that are not failures; each is still one row of the table
PROCESS_EVENTS: tuple[tuple[str, str], ...] = (
    ("shutdown", r"\[shutdown\] API server: shutdown triggered"),
)


def _runs(ops: Any) -> list[str]:
    """Literal runs at the top of a parsed pattern, descending into plain (non-repeated) groups."""
    runs: list[str] = []
    run: list[str] = []
    for op, arg in ops:
        if op is _sre_parse.LITERAL:
            run.append(chr(arg))
            continue
        if run:
            runs.append("".join(run))
            run = []
        if op is _sre_parse.SUBPATTERN and isinstance(arg, tuple) and len(arg) == 4:
            runs += _runs(arg[3])
    if run:
        runs.append("".join(run))
    return runs


def _best(ops: Any) -> str | None:
    runs = [r.lower() for r in _runs(ops) if len(r.strip()) >= MIN_NEEDLE]
    return max(runs, key=len) if runs else None


def needles_of(pattern: str) -> tuple[str, ...] | None:
    """Literals one of which every match of `pattern` contains (lower-cased), or None if there are none.

    A single required literal gives one needle; a pattern that is one alternation gives one needle per
    alternative (when each has one)."""
    try:
        parsed = list(_sre_parse.parse(pattern, re.IGNORECASE))
    except re.error:
        return None
    best = _best(parsed)
    if best:
        return (best,)
    ops = parsed
    while len(ops) == 1 and ops[0][0] is _sre_parse.SUBPATTERN:
        ops = list(ops[0][1][3])
    if len(ops) == 1 and ops[0][0] is _sre_parse.BRANCH:
        alts = [_best(list(alt)) for alt in ops[0][1][1]]
        if all(alts):
            return tuple(a for a in alts if a)
    return None


class FailureTable:
    def __init__(self, signatures: list[Signature]) -> None:
        self.signatures = signatures
        by_needle: dict[str, list[tuple[Signature, int]]] = {}
        self._always: list[tuple[Signature, int]] = []
        for sig in signatures:
            for i, needles in enumerate(sig.needles):
                if needles:
                    for needle in needles:
                        by_needle.setdefault(needle, []).append((sig, i))
                else:
                    self._always.append((sig, i))
        # longest first, so an alternation reports the longest needle at a position
        ordered = sorted(by_needle, key=len, reverse=True)
        self.needles: tuple[str, ...] = tuple(ordered)
        self._sigs_of = [list(dict.fromkeys(by_needle[n])) for n in ordered]
        # one pass over a line for every needle, however many signatures there are
        self._automaton = ahocorasick_rs.AhoCorasick(list(ordered)) if ordered else None

    def candidates(self, lowered: str) -> list[tuple[Signature, int]]:
        """The patterns a (lower-cased, stripped) line could match: those with a needle in it."""
        found: list[tuple[Signature, int]] = list(self._always)
        if self._automaton is not None:
            for idx in sorted({i for i, _s, _e in self._automaton.find_matches_as_indexes(lowered, overlapping=True)}):
                found += self._sigs_of[idx]
        return list(dict.fromkeys(found))  # a pattern reached by two of its needles runs once

    def match(self, line: str) -> Match | None:
        text = strip_for_matching(line)
        lowered = text.lower()
        best: Match | None = None
        best_key = (-1, -1, -1)
        for sig, i in self.candidates(lowered):
            m = sig.patterns[i].search(text)
            if m is None:
                continue
            key = (0 if sig.fallback else 1, m.end() - m.start(), len(sig.patterns[i].pattern))
            if key > best_key:
                best_key = key
                best = Match(sig, {k: v for k, v in m.groupdict().items() if v is not None}, key[1])
        return best

    def could_match(self, line: str) -> bool:
        """Cheap: does the line hold any needle (or is there a needle-less pattern to try)?"""
        if self._always:
            return True
        return self._automaton is not None and bool(self._automaton.find_matches_as_indexes(line.lower()))

    @property
    def failing_ids(self) -> frozenset[str]:
        """Signatures of a failure (at launch or while serving), not of information."""
        return frozenset(s.id for s in self.signatures if s.severity == "failing")

    @property
    def fatal_ids(self) -> frozenset[str]:
        return frozenset(s.id for s in self.signatures if s.fatal_at_launch)


def entry_needles(entry: Entry) -> list[list[str] | None]:
    """Per pattern: the literals one of which each match holds (lower-cased), or None."""
    out: list[list[str] | None] = []
    for p in entry.patterns:
        found = (entry.needle.lower(),) if entry.needle and entry.needle.lower() in p.lower() else needles_of(p)
        out.append(list(found) if found else None)
    return out


def signature_of(entry: Entry, compiled: list[list[str] | None] | None = None) -> Signature:
    per_pattern = compiled if compiled is not None and len(compiled) == len(entry.patterns) else entry_needles(entry)
    needles = tuple(tuple(n) if n else None for n in per_pattern)
    return Signature(entry.id, entry.family, entry.kind, entry.severity, entry.fatal_at_launch, entry.fallback,
                     tuple(entry.patterns), needles)


def build_table(kb: KB, needles: dict[str, list[list[str] | None]] | None = None) -> FailureTable:
    """`needles`: each entry's, as compiled.json holds them (else derived from the patterns here)."""
    sigs = [signature_of(e, (needles or {}).get(e.id)) for e in kb.entries if e.patterns]
    for kind, rx in PROCESS_EVENTS:
        sigs.append(Signature(kind, "process", "informational", "info", False, False, (rx,),
                              (needles_of(rx),)))
    return FailureTable(sigs)


@lru_cache(maxsize=1)
def default_table() -> FailureTable:
    return build_table(load_kb(), compiled_needles())


def compiled_kb_text() -> str:
    """compiled.json for the knowledge base as it is now: its entries, needles and triage facts."""
    kb = load_kb()
    return compile_kb({e.id: entry_needles(e) for e in kb.entries if e.patterns})


def check_signatures(kb: KB, fixtures: dict[str, list[Fixture]]) -> list[str]:
    """Problems: an entry without a fixture, a fixture without its source, a fixture whose lines its own
    patterns do not match, or whose line another entry would claim first."""
    table = build_table(kb)
    problems: list[str] = []
    for e in kb.entries:
        fx = fixtures.get(e.id, [])
        if not fx:
            problems.append(f"{e.id}: no fixture (tests/fixtures/kb/{e.id}.txt)")
            continue
        for f in fx:
            if not f.source:
                problems.append(f"{f.name}: no `# source: URL` line")
            elif f.source not in e.sources:
                problems.append(f"{f.name}: its source {f.source} is not among the entry's sources")
            if not f.lines:
                problems.append(f"{f.name}: no quoted line")
                continue
            if not e.patterns:
                continue  # acceptance entries are checked by diagnosing their fixture (bot.app.evaluation.kb)
            own_patterns = [re.compile(p, re.IGNORECASE) for p in e.patterns]
            own = [ln for ln in f.lines if any(p.search(strip_for_matching(ln)) for p in own_patterns)]
            if not own:
                problems.append(f"{f.name}: no line matches the entry's patterns")
                continue
            winners = {m.signature.id for ln in own if (m := table.match(ln)) is not None}
            if e.id not in winners:
                problems.append(f"{f.name}: claimed first by {', '.join(sorted(winners))} (make one more specific)")
    return problems
