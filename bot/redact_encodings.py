"""The encodings a secret may be written through — percent-encoding, JSON and Python string escapes, zero-width and
fullwidth characters — and a line decoded with the way back to where each decoded character stood (bot/redact.py
runs its rules on the decoded copy and masks the spans it maps back)."""

from __future__ import annotations

import bisect
import re

# what a secret may be written through: percent-encoding (a URL's query, a DSN in a URL), JSON and Python string
# escapes, and characters that show as nothing or as ASCII (zero-width, soft hyphen, fullwidth forms)
ENCODED = re.compile("%[0-9A-Fa-f]{2}|\\\\u[0-9A-Fa-f]{4}|\\\\x[0-9A-Fa-f]{2}|\\\\[\"'\\\\/nrt]|"
                      "[\u200b\u200c\u200d\u2060\ufeff\u00ad]|[\uff01-\uff5e]")
# what makes a line worth decoding: a character written in an encoding a rule cannot read through (an escaped
# quote or backslash alone is not: the JSON rule reads JSON strings, and decoding every line of a JSON log would
# double the cost); an escaped newline or quote only beside a shape that spans lines (a key block, a YAML block,
# netrc)
STRONG = re.compile("%[0-9A-Fa-f]{2}|\\\\+[ux][0-9A-Fa-f]{2}|[\u200b\u200c\u200d\u2060\ufeff\u00ad\uff01-\uff5e]")
TRIGGER = re.compile(STRONG.pattern + "|\\\\+[n\"]")
# ... or an escaped quote right before a secret's name (a JSON document inside a JSON string)
HINT = re.compile(r"(?i)-----begin|putty-user-key-file|:[ \t]*[|>][-+]?[ \t]*\\+n|\bmachine\b|"
                   r"\\+\"[\w.-]{0,40}(?:pass|secret|token|key|auth|credential|sig)")
# the same on a lowercased text: a case-insensitive scan of a window costs three times a case-sensitive one
HINT_LOW = re.compile(HINT.pattern.removeprefix("(?i)"))
DEPTH = 3  # layers of encoding undone: a JSON string inside a JSON string inside a URL
_FOLDED = "\u200b\u200c\u200d\u2060\ufeff\u00ad"


def _decode_one(token: str) -> str:
    if token[0] == "%":
        c = chr(int(token[1:], 16))
        return c if c < "\x80" else token  # a byte of a UTF-8 sequence: left as written
    if token[0] == "\\":
        kind = token[1]
        if kind in "ux":
            c = chr(int(token[2:], 16))
            if c in _FOLDED:  # an escaped zero-width character is still nothing
                return ""
            return chr(ord(c) - 0xFEE0) if "\uff01" <= c <= "\uff5e" else c
        return {"n": "\n", "r": "\r", "t": "\t"}.get(kind, kind)  # \" \' \\ \/ and the control escapes
    if token in _FOLDED:
        return ""
    return chr(ord(token) - 0xFEE0)  # a fullwidth form: its ASCII character


def decoded_token(m: re.Match[str]) -> str:
    return _decode_one(m.group())


class Decoded:
    """A line with each encoded character decoded, and the way back: which characters of the line each decoded
    character came from."""

    def __init__(self, line: str) -> None:
        parts: list[str] = []
        # (decoded start, decoded length, original start, original length, literal)
        self.segments: list[tuple[int, int, int, int, bool]] = []
        d = pos = 0
        for m in ENCODED.finditer(line):
            if m.start() > pos:
                n = m.start() - pos
                parts.append(line[pos:m.start()])
                self.segments.append((d, n, pos, n, True))
                d += n
            ch = _decode_one(m.group())
            parts.append(ch)
            self.segments.append((d, len(ch), m.start(), m.end() - m.start(), ch == m.group()))
            d += len(ch)
            pos = m.end()
        if pos < len(line):
            parts.append(line[pos:])
            self.segments.append((d, len(line) - pos, pos, len(line) - pos, True))
        self.text = "".join(parts)
        self._line = len(line)
        self._starts = [seg[0] for seg in self.segments if seg[1]]
        self._kept = [seg for seg in self.segments if seg[1]]

    def _segment(self, at: int) -> tuple[int, int, int, int, bool]:
        return self._kept[max(0, bisect.bisect_right(self._starts, at) - 1)]

    def origin(self, at: int) -> int:
        """Where decoded character `at` starts in the line."""
        if not self._kept or at >= len(self.text):
            return self._line
        d, _n, o, _on, literal = self._segment(at)
        return o + (at - d) if literal else o

    def end_origin(self, end: int) -> int:
        """Where a decoded span ending before `end` ends in the line."""
        if end <= 0 or not self._kept:
            return 0
        d, _n, o, on, literal = self._segment(end - 1)
        return o + (end - d) if literal else o + on
