"""What a starting vLLM server is doing, from the end of its log: the line to show beside
"wait for /health" (loading weights, compiling, profiling memory, KV cache size).

The message after vLLM's prefix is shown as logged; no wording is assumed, because it changes
from release to release. A progress bar (tqdm: "Loading safetensors checkpoint shards: 50% ...")
counts: its percentage is the estimate vLLM gives.
"""

from __future__ import annotations

import re

from bot.core.logparse import split_prefix, strip_ansi

_PERCENT_RE = re.compile(r"(?<![\d.])(\d{1,3})% ?(?:\||Completed)")
_NOISE = ("DEBUG", )
MAX_CHARS = 110


def last_activity(text: str) -> str | None:
    """The last INFO/WARNING message (or progress bar) of `text`, without its prefix, shortened."""
    for raw in reversed(text.replace("\r", "\n").splitlines()[-200:]):
        line = strip_ansi(raw).strip()
        if not line:
            continue
        origin, message = split_prefix(line)
        if origin.level in _NOISE:
            continue
        message = message.strip()
        is_bar = bool(_PERCENT_RE.search(message))
        if origin.level is None and not is_bar:
            continue  # a traceback line, a bare print: not progress
        if len(message) > MAX_CHARS:
            message = message[: MAX_CHARS - 1].rstrip() + "…"
        return message or None
    return None
