"""Shared by the benchmarks: the median wall time of repeated runs."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)
