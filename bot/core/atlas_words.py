"""How the atlas reads words: a log line split into vLLM's prefix, an exception's class and the message; how much
of a template's own words a message shows (a line cut short, a foreign prefix before it); whether that is enough to
place the line at a site; and a site's guarding condition in plain words. Pure: strings in, strings out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.core.lines import without_colour
from bot.core.template_match import Template

# a verified match that is not the whole message must still show this much of the template's words
MIN_PARTIAL_CHARS = 20
MIN_PARTIAL_SHARE = 0.6
_CUT_TAIL = 120  # what one hole's value may hold at the end of a message that was cut after it
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.|…)$")
_SENTENCE_WORDS = 24  # the characters of a first sentence that place a message cut after it
# `(APIServer pid=13026) ERROR 05-08 16:26:29 [core.py:700] ` and the older `INFO 11-29 10:00:00 file.py:123] `
_PREFIX = re.compile(
    r"^\[?(?:\([\w.-]+(?: pid=\d+)?\)\s+)?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+"
    r"\d\d-\d\d\s+\d\d:\d\d:\d\d(?:\.\d+)?\s+\[?([\w.-]+\.py):(\d+)\]\s?")
_EXC = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt|Failure)|AssertionError)"
                  r": (.*)$", re.DOTALL)
# pydantic wraps a validator's ValueError: `  Value error, <message> [type=value_error, input_value=...`
_PYDANTIC = re.compile(r"^(?:Value|Assertion) error, (.*?)(?: \[type=\w+.*)?$", re.DOTALL)


def up_to_first_line(parts: list[str]) -> tuple[list[str], bool]:
    """The parts up to the template's first newline in literal text, and whether anything was cut."""
    for i in range(0, len(parts), 2):
        if "\n" in parts[i]:
            return [*parts[:i], parts[i].split("\n", 1)[0]], True
    return parts, False


def coverage(parts: list[str], message: str) -> tuple[int, int]:
    """How many characters of the template's literal chunks occur in the message, in order, and how many the
    message could have shown: a line cut short (a log collector's limit, or a message whose later lines the
    log dropped) ends inside a chunk or after a hole, and what follows the cut is not held against it."""
    pos, got, seen = 0, 0, 0
    trailing = 0  # chunks missed since the last one found: after the cut, when nothing later is found
    for i in range(0, len(parts), 2):
        for chunk in (c.strip() for c in parts[i].split("\n")):
            if len(chunk) < 4:
                continue
            j = message.find(chunk, pos)
            if j >= 0:
                got += len(chunk)
                seen += len(chunk) + trailing
                trailing = 0
                pos = j + len(chunk)
                continue
            tail = _ELLIPSIS.sub("", message[pos:].rstrip())  # a paste's mark of its cut is no word of the message
            # a cut needs a message that has begun: one half-chunk alone proves nothing — unless it is a whole first
            # sentence of words enough (an issue title, a collector keeping the first sentence of a long message)
            for k in range(min(len(chunk) - 1, len(tail)), 3, -1):
                if (got >= 12 or _first_sentence(chunk, k)) and tail.endswith(chunk[:k]):
                    return got + k, seen + trailing + k
            trailing += len(chunk)
    # the message ended in a hole's value (short): the rest of the template is past the cut
    if got >= 12 and len(message) - pos <= _CUT_TAIL:
        return got, seen
    return got, seen + trailing


def _first_sentence(chunk: str, k: int) -> bool:
    """Does the chunk's first k characters end a sentence (with its stop or just before it) of words enough?"""
    ends = (chunk[k - 1] in ".!?" and chunk[k] == " ") or chunk[k] in ".!?"
    return ends and k >= _SENTENCE_WORDS and chunk[:k].count(" ") >= 4


# two or three words just before, the last lowercase (`This model uses `, `Gemma uses `): the same sentence; a pod
# and container name
# (`vllm-abcde vllm `), a CRI stream tag (`stdout F `) are not
_RUNS_ON = re.compile(r"(?<![\w-])[A-Za-z][\w.]{0,40},? (?:[A-Za-z]{1,40},? )?[a-z]{1,40},? $")


