"""A message template against a line, in time linear in the line: literal chunks found in order, holes between.

A template is literal text and holes (`Model: {} with config {} {} …`). As one regex with a lazy `(.*?)` per
hole, a line that has the opening words but not the rest makes the engine try every split of the text between
the holes: polynomial in the line's length, with the interpreter's lock held (one pasted line of 1.8 KB froze a
whole bot for minutes). Here each literal chunk is searched once, leftmost, after the one before it, and the
last chunk must end the line: a match exists exactly when the regex would find one (the leftmost place of each
chunk leaves the most room for the ones after it), the holes get the same values as the lazy groups would, and
the work is at most one scan of the line per chunk. A chunk that ends in whitespace takes the whole run first (the
regex's own greedy run); when that leaves too little for the chunks after it, a second pass takes the shortest
run and starts the last chunk as late as it can — two scans per chunk at most. `Template.steps` counts the
characters scanned, so a budget can be checked and tested rather than timed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# the most characters a line is read for (a message longer than this is cut: nothing vLLM raises is longer)
MAX_TEXT = 4000


def literal_regex(text: str) -> str:
    """A literal chunk, each run of whitespace in it matching any run of whitespace (a log line rewraps)."""
    return "".join(r"\s+" if piece.isspace() else re.escape(piece) for piece in re.split(r"(\s+)", text) if piece)


def _ending(text: str) -> str:
    """The message's last literal, its closing full stop optional: a paste often drops a sentence's last period."""
    if text.endswith(".") and not text.endswith(".."):
        return literal_regex(text[:-1]) + r"\.?"
    return literal_regex(text)


@dataclass(frozen=True)
class Template:
    """`parts`: literal, hole, literal, …, literal (odd length; hole texts are the holes' names)."""

    head: re.Pattern[str]  # the first literal, at the line's start
    middle: tuple[re.Pattern[str], ...]  # the literals between holes, searched in order
    tail: re.Pattern[str] | None  # the last literal, at the line's end (None: the template ends in a hole)
    holes: int
    # the same literals with their whitespace runs at the fewest characters (the second pass)
    shortest: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def of(cls, parts: list[str]) -> Template:
        if len(parts) == 1:
            return cls(re.compile(r"\s*" + _ending(parts[0].strip()) + r"\s*\Z", re.DOTALL), (), None, 0)
        first, last = parts[0].lstrip(), parts[-1].rstrip()
        middle = tuple(re.compile(literal_regex(p)) for p in parts[2:-1:2])
        shortest = tuple(re.compile(literal_regex(p).replace(r"\s+", r"\s+?")) for p in parts[2:-1:2])
        tail = re.compile(_ending(last) + r"\s*\Z") if last else None
        return cls(re.compile(r"\s*" + literal_regex(first)), middle, tail, len(parts) // 2, shortest)

    def match(self, text: str, start: int = 0) -> tuple[list[str], int] | None:
        """The holes' values when the whole of `text[start:]` matches, and the characters scanned; else None."""
        text = text[:MAX_TEXT]
        m = self.head.match(text, start)
        if m is None:
            return None
        steps = m.end() - start
        if not self.holes:
            return [], steps
        pos, limit = m.end(), len(text)
        if self.tail is not None:
            # the last literal ends the line: where it begins bounds the search for the ones before it
            t = self.tail.search(text, pos)
            steps += len(text) - pos
            if t is None:
                return None
            limit = t.start()
        placed = self._between(text, pos, limit, self.middle)
        steps += placed[1]
        if placed[0] is None and self.shortest and self.shortest != self.middle:
            # the whole whitespace runs left too little room: the shortest runs, the last literal as late as it goes
            late = limit
            while late + 1 < len(text) and text[late].isspace() and text[late + 1].isspace():
                late += 1
            placed = self._between(text, pos, late, self.shortest)
            steps += placed[1]
            limit = late
        if placed[0] is None:
            return None
        values, pos = placed[0]
        values.append(text[pos:limit] if self.tail is not None else text[pos:].rstrip())
        return values, steps

    @staticmethod
    def _between(text: str, pos: int, limit: int, chunks: tuple[re.Pattern[str], ...]
                 ) -> tuple[tuple[list[str], int] | None, int]:
        """Each chunk at its leftmost place after the one before it, within [pos, limit): the holes' values before
        each and where the last ended (None when one is not there), and the characters scanned."""
        values: list[str] = []
        steps = 0
        for rx in chunks:
            found = rx.search(text, pos, limit)
            steps += (found.end() if found else limit) - pos
            if found is None:
                return None, steps
            values.append(text[pos:found.start()])
            pos = found.end()
        return (values, pos), steps
