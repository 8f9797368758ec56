"""What every line goes through before it is matched: ANSI colour and vLLM's own prefix removed."""

from __future__ import annotations

import re

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# the same colour codes as a web page keeps them once the escape byte is gone (`[1;36m(APIServer pid=1) [0;0m …`,
# `^[[0;36m` where it was made visible, `\ufffd[1;36m` where a decoder replaced it): taken only from a line that holds
# the reset code, which nothing else prints
# (a copy that turned the escape byte into a space keeps that space before the code: it goes with it)
BARE_SGR_RE = re.compile(r"(?:\^\[|\ufffd| ?)\[(?:\d{1,3};){0,3}\d{1,3}m")
_RESET = ("[0m", "[0;0m")


def without_colour(line: str) -> str:
    """The line without its terminal colour codes, with or without the escape byte."""
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    if any(r in line for r in _RESET):
        line = BARE_SGR_RE.sub("", line)
    return line
# the vLLM prefix `(APIServer pid=1) ERROR 05-09 11:40:42 [core.py:946] ` and older `ERROR 06-06 14:09:57 file.py:148] `
# (behind a level another logger printed first — uvicorn's `ERROR:    ` — as line_kinds.split_prefix reads it)
_PREFIX_RE = re.compile(
    r"^(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+)?"
    r"(?:\((?:[\w.-]+(?: rank=\d+)?) pid=\d+\)\s+)?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+"
    r"\d\d-\d\d\s+\d\d:\d\d:\d\d(?:\.\d+)?\s+"
    r"(?:\[[^\]]+\]|[\w./-]+:\d+\])\s?")


def strip_for_matching(line: str) -> str:
    return _PREFIX_RE.sub("", without_colour(line).strip(), count=1)
