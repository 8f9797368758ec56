"""Advice is written once, in CLI syntax (`specops deploy mtp --host a6000`); in chat it must read as
what the user types there (`/specops deploy mtp a6000`, or `deploy mtp a6000` at the console)."""

from __future__ import annotations

import re

CHAT_VERBS = ("deploy", "diagnose", "status", "stop", "report", "unlock")
_CLI = re.compile(r"\bspecops (" + "|".join(CHAT_VERBS) + r")((?: [A-Za-z0-9._{}-]+)*?) --host ([A-Za-z0-9._{}-]+)")


def chat_syntax(text: str, prefix: str = "/specops ") -> str:
    return _CLI.sub(lambda m: f"{prefix}{m.group(1)}{m.group(2)} {m.group(3)}", text)
