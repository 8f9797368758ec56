"""What every line goes through before it is matched: ANSI colour and vLLM's own prefix removed."""

from __future__ import annotations

import re

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# the vLLM prefix `(APIServer pid=1) ERROR 05-09 11:40:42 [core.py:946] ` and older `ERROR 06-06 14:09:57 file.py:148] `
_PREFIX_RE = re.compile(
    r"^(?:\((?:[\w.-]+(?: rank=\d+)?) pid=\d+\)\s+)?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+"
    r"\d\d-\d\d\s+\d\d:\d\d:\d\d(?:\.\d+)?\s+"
    r"(?:\[[^\]]+\]|[\w./-]+:\d+\])\s?")


def strip_for_matching(line: str) -> str:
    line = ANSI_RE.sub("", line) if "\x1b" in line else line
    return _PREFIX_RE.sub("", line.strip(), count=1)
