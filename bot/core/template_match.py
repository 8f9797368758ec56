"""A message template against a line, in time linear in the line: literal chunks found in order, holes between.

A template is literal text and holes (`Model: {} with config {} {} …`). As one regex with a lazy `(.*?)` per
hole, a line that has the opening words but not the rest makes the engine try every split of the text between
the holes: polynomial in the line's length, with the interpreter's lock held (one pasted line of 1.8 KB froze a
whole bot for minutes). Here each literal chunk is searched once, leftmost, after the one before it, and the
last chunk must end the line: a match exists exactly when the regex would find one (the leftmost place of each
chunk leaves the most room for the ones after it), the holes get the same values as the lazy groups would, and
the work is at most one scan of the line per chunk. `Template.steps` counts the characters scanned, so a budget
can be checked and tested rather than timed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# the most characters a line is read for (a message longer than this is cut: nothing vLLM raises is longer)
MAX_TEXT = 4000


def literal_regex(text: str) -> str:
    """A literal chunk, each run of whitespace in it matching any run of whitespace (a log line rewraps)."""
    return "".join(r"\s+" if piece.isspace() else re.escape(piece) for piece in re.split(r"(\s+)", text) if piece)


@dataclass(frozen=True)
class Template:
    """`parts`: literal, hole, literal, …, literal (odd length; hole texts are the holes' names)."""

    head: re.Pattern[str]  # the first literal, at the line's start
    middle: tuple[re.Pattern[str], ...]  # the literals between holes, searched in order
    tail: re.Pattern[str] | None  # the last literal, at the line's end (None: the template ends in a hole)
    holes: int

    @classmethod
    def of(cls, parts: list[str]) -> Template:
        if len(parts) == 1:
            return cls(re.compile(r"\s*" + literal_regex(parts[0].strip()) + r"\s*\Z", re.DOTALL), (), None, 0)
        first, last = parts[0].lstrip(), parts[-1].rstrip()
        middle = tuple(re.compile(literal_regex(p)) for p in parts[2:-1:2])
        tail = re.compile(literal_regex(last) + r"\s*\Z") if last else None
        return cls(re.compile(r"\s*" + literal_regex(first)), middle, tail, len(parts) // 2)

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
        values: list[str] = []
        for rx in self.middle:
            found = rx.search(text, pos, limit)
            steps += (found.end() if found else limit) - pos
            if found is None:
                return None
            values.append(text[pos:found.start()])
            pos = found.end()
        values.append(text[pos:limit] if self.tail is not None else text[pos:].rstrip())
        return values, steps
