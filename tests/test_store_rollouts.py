"""The store's part of a rollout: a lock its owner takes again while it holds it (the rollout holds each host,
each deploy takes its own), and the record that `rollout --resume` / `--abort` read after a crash. Both
engines: SQLite's file and the session's PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.redact import Redactor
from bot.store.facade import Store
from bot.store.locks import LockHeld
from tests.support.store_engines import ENGINES, state_on

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("engine", ENGINES)
def test_the_owner_takes_its_lock_again_and_it_goes_at_the_last_release(engine: str, tmp_path: Path,
                                                                        request: pytest.FixtureRequest) -> None:
    state = state_on(engine, tmp_path, request)
    store, other = Store(state, Redactor()), Store(state, Redactor())
    try:
        store.locks.acquire("a6000", "U1 via slack", "rollout dflash (r1)")
        assert store.locks.acquire("a6000", "U1 via slack", "deploy dflash") is None  # the deploy inside the rollout
        with pytest.raises(LockHeld):
            store.locks.acquire("a6000", "U2 via slack", "deploy mtp")  # someone else: refused, as ever
        store.locks.release("a6000", "U1 via slack")  # the deploy's release: the rollout still holds it
        held = store.locks.holder("a6000")
        assert held is not None and held[1] == "rollout dflash (r1)"
        store.locks.release("a6000", "U1 via slack")
        assert store.locks.holder("a6000") is None
    finally:
        store.close()
        other.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_rollouts_record_outlives_its_process(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    state = state_on(engine, tmp_path, request)
    code = ("import sys; from bot.redact import Redactor; from bot.store.facade import Store; "
            "s = Store(sys.argv[1], Redactor()); "
            "s.rollouts.begin('r1', 'dflash', 'U1', {'batches': [['a6000'], ['a6000-b']]}, {'hosts': []}); "
            "s.rollouts.update('r1', progress={'hosts': [{'host': 'a6000', 'state': 'passed'}]}); s.close()")
    subprocess.run([sys.executable, "-c", code, str(state)], cwd=ROOT, check=True, timeout=60)
    store = Store(state, Redactor())
    try:
        (record,) = store.rollouts.recent(state="running")
        assert record.id == "r1" and record.profile == "dflash" and record.holder_gone  # its process is gone
        assert record.plan["batches"] == [["a6000"], ["a6000-b"]]
        assert record.progress["hosts"][0]["state"] == "passed"
        store.rollouts.update("r1", state="passed", resumed=True)
        assert store.rollouts.recent(state="running") == []
        (done,) = store.rollouts.recent()
        assert done.state == "passed" and not done.holder_gone  # this process carried it on
    finally:
        store.close()
