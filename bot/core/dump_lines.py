"""Stack dumps in a log: Python's faulthandler and py-spy's.

A dump says where threads were, not where an exception was raised, and lists the innermost call first. Each thread
kept becomes a traceback read innermost last, as Python's own are; only the thread that was running is kept
(faulthandler's current thread, py-spy's active ones) — the others wait by design. What kind of dump it was rides on
its frames: a fatal error's (`Fatal Python error: Segmentation fault` above it), a timeout's (`Timeout (0:10:00)!`,
faulthandler.dump_traceback_later), or a snapshot of a live process (py-spy, or a dump with neither line).
Formats: https://docs.python.org/3/library/faulthandler.html and https://github.com/benfred/py-spy.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from bot.core.line_kinds import split_prefix
from bot.core.owners import native_file
from bot.core.parsed_log import Origin, ProblemLine

DumpKind = Literal["fatal", "timeout", "snapshot"]
Key = tuple[str | None, int | None]

FATAL_RE = re.compile(r"^Fatal Python error: \S")
TIMEOUT_RE = re.compile(r"^Timeout \(\d{1,4}:\d\d:\d\d(?:\.\d{1,9})?\)!$")
# `Current thread 0x… (most recent call first):`, `Thread 0x… (most recent call first):`, and with one thread only
# `Stack (most recent call first):` (newer Pythons may name the thread in brackets)
FAULT_HEAD_RE = re.compile(r"^(?:(?P<current>Current thread 0x[0-9a-fA-F]{1,16})|Thread 0x[0-9a-fA-F]{1,16}|"
                           r"(?P<stack>Stack))(?: \[[^\]]{0,100}\])? \(most recent call first\):$")
FAULT_FRAME_RE = re.compile(r'^\s*File "(?P<file>[^"]{1,400})", line (?P<line>\d+) in (?P<func>[\w.<>]{1,200})\s*$')
# py-spy: `Thread 220 (active): "MainThread"`, frames `forward (vllm/…/llama.py:218)`, with --native also
# `flashinfer::sampling::RadixTopKMaskLogitsMultiCTA<float, int> (sampling.so)` and `0x7549… (libcuda.so.1.1)`
PYSPY_HEAD_RE = re.compile(r"^Thread (?:0x[0-9A-Fa-f]{1,16}|\d{1,10}) \((?P<state>active|idle)[^)]{0,40}\)"
                           r'(?:: "[^"]{0,200}")?$')
PYSPY_FRAME_RE = re.compile(r"^\s{2,8}(?P<func>\S[^\n]{0,400}?) \((?P<file>[^()\n]{1,300}?)(?::(?P<line>\d+))?\)\s*$")


def is_head(body: str) -> bool:
    """A dump's thread header (never the rest of an exception's message)."""
    text = body.strip()
    return FAULT_HEAD_RE.match(text) is not None or PYSPY_HEAD_RE.match(text) is not None


@dataclass
class _Open:
    traceback: int  # the id its frames carry
    kind: DumpKind
    keep: bool  # the running thread: its frames are kept
    native: bool  # py-spy's frame form


class DumpReader:
    """The dumps a LineParser meets, per process. `tracebacks` is the parser's own table of open tracebacks; `keep`
    stores a frame (innermost first: each goes above the frames of its traceback already stored)."""

    def __init__(self, tracebacks: dict[Key, int], keep: Callable[[ProblemLine, Key], None]) -> None:
        self._tracebacks = tracebacks
        self._keep = keep
        self._open: dict[Key, _Open] = {}
        self._kind: dict[Key, DumpKind] = {}

    def wants(self, text: str) -> bool:
        """Cheap: could the line be a dump's (read for every line the parser classifies)."""
        return bool(self._open) or "most recent call first" in text or '", line ' in text \
            or "Fatal Python error" in text or "Timeout (" in text or ("Thread " in text and "(" in text)

    def is_dump(self, key: Key, traceback: int | None) -> bool:
        opened = self._open.get(key)
        return opened is not None and opened.traceback == traceback

    def line(self, text: str, line_no: int | None, offset: int | None) -> bool:
        """True when the line was the dump's (a header, a frame, a timeout); a fatal error's line stays a problem of
        its own (False) after it marks what follows."""
        origin, rest = split_prefix(text)
        body = rest.strip()
        key = (origin.proc, origin.pid)
        here = offset if offset is not None else (line_no if line_no is not None else -1)
        if FATAL_RE.match(body):
            self._kind[key] = "fatal"
            return False
        if TIMEOUT_RE.match(body):
            self._kind[key] = "timeout"
            return True
        fault, spy = FAULT_HEAD_RE.match(body), PYSPY_HEAD_RE.match(body)
        if fault is not None or spy is not None:
            self._close(key)
            keep = (fault is not None and bool(fault["current"] or fault["stack"])) or \
                (spy is not None and spy["state"] == "active")
            self._open[key] = _Open(here, self._kind.get(key, "snapshot"), keep, native=spy is not None)
            self._tracebacks[key] = here
            return True
        opened = self._open.get(key)
        if opened is None:
            if FAULT_FRAME_RE.match(rest) is None:  # (a faulthandler frame pasted without its header opens one)
                return False
            opened = self._open[key] = _Open(here, self._kind.get(key, "snapshot"), True, native=False)
            self._tracebacks[key] = here
        fr = (PYSPY_FRAME_RE if opened.native else FAULT_FRAME_RE).match(rest)
        if fr is None:
            if not body or (opened.native and rest.startswith(" " * 8)):  # a blank line; py-spy --locals' values
                return bool(body)
            self._close(key, ended=True)
            return False
        if opened.keep:
            origin.line_no, origin.offset = line_no, offset
            self._keep(self._frame(origin, fr, opened), key)
        return True

    @staticmethod
    def _frame(origin: Origin, fr: re.Match[str], opened: _Open) -> ProblemLine:
        func = fr["func"]
        where = native_file(func, fr["file"]) if opened.native else fr["file"]
        return ProblemLine("frame", origin, origin.text.strip(), frame_file=where,
                           frame_line=int(fr["line"]) if fr["line"] else 0, frame_function=func,
                           traceback_id=opened.traceback, dump=opened.kind)

    def _close(self, key: Key, *, ended: bool = False) -> None:
        opened = self._open.pop(key, None)
        if opened is not None and self._tracebacks.get(key) == opened.traceback:
            del self._tracebacks[key]
        if ended:
            self._kind.pop(key, None)
