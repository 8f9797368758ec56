"""The names of the files posted beside a result: what the file is and for whom, safe anywhere."""

from __future__ import annotations

import re

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._]+")


def file_name(kind: str, *parts: object, ext: str = "png") -> str:
    """`kind-part-part.ext` from letters, digits, dots and underscores only (a host or profile name's other
    characters become one `-`): a name that says what the file is and for whom in Slack's file list and
    in a download folder, safe in any file system and URL."""
    safe = (_UNSAFE_NAME.sub("-", str(p)).strip("-.")[:40].strip("-.") for p in parts if p)
    return "-".join([kind, *(p for p in safe if p)]) + "." + ext


def history_file_name(host: str) -> str:
    """The trend chart of `host` (history, the daily health report) as a file: `history-a6000.png`."""
    return file_name("history", host)
