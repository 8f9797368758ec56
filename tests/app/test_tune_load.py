"""A k per load, from measured rows: which vLLM releases take a per-batch-size k (read from the atlas of
vLLM's released source), the schedule written from the best k at each concurrency (k = 0 where no speculation
won), and the load the watch saw mapped to the concurrency measured nearest it."""

from __future__ import annotations

import time
from contextlib import closing
from pathlib import Path

from bot.app.tuning.tune_load import observed_load, option, schedule, supported
from bot.core.results.tune import Measured, TuneRow
from bot.redact import Redactor
from bot.store.facade import Store


def row(method: str, k: int | None, c: int, tps: float) -> Measured:
    return Measured(method, k, f"p@{method}-k{k}", c, 2, 128, 1.0, tps, None, (), None)


def test_the_releases_that_take_a_k_per_batch_size_are_read_not_assumed() -> None:
    assert supported("0.23.0") is False and supported("0.20.1") is False  # read, and without the key
    assert supported("0.24.0") is True and supported("0.33.0") is True
    assert supported("9.0.0") is True  # newer than any read: from the first release that has it
    assert supported(None) is None and supported("not-a-version") is None
    opt = option()
    assert opt.key == "num_speculative_tokens_per_batch_size" and opt.first_release == "0.24.0"
    assert opt.source == "https://github.com/vllm-project/vllm/blob/v0.24.0/vllm/config/speculative.py#L162"
    assert opt.checked.startswith("0.2.7–")


def test_the_schedule_takes_each_levels_best_k_and_zero_where_no_speculation_won() -> None:
    rows: list[TuneRow] = [row("none", None, 1, 100), row("mtp", 2, 1, 180), row("mtp", 4, 1, 200),
                           row("none", None, 8, 700), row("mtp", 2, 8, 900), row("mtp", 4, 8, 800),
                           row("none", None, 32, 2000), row("mtp", 2, 32, 1500), row("mtp", 4, 32, 1200)]
    assert schedule(rows, [1, 8, 32], "mtp") == ((1, 7, 4), (8, 31, 2), (32, 32, 0))
    same: list[TuneRow] = [row("mtp", 4, 1, 200), row("mtp", 4, 8, 900), row("mtp", 2, 8, 800)]
    assert schedule(same, [1, 8], "mtp") is None  # one k everywhere: nothing to schedule
    merged: list[TuneRow] = [row("mtp", 4, 1, 200), row("mtp", 4, 2, 300), row("mtp", 2, 2, 250),
                             row("mtp", 2, 8, 900), row("mtp", 4, 8, 800)]
    assert schedule(merged, [1, 2, 8], "mtp") == ((1, 7, 4), (8, 8, 2))


def test_the_load_seen_is_the_watchs_median_of_requests_running(tmp_path: Path) -> None:
    with closing(Store(tmp_path / "s.db", Redactor())) as store:
        now = time.time()
        assert observed_load(store, "a6000", [1, 8], now) is None  # no samples: unknown, not zero
        for i, n in enumerate([0, 0, 3, 5, 6, 6, 7]):  # idle samples say nothing about which k to serve
            store.samples.add("a6000", True, {"up": True, "running": n, "kv": 1.0, "waiting": 0}, at=now - 100 + i)
        store.samples.add("a6000", True, {"up": True, "running": 1, "kv": 1.0, "waiting": 0}, at=now - 2 * 86400)
        load = observed_load(store, "a6000", [1, 8], now)
    assert load is not None and (load.samples, load.median_running, load.p90_running) == (5, 6.0, 7.0)
    assert load.concurrency == 8  # 6 is nearer 8 than 1 on a log scale
