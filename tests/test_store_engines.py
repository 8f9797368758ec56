"""Every Store method on both engines: SQLite (a file, the embedded default) and PostgreSQL (a real server,
tests/support/postgres.py), through the same Store class over SQLAlchemy Core."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from bot.core.startup import StartupRun
from bot.redact import MASK, Redactor
from bot.store.facade import Store
from bot.store.locks import LockHeld
from tests.support.store_engines import ENGINES, state_on

SECRET = "hunter2-audit-secret"


@pytest.fixture(params=ENGINES)
def state(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    return state_on(request.param, tmp_path, request)


@pytest.fixture
def store(state: str | Path) -> Iterator[Store]:
    s = Store(state, Redactor([SECRET]))
    if isinstance(state, str):  # on the server, not in a file named after the URL
        with _engine_of(state).connect() as db:
            assert db.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one() == "rollouts"
        assert not Path("postgresql+psycopg:").exists()
    try:
        yield s
    finally:
        s.close()


def _engine_of(state: str | Path) -> sa.Engine:
    return sa.create_engine(state if isinstance(state, str) else f"sqlite:///{state}", poolclass=sa.pool.NullPool)


def test_locks(store: Store) -> None:
    assert store.locks.holder("h1") is None and not store.locks.stale("h1")
    assert store.locks.acquire("h1", "U1", "deploy mtp") is None
    owner, op, at = store.locks.holder("h1") or ("", "", 0.0)
    assert (owner, op) == ("U1", "deploy mtp") and abs(at - time.time()) < 60
    with pytest.raises(LockHeld, match="h1 is busy: deploy mtp by U1"):
        store.locks.acquire("h1", "U2", "stop")
    assert not store.locks.stale("h1")  # its holder (this process) lives
    store.locks.release("h1", "U2")  # not the owner: nothing happens
    assert store.locks.holder("h1") is not None
    store.locks.release("h1", "U1")
    assert store.locks.holder("h1") is None
    store.locks.acquire("h1", "U1", "deploy")
    assert store.locks.clear("h1") and not store.locks.clear("h1")


def test_a_lock_whose_holder_is_gone_is_taken_over(store: Store, state: str | Path) -> None:
    store.locks.acquire("h1", "U1", "deploy mtp")
    with _engine_of(state).begin() as db:  # the holder: a PID that no longer runs, in this boot
        db.execute(sa.text("UPDATE locks SET pid = 999999999, pid_start = NULL"))
    assert store.locks.stale("h1")
    assert store.locks.acquire("h1", "U2", "stop") == "deploy mtp by U1 (its process 999999999 is gone)"
    assert store.locks.holder("h1") is not None and store.locks.holder("h1")[0] == "U2"  # type: ignore[index]


def test_deployments(store: Store) -> None:
    first = store.deployments.record("h1", "mtp", "fp1", "running", detail={"token": SECRET})
    assert first > 0
    store.deployments.update(first, status="serving", pid=4242, detail={"message": "up"}, finished=False)
    dep = store.deployments.latest("h1")
    assert dep is not None and (dep.id, dep.status, dep.pid, dep.detail) == (first, "serving", 4242, {"message": "up"})
    second = store.deployments.record("h1", "eagle", "fp2", "running", detail={"token": SECRET})
    assert store.deployments.latest("h1").detail == {"token": MASK}  # type: ignore[union-attr]
    store.deployments.update(second, status="serving", finished=True)  # the first is superseded
    assert store.deployments.stop("h1", "stopped by U1") == 1
    dep = store.deployments.latest("h1")
    assert dep is not None and dep.status == "stopped" and dep.finished_at is not None
    assert dep.detail["message"] == "stopped by U1"
    assert store.deployments.reconcile() == 0  # nothing running
    store.deployments.record("h2", "mtp", "fp", "running")  # written by this live process: kept running
    assert store.deployments.reconcile("h2") == 0
    assert store.deployments.latest("nowhere") is None


def test_a_running_row_of_a_gone_run_becomes_failed(store: Store, state: str | Path) -> None:
    dep_id = store.deployments.record("h1", "mtp", "fp", "running")
    with _engine_of(state).begin() as db:
        db.execute(sa.text("UPDATE deployments SET holder_pid = 999999999, holder_start = NULL"))
    assert store.deployments.reconcile() == 1
    dep = store.deployments.latest("h1")
    assert dep is not None and dep.id == dep_id and dep.status == "failed"
    assert dep.detail["message"] == "the run that wrote it (pid 999999999) is gone"


def test_audit(store: Store) -> None:
    row = store.audit.queue(source="slack", text=f"deploy mtp {SECRET}", team="T1", user="U1", channel="C1",
                            plan_id="p1")
    row_id = row.committed()
    store.audit.queue_end(row, "ok", detail=f"done {SECRET}")
    closed = store.audit.queue(source="cli", text="help", closed=True, result="usage")
    closed.committed()
    store.audit.flush()
    entries = store.audit.recent()
    assert [(e.source, e.user, e.text, e.result, e.detail) for e in entries] == [
        ("cli", None, "help", "usage", ""), ("slack", "U1", "deploy mtp " + MASK, "ok", "done " + MASK)]
    assert entries[1].id == row_id and entries[1].finished_at is not None and entries[1].plan_id == "p1"
    assert len(store.audit.recent(limit=1)) == 1
    pasted = store.audit.queue(source="slack", text="log with a \x00 in it", closed=True)
    assert pasted.committed() > 0  # PostgreSQL's text holds no NUL: the row is written all the same
    assert store.audit.recent(limit=1)[0].text in ("log with a \x00 in it", "log with a \ufffd in it")


def test_startup_history(store: Store) -> None:
    assert store.startups.history("h1", "mtp").runs == ()
    for ready in (50.0, 40.0, 45.0, 90.0):
        store.startups.record("h1", "mtp", StartupRun(ready, (("weights", ready / 2),)), keep=3)
    history = store.startups.history("h1", "mtp", limit=5)
    assert [r.ready_seconds for r in history.runs] == [90.0, 45.0, 40.0]
    assert history.runs[0].phases == (("weights", 45.0),)


def test_samples(store: Store) -> None:
    now = time.time()
    store.samples.add("h1", True, {"p99": 1.5, "key": SECRET}, at=now - 100)
    store.samples.add("h1", False, {}, at=now - 10)
    store.samples.add("h2", True, {}, at=now - 5)
    assert store.samples.for_host("h1") == [(now - 100, True, {"p99": 1.5, "key": MASK}), (now - 10, False, {})]
    assert store.samples.for_host("h1", since=now - 50) == [(now - 10, False, {})]
    assert store.samples.read_last_up() == {"h1": now - 100, "h2": now - 5}
    store.samples.prune(now - 50)
    assert [s[0] for s in store.samples.for_host("h1")] == [now - 10]


def test_incidents(store: Store) -> None:
    inc, created = store.incidents.open("down:h1", "h1", f"h1 is down {SECRET}", {"kind": "opened"})
    assert created and inc.state == "open" and inc.title == "h1 is down " + MASK
    again, created = store.incidents.open("down:h1", "h1", "h1 is down", {"kind": "opened"})
    assert not created and again.id == inc.id
    assert store.incidents.read_open_count() == 1
    up = store.incidents.update(inc.id, state="acknowledged", channel="C1", ts="1.2", event={"kind": "ack"},
                                active={"fp1": {"source": "watch", "title": "down"}})
    assert up is not None and (up.state, up.channel, up.ts) == ("acknowledged", "C1", "1.2")
    got = store.incidents.get(inc.id)
    assert got is not None and [e["kind"] for e in got.timeline] == ["opened", "ack"]
    assert got.active_from("watch") == ["fp1"]
    assert [i.id for i in store.incidents.unresolved()] == [inc.id] and store.incidents.unresolved("h2") == []
    store.incidents.update(inc.id, state="resolved")
    assert store.incidents.read_open_count() == 0 and store.incidents.unresolved() == []
    fresh, created = store.incidents.open("down:h1", "h1", "again", {})  # resolved: a new one opens
    assert created and fresh.id != inc.id
    assert [i.id for i in store.incidents.recent()] == [fresh.id, inc.id]
    assert store.incidents.get(10**9) is None and store.incidents.update(10**9, state="resolved") is None


def test_log_cursors(store: Store) -> None:
    assert store.cursors.get("h1") is None
    store.cursors.put("h1", "/var/log/vllm.log", "abc", 10)
    store.cursors.put("h1", "/var/log/vllm.log", "abc", 5 * 2**31)  # past 32 bits: a big log
    assert store.cursors.get("h1") == ("/var/log/vllm.log", "abc", 5 * 2**31)


def test_reports(store: Store) -> None:
    assert store.reports.claim("report:h1", "p1")
    assert not store.reports.claim("report:h1", "p1")  # claimed, fresh: not retaken
    assert store.reports.unposted() == [("report:h1", "p1")]
    assert store.reports.claim("report:h1", "p1", stale_after=-1)  # a stale claim is retaken
    assert not store.reports.posted("report:h1", "p1") and store.reports.message("report:h1", "p1") is None
    store.reports.set_message("report:h1", "p1", "C1", "1.5")
    assert store.reports.message("report:h1", "p1") == ("C1", "1.5")
    store.reports.mark_posted("report:h1", "p1")
    assert store.reports.posted("report:h1", "p1") and store.reports.unposted() == []
    assert not store.reports.claim("report:h1", "p1", stale_after=-1)  # posted: never again


def test_write_probe(store: Store) -> None:
    assert store.write_probe() is None
    assert store.write_probe() is None  # the one row, replaced


def test_a_store_reopens_with_its_rows(state: str | Path) -> None:
    with _closing(Store(state, Redactor())) as s:
        s.locks.acquire("h1", "U1", "deploy")
    with _closing(Store(state, Redactor())) as s:
        assert s.locks.holder("h1") is not None


def test_two_stores_race_for_one_lock_and_one_wins(state: str | Path) -> None:
    """Two stores (two replicas, or two processes) taking one host's lock at once: one wins, every other
    attempt is told who holds it (never a constraint error)."""
    stores = [Store(state, Redactor()) for _ in range(2)]
    outcomes: list[str] = []
    start = threading.Barrier(8)

    def take(i: int) -> None:
        start.wait()
        try:
            stores[i % 2].locks.acquire("h1", f"U{i}", "deploy")
            outcomes.append("won")
        except LockHeld:
            outcomes.append("held")
        except Exception as exc:
            outcomes.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=take, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for s in stores:
        s.close()
    assert sorted(outcomes) == ["held"] * 7 + ["won"], outcomes


def test_close_writes_what_is_queued(state: str | Path) -> None:
    s = Store(state, Redactor())
    rows = [s.audit.queue(source="cli", text=f"t{i}") for i in range(20)]
    s.close()
    with _closing(Store(state, Redactor())) as again:
        assert len(again.audit.recent(limit=100)) == 20
    assert all(r.committed(1) > 0 for r in rows)


class _closing:
    def __init__(self, store: Store) -> None:
        self.store = store

    def __enter__(self) -> Store:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.store.close()


def test_the_sqlite_store_keeps_its_pragmas(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with _closing(Store(path, Redactor())) as s:
        s.locks.acquire("h1", "U1", "deploy")
        import sqlite3

        db = sqlite3.connect(path)
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        db.close()
    assert os.path.exists(path)


def test_the_metrics_reads_wait_for_no_writer(store: Store, state: str | Path) -> None:
    """/metrics' reads run on a read-only connection of their own: another writer holding the write lock (SQLite's
    BEGIN IMMEDIATE, the store's advisory lock on PostgreSQL) does not hold them up."""
    store.incidents.open("down:h1", "h1", "down", {})
    store.samples.add("h1", True, {}, at=50.0)
    engine = _engine_of(state)
    with engine.connect() as other:
        if isinstance(state, str):
            from bot.store.database import _WRITE_LOCK

            other.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": _WRITE_LOCK})
        else:
            other.exec_driver_sql("BEGIN IMMEDIATE")
        began = time.monotonic()
        assert store.incidents.read_open_count() == 1 and store.samples.read_last_up() == {"h1": 50.0}
        assert time.monotonic() - began < 2
        other.rollback()
        if isinstance(state, str):
            other.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": _WRITE_LOCK})
    engine.dispose()


def test_two_stores_open_a_new_database_at_once(state: str | Path) -> None:
    """Two replicas (or a bot and a CLI) starting on one new database: both open, the schema is made once."""
    opened: list[object] = []
    start = threading.Barrier(2)

    def open_one() -> None:
        start.wait()
        try:
            opened.append(Store(state, Redactor()))
        except Exception as exc:
            opened.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(isinstance(s, Store) for s in opened) and len(opened) == 2, opened
    for s in opened:
        s.close()  # type: ignore[union-attr]
    with _engine_of(state).connect() as db:
        assert db.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all() == ["rollouts"]
