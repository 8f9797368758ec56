"""The workload driver tune and rollout share (bot/app/tuning/workload.py), on the simulated host: `soak` runs rounds
of the probe workload until its time has passed and aggregates them per concurrency, `measure` is one round,
Cancel returns what was measured so far, and a measurement that fails raises SpecopsError."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from bot.app.operations import ops
from bot.app.tuning import workload as wl
from bot.config import Config
from bot.core.results.tune import Measurement
from bot.errors import SpecopsError
from tests.app.test_tune_k0 import sim_at
from tests.support.graph import graph, services
from tests.support.sshd import free_port

CONCURRENCY = (1, 2)
REQUESTS = 2
MAX_TOKENS = 16


@pytest.fixture(scope="module")
def served() -> Iterator[Config]:
    """The fast `mtp` profile (k = 3) deployed through the normal deploy path."""
    for _, cfg in sim_at(200.0):  # one host; leaving the loop stops it
        report = ops.deploy(ops.HostRequest(cfg, "a6000", "mtp", **graph(cfg)))
        assert report.operation is not None and report.operation.status in ("changed", "unchanged"), report.headline
        yield cfg


def drive(cfg: Config, seconds: float, cancel: threading.Event | None = None, port: int | None = None,
          concurrency: tuple[int, ...] = CONCURRENCY) -> list[Measurement]:
    p = cfg.profiles["mtp"]
    with services(cfg).hosts.session("a6000") as session:
        return wl.soak(session, port or p.port, p.served_model_name or p.model, wl.load_prompts(), MAX_TOKENS,
                       concurrency, REQUESTS, cancel or threading.Event(), seconds=seconds)


def test_soak_runs_rounds_until_its_time_and_aggregates_each_concurrency(served: Config) -> None:
    started = time.monotonic()
    found = drive(served, 2.0)
    elapsed = time.monotonic() - started
    assert [m.concurrency for m in found] == list(CONCURRENCY)
    assert 2.0 <= elapsed < 60, elapsed
    rounds = {m.concurrency: m.requests // max(REQUESTS, m.concurrency) for m in found}
    assert all(m.requests % max(REQUESTS, m.concurrency) == 0 for m in found), found
    assert rounds[1] == rounds[2] >= 2, found  # several rounds, each at every concurrency
    for m in found:
        assert m.tokens == m.requests * MAX_TOKENS, m  # ignore_eos: every request generates max_tokens
        assert isinstance(m.tokens_per_s, float) and m.tokens_per_s > 0, m
        assert m.tokens_per_s == pytest.approx(m.tokens / m.seconds, rel=0.01), m
        assert m.mean_acceptance_length is not None and 1.0 <= m.mean_acceptance_length <= 4.0, m  # mtp k = 3
        assert len(m.per_position) == 3 and all(r is not None and 0.0 <= r <= 1.0 for r in m.per_position), m
    assert found[0].ttft_s is not None and found[0].ttft_s > 0 and found[1].ttft_s is None  # lowest level only


def test_measure_is_one_round(served: Config) -> None:
    p = served.profiles["mtp"]
    with services(served).hosts.session("a6000") as session:
        found = wl.measure(session, p.port, p.served_model_name or p.model, wl.load_prompts(), MAX_TOKENS,
                           CONCURRENCY, REQUESTS, threading.Event())
    assert [(m.concurrency, m.requests, m.tokens) for m in found] == [(1, 2, 32), (2, 2, 32)], found
    assert all(m.tokens_per_s and m.mean_acceptance_length for m in found), found


def test_cancel_returns_what_was_measured_so_far(served: Config) -> None:
    cancel = threading.Event()
    timer = threading.Timer(1.0, cancel.set)
    timer.start()
    started = time.monotonic()
    try:
        found = drive(served, 120.0, cancel)
    finally:
        timer.cancel()
    assert time.monotonic() - started < 20  # stopped between batches, not after the soak time
    assert found and found[0].concurrency == 1 and found[0].requests >= REQUESTS, found
    assert drive(served, 120.0, cancel) == []  # cancelled before the first batch: nothing measured


def test_a_measurement_that_fails_raises_the_projects_error(served: Config) -> None:
    with pytest.raises(SpecopsError, match=r"failed|answered"):  # nothing listens there: the connection drops
        drive(served, 0.0, port=free_port())
    p = served.profiles["mtp"]
    with services(served).hosts.session("a6000") as session, pytest.raises(SpecopsError, match="answered 404"):
        wl.soak(session, p.port, "no-such-model", wl.load_prompts(), MAX_TOKENS, CONCURRENCY, REQUESTS,
                threading.Event(), seconds=0.0)
