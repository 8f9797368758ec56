"""Label selectors and durations as people type them, checked before any reaches Prometheus (no I/O,
no httpx: the chat parser uses it too)."""

from __future__ import annotations

import re

from bot.errors import InputError

MAX_SINCE = 31 * 86400.0
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
_MATCHER = re.compile(r'^\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*$')


def parse_since(text: str) -> float:
    """'1h', '30m', '90s', '2d', '600' -> seconds."""
    m = _DURATION.match(text or "")
    if not m:
        raise InputError(f"--since {text!r}: give a duration like 30m, 1h or 90s")
    seconds = float(m[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[m[2] or "s"]
    if seconds < 10:
        raise InputError(f"--since {text!r}: at least 10s (Prometheus needs two scrapes in the window)")
    if seconds > MAX_SINCE:  # a range query over months is a load on the Prometheus anyone in chat may send
        raise InputError(f"--since {text!r}: at most 31d")
    return seconds


def selector_of(text: str) -> str:
    """A label selector as typed (`instance="10.0.0.5:8000"`, `{job="vllm"}`, `a="1",b=~"x.*"`) checked and
    without braces; a bare `HOST:PORT` means `instance="HOST:PORT"`."""
    text = (text or "").strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if not text:
        return ""
    if re.fullmatch(r"[A-Za-z0-9_.\-\[\]:]+", text):
        return f'instance="{text}"'
    parts = _split_matchers(text)
    bad = [p for p in parts if not _MATCHER.match(p)]
    if bad:
        raise InputError(f"selector {text!r}: {bad[0].strip()!r} is not a label matcher like instance=\"host:8000\"")
    return ",".join(p.strip() for p in parts)


def _split_matchers(text: str) -> list[str]:
    parts, cur, quoted, escaped = [], [], False, False
    for ch in text:
        if escaped:
            cur.append(ch)
            escaped = False
            continue
        if ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


