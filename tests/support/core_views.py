"""Views of the core's data that only tests read: the product never asks for them, so they live here, over the
core's own tables."""

from __future__ import annotations

from bot.core.atlas import Atlas
from bot.core.atlas_tables import runs_has
from bot.core.logread import Scanner
from bot.core.parsed_log import ProblemLine
from bot.core.specline import _labelled


def metric_names(atlas: Atlas, release: str | None = None) -> dict[str, tuple[str, ...]]:
    """Prometheus names (vllm:...) and their label names in a release (default: the newest)."""
    if not atlas._versions.get("vllm"):
        return {}
    ri = atlas._release_index(release)
    return {name: tuple(labels) for name, labels, runs in atlas._metrics if runs_has(runs, ri)}


def spans(scanner: Scanner, buf: bytes | memoryview, lo: int = 0, hi: int | None = None) -> list[tuple[int, int]]:
    """(start, end) of every line of buf[lo:hi] the scanner hands to the parser."""
    return [(s, e) for s, e, _only in scanner.marked_spans(buf, lo, hi)]


def innermost_vllm_frame(problems: list[ProblemLine], traceback_id: int) -> ProblemLine | None:
    """The last frame of that traceback inside vLLM's own package."""
    frames = [p for p in problems if p.kind == "frame" and p.traceback_id == traceback_id and p.frame_file]
    inside = [p for p in frames if "vllm/" in (p.frame_file or "").replace("\\", "/")]
    return inside[-1] if inside else None


def metric_pairs(msg: str) -> list[tuple[tuple[str, ...], str]]:
    """A metrics message as (label words, value text) pairs, in order."""
    return [(words, value) for words, _name, value in _labelled(msg)]
