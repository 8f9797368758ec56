"""An engine that stopped: the trailing stats intervals in which it held running requests and processed no token.

vLLM's stats line (`Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 8 reqs`)
counts a prompt's tokens when its prefill completes (vllm/v1/metrics/stats.py), so one such interval can also be a
prefill longer than the interval, or a kernel compiling for a new shape; several in a row, or a minute of them, is an
engine that does not move. Read by the stall detector and by a stack dump's reading (a dump beside a stall shows
where the engine is stuck)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.core.parsed_log import EngineSample

SUSTAINED_INTERVALS = 3
SUSTAINED_SECONDS = 60.0


@dataclass(frozen=True)
class Stall:
    samples: tuple[EngineSample, ...]  # the trailing stalled intervals of one engine, oldest first
    seconds: float | None  # from the first to the last of them, when their times say

    @property
    def running(self) -> int:
        return max(s.running or 0 for s in self.samples)

    @property
    def sustained(self) -> bool:
        return len(self.samples) >= SUSTAINED_INTERVALS or (self.seconds or 0.0) >= SUSTAINED_SECONDS


def _stalled(s: EngineSample) -> bool:
    return bool(s.running) and s.generation_tps == 0 and not s.prompt_tps


def _seconds(first: EngineSample, last: EngineSample) -> float | None:
    a = first.origin.stamp if first.origin is not None else None
    b = last.origin.stamp if last.origin is not None else None
    if a is None or b is None:
        return None
    span = ((b.day - a.day) * 24 + b.hour - a.hour) * 3600 + (b.minute - a.minute) * 60 + b.second - a.second
    return float(span) if span >= 0 else None


def engine_stall(samples: Sequence[EngineSample]) -> Stall | None:
    """The longest trailing stall of any engine the log's stats lines name; None when every engine moved last."""
    by_engine: dict[int | None, list[EngineSample]] = {}
    for s in samples:
        by_engine.setdefault(s.engine, []).append(s)
    best: Stall | None = None
    for own in by_engine.values():
        tail: list[EngineSample] = []
        for s in reversed(own):
            if not _stalled(s):
                break
            tail.insert(0, s)
        if tail and (best is None or len(tail) > len(best.samples)):
            best = Stall(tuple(tail), _seconds(tail[0], tail[-1]))
    return best
