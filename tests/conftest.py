from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.sim.host import SimHost

# the session's real PostgreSQL (one per session, skipped with the reason where none is installed)
from tests.support.postgres import postgres_server, postgres_url  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "bot" / "sim" / "logs"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED = ROOT.parent / "shared" / "reference"


@pytest.fixture(autouse=True)
def _restore_environment() -> Iterator[None]:
    """Whatever a test does to os.environ (proxy variables popped, secrets planted) ends with it."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def logs() -> Path:
    return LOGS


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def sim() -> Iterator[SimHost]:
    """A simulated A6000 host on 127.0.0.1 with short intervals; cleanup stops its fake vLLM by PID."""
    host = SimHost(stats_interval=0.5, startup_seconds=0.5, max_request_seconds=1.0).start()
    try:
        yield host
    finally:
        host.cleanup()
