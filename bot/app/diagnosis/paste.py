"""A log pasted or attached in chat, the diagnose verb's own input in chat: the flags typed before it (`Paste`), the
attached files' texts as the front end read them (`PastedFile`), and the diagnosis of both (`diagnose_paste`): the text
is redacted first, then read as log data only, never as a command.

The front end reads the attached files (Slack: files.info and the download, size-capped, text only)
and hands their text here; what is diagnosed says where it came from and that it is a fragment.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.app.diagnosis.diagnose import diagnose_text
from bot.core.report import Report
from bot.errors import InputError
from bot.redact import Redactor

if TYPE_CHECKING:
    from bot.core.triage.context import Flags

# the flags a pasted diagnosis takes: chat name -> Flags field
PASTE_OPTIONS: dict[str, str] = {"--method": "method", "--vllm-version": "vllm_version", "--drafter": "drafter",
                                 "--num-speculative-tokens": "num_speculative_tokens"}

@dataclass(frozen=True)
class Paste:
    """A log pasted (or attached) in chat, and the flags typed before it. `text` is log data only."""

    options: tuple[tuple[str, str], ...] = ()  # (Flags field, value), validated
    text: str = ""
    attachments: int = 0  # files the message carries; the front end reads them when the job runs

    @property
    def lines(self) -> int:
        return len(self.text.splitlines())

    @property
    def size(self) -> int:
        return len(self.text.encode("utf-8"))

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def flags(self) -> Flags:
        from bot.core.triage.context import Flags

        values: dict[str, Any] = dict(self.options)
        if "num_speculative_tokens" in values:
            values["num_speculative_tokens"] = int(values["num_speculative_tokens"])
        return Flags(**values, origin="the chat command")

    def option_words(self) -> list[str]:
        names = {v: k for k, v in PASTE_OPTIONS.items()}
        return [w for name, value in self.options for w in (names[name], value)]

    def describe(self) -> str:
        """What the audit and the messages say of the paste: its size and hash, never its text."""
        parts = []
        if self.text:
            parts.append(f"pasted log: {self.lines} line{'s' if self.lines != 1 else ''}, {self.size} bytes, "
                         f"sha256 {self.sha256[:12]}")
        if self.attachments:
            parts.append(f"{self.attachments} attached file{'s' if self.attachments != 1 else ''}")
        return "(" + "; ".join(parts) + ")" if parts else "(nothing pasted)"




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