def after_foreign_prefix(tmpl: Template, head: str, text: str) -> tuple[list[str], int] | None:
    """A prefix this module does not know (a container's timestamp, a stray bracket): the message starts where
    the template's opening words do."""
    opening = head.strip()
    if len(opening) < 8 or head != head.lstrip():
        return None
    j = text.find(opening)
    # a sentence that runs on into the opening words ("This model uses sliding window but ...") is no prefix
    if j <= 0 or _RUNS_ON.search(text, max(0, j - 64), j):
        return None
    return tmpl.match(text, j)


def credible(parts: list[str], literal: int, cover: int, seen: int, holes: dict[str, str] | None, *,
              pinned: bool, fold: bool) -> bool:
    """Whether a site's match (`holes` None: a partial one) says enough of the line to place it there."""
    if holes is None and not _partial_enough(cover, seen, pinned=pinned):
        return False
    if fold and literal < 24:
        return False  # a line that lost its case is placed only by a template with words enough of its own
    # `[file.py:123]` of the right release names the site: its words need not prove it
    return pinned or _own_words_enough(parts, literal, holes)


def _partial_enough(cover: int, seen: int, *, pinned: bool) -> bool:
    if pinned:
        return cover >= 4
    return cover >= MIN_PARTIAL_CHARS and cover >= MIN_PARTIAL_SHARE * max(seen, 1)


def _own_words_enough(parts: list[str], literal: int, holes: dict[str, str] | None) -> bool:
    if literal < 8:
        return False  # "%s: %s" and the like: too little of the template is its own words
    if holes is None:
        return True
    if len(parts) > 1 and not parts[0].strip() and literal < 32:
        return False  # "{obj} object has no attribute {name}": Python's own words, from anywhere
    # "Failed to load {filename}" swallowing a sentence: the words are not its own
    return not (literal < 24 and any(len(v) > 40 for v in holes.values()))


def condition_text(cond: str | None) -> str | None:
    """The guarding condition in plain words: a light rewrite of the source (`self.` dropped)."""
    if not cond:
        return None
    t = re.sub(r"\bself\.", "", cond)
    t = re.sub(r"\bnot (?:[\w.]+\.)?has_device_capability\((\d+)(\d)\)",
               r"the GPU's compute capability is below \1.\2", t)
    t = re.sub(r"(?:[\w.]+\.)?has_device_capability\((\d+)(\d)\)", r"the GPU's compute capability is at least \1.\2", t)
    # vLLM's environment variables: `not (envs.VLLM_X)` is the variable unset (or 0), `envs.VLLM_X` it set
    # (a nested check's condition is its enclosing ones `and` its own: the variable may be any of the terms)
    t = re.sub(r"(^|\band )not \(?envs\.([A-Z][A-Z0-9_]+)\)?(?= and |$)",
               r"\1the environment variable \2 is not set", t)
    t = re.sub(r"(^|\band )envs\.([A-Z][A-Z0-9_]+)(?= and |$)", r"\1the environment variable \2 is set", t)
    t = re.sub(r"\benvs\.([A-Z][A-Z0-9_]+)\b", r"\1", t)
    t = re.sub(r"\bnot \((.*)\)$", r"not (\1)", t)
    t = t.replace(" == ", " is ").replace(" != ", " is not ").replace(" >= ", " is at least ")
    t = t.replace(" <= ", " is at most ").replace(" > ", " is more than ").replace(" < ", " is less than ")
    t = re.sub(r"\blen\(([\w.]+)\)", r"the length of \1", t)
    t = re.sub(r"\bis_quantized_kv_cache\(([\w.]+)\)", r"\1 is quantized", t)
    t = re.sub(r"\bisinstance\(([\w.]+), ([\w.]+)\)", r"\1 is a \2", t)
    return t


@dataclass(frozen=True)
class LogLine:
    message: str
    level: str | None
    exc: str | None
    source_file: str | None
    source_line: int | None


def split_line(line: str) -> LogLine:
    """A log line's message, with the level and `[file.py:123]` of vLLM's prefix and an exception's class."""
    text = without_colour(line)
    text = text.strip()
    level = file = None
    lineno = None
    m = _PREFIX.match(text)
    if m:
        level = {"WARN": "warning"}.get(m.group(1), m.group(1).lower())
        file, lineno = m.group(2), int(m.group(3))
        text = text[m.end():].strip()
    exc = None
    e = _EXC.match(text)
    if e:
        exc, text = e.group(1), e.group(2).strip()
    p = _PYDANTIC.match(text)
    if p:
        text = p.group(1).strip()
    return LogLine(text, level, exc, file, lineno)
