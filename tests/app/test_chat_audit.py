"""The chat dispatcher's audit rows: queued by the turn (no SQLite call before the answer), committed by
the store's writer before anything they are for runs, and written in order."""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bot.app.chat import AuditNotWritten, ChatDispatcher, Who
from bot.app.services import build_services
from bot.app.verbs import REGISTRY
from bot.config import Config, HostConfig, Profile, Settings
from bot.errors import OperationError

WHO = Who("slash", "U1", "T0", "C0")


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    (tmp_path / "kh").write_text("")
    return Config(hosts={"a6000": HostConfig(address="127.0.0.1", port=9, user="x", known_hosts=tmp_path / "kh")},
                  profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3)},
                  settings=Settings(state=tmp_path / "specops.db"))


def _status_runs(monkeypatch: pytest.MonkeyPatch, work: Any) -> None:
    """`status` runs `work` instead of its use case (the registry is the one dispatch)."""
    monkeypatch.setitem(REGISTRY, "status", dataclasses.replace(REGISTRY["status"], run=work))


def rows_on_disk(path: Path) -> list[tuple[Any, ...]]:
    """What another process would read: a connection of its own, committed rows only."""
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT id, text, result, finished_at, detail FROM audit ORDER BY id").fetchall()
    finally:
        db.close()


def test_a_turn_answered_at_once_leaves_one_closed_row(cfg: Config) -> None:
    svc = build_services(cfg)
    store = svc.store
    chat = ChatDispatcher(svc)
    assert chat.decide("help", WHO).next == "reply"
    assert chat.decide("frobnicate", WHO).next == "reply"
    [usage, help_] = store.audit.recent(5)
    assert (help_.text, help_.result, help_.detail) == ("help", "ok", "help") and help_.finished_at
    assert usage.result == "usage" and usage.finished_at
    store.close()
    assert [r[2] for r in rows_on_disk(cfg.settings.state)] == ["ok", "usage"]


def test_the_audit_row_is_committed_before_the_work_starts(cfg: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[tuple[Any, ...]]] = []

    def work(cmd: Any, config: Config, **kw: Any) -> Any:
        seen.append(rows_on_disk(cfg.settings.state))
        raise OperationError("a6000: cannot connect")

    _status_runs(monkeypatch, work)
    svc = build_services(cfg)
    store = svc.store
    chat = ChatDispatcher(svc)
    decision = chat.decide("status a6000", WHO)
    assert decision.next == "run" and decision.command is not None
    with pytest.raises(OperationError):
        chat.run(decision.command, decision.audit, "U1 via test")
    assert seen and [(r[1], r[2], r[3]) for r in seen[0]] == [("status a6000", "started", None)]
    entry = store.audit.recent(1)[0]
    assert entry.result == "error" and "cannot connect" in entry.detail and entry.finished_at
    store.close()


def test_the_turn_does_not_wait_on_the_database_and_the_work_waits_for_its_row(
        cfg: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    started = threading.Event()

    def work(cmd: Any, config: Config, **kw: Any) -> Any:
        started.set()
        raise OperationError("a6000: cannot connect")

    _status_runs(monkeypatch, work)
    svc = build_services(cfg)
    store = svc.store
    chat = ChatDispatcher(svc)
    other = sqlite3.connect(cfg.settings.state, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock (a CLI, a long write)
    try:
        t0 = time.monotonic()
        decision = chat.decide("status a6000", WHO)
        assert time.monotonic() - t0 < 0.5  # answered while the database is locked
        assert decision.command is not None
        outcome: list[BaseException] = []

        def job_() -> None:
            try:
                chat.run(decision.command, decision.audit, "U1 via test")  # type: ignore[arg-type]
            except BaseException as exc:
                outcome.append(exc)

        job = threading.Thread(target=job_)
        job.start()
        time.sleep(0.5)
        assert not started.is_set()  # the row is not committed: the work has not started
    finally:
        other.execute("COMMIT")
        other.close()
    job.join(10)
    assert started.is_set() and isinstance(outcome[0], OperationError)
    assert [r[1] for r in rows_on_disk(cfg.settings.state)] == ["status a6000"]
    store.close()


def test_a_row_that_cannot_be_written_runs_nothing(cfg: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[object] = []
    _status_runs(monkeypatch, lambda *a, **kw: ran.append(a))
    svc = build_services(cfg)
    store = svc.store

    def broken(ops_: list[Any]) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store.audit, "_write", broken)
    chat = ChatDispatcher(svc)
    decision = chat.decide("status a6000", WHO)
    assert decision.command is not None
    with pytest.raises(AuditNotWritten, match="disk I/O error"):
        chat.run(decision.command, decision.audit, "U1 via test")
    with pytest.raises(AuditNotWritten):
        chat.plan(decision.command, "U1 via test", decision.audit)
    assert ran == []
    store.close()


def test_outcomes_follow_their_rows_and_close_writes_what_is_queued(cfg: Config) -> None:
    svc = build_services(cfg)
    store = svc.store
    chat = ChatDispatcher(svc)
    rows = [chat.queue(WHO, f"status a6000 #{i}") for i in range(50)]
    for i, row in enumerate(rows):
        chat.end(row, "ok", f"done {i}")
    store.close()  # no flush first: close writes everything queued before it
    on_disk = rows_on_disk(cfg.settings.state)
    assert [(r[1], r[2], r[4]) for r in on_disk] == [(f"status a6000 #{i}", "ok", f"done {i}") for i in range(50)]
    assert [r.committed() for r in rows] == [r[0] for r in on_disk]
