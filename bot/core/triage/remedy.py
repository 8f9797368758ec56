"""What a finding tells its reader to do, as a reader gathers it: the words, the kinds of advice, the flags and
variables, the packages, the host changes and the inputs at fault. Every reader that builds a finding piece by piece
(frames first, below vLLM, a refusal, the command line) fills one, then hands its lists to the Finding."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.core.triage.findings import Advice


@dataclass
class Remedy:
    remediation: list[str] = field(default_factory=list)
    advice: list[Advice] = field(default_factory=list)
    knobs: list[str] = field(default_factory=list)
    deps: list[str] = field(default_factory=list)
    host: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)

    def add(self, lines: list[str], advice: Iterable[Advice] = ()) -> None:
        self.remediation += lines
        self.advice += [a for a in advice if a not in self.advice]
