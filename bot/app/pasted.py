"""A log pasted or attached in chat -> a Report: the text is redacted first, then read as log data only.

The front end reads the attached files (Slack: files.info and the download, size-capped, text only)
and hands their text here; what is diagnosed says where it came from and that it is a fragment.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from bot.app.commands import Paste
from bot.app.diagnosis.diagnose import diagnose_text
from bot.core.report import Report
from bot.errors import InputError
from bot.redact import Redactor


@dataclass(frozen=True)
class PastedFile:
    """An attached file's text, as the front end read it."""

    name: str
    text: str

    @property
    def size(self) -> int:
        return len(self.text.encode("utf-8"))

    def describe(self) -> str:
        lines = len(self.text.splitlines())
        sha = hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:12]
        return f"{self.name}: {lines} line{'s' if lines != 1 else ''}, {self.size} bytes, sha256 {sha}"


def _lines(n: int) -> str:
    return f"{n} line{'s' if n != 1 else ''}"


def diagnose_paste(paste: Paste, files: Sequence[PastedFile] = (), *, redactor: Redactor,
                   where: str = "Slack") -> Report:
    """Diagnose the pasted text and the files' texts together (in that order). Secrets are masked before
    anything is parsed, so no part of the report can carry one. Raises InputError when nothing is left."""
    parts: list[str] = []
    source: list[str] = []
    if paste.text.strip():
        parts.append(paste.text)
        source.append(f"text pasted in {where} (a fragment: {_lines(paste.lines)})")
    for f in files:
        if f.text.strip():
            parts.append(f.text)
            source.append(f"`{redactor.text(f.name)}` attached in {where} ({_lines(len(f.text.splitlines()))})")
    if not parts:
        raise InputError("there is no log text to diagnose (the message and its files are empty)")
    text = redactor.text("\n".join(parts))
    report = diagnose_text(text, paste.flags(), source=", ".join(source))
    report.notes.insert(0, f"diagnosed from {', '.join(source)}: what these lines show, not the server's "
                           "whole history")
    return report
