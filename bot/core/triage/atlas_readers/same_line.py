"""A reader that explains a line better than the findings already placed on it steps them back to notes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State
    from bot.core.triage.findings import Finding


def step_back(st: State, at: int, which: Callable[[Finding], bool]) -> None:
    """The findings of the line at `at` that `which` picks become notes (info, low): the words they matched were
    carried by that line, not caused there. (A line of no known position, -1, steps nothing back.)"""
    if at < 0:
        return
    for f in st.findings:
        if f.at == at and which(f):
            f.severity, f.confidence = "info", "low"
