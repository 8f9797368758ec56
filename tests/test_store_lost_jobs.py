"""A job whose replica stopped before it finished is found, claimed once, its plan marked `lost` and its audit
rows closed (issue 36: a confirmed deploy was lost with the replica that took the press — the audit row stayed
`started` and a second press said "already confirmed"). Real SQLite; two Store objects as two replicas."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from bot.redact import Redactor
from bot.store.facade import Store


def test_a_dead_replicas_job_is_claimed_once_with_its_plan_and_audit(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    a, b = Store(db, Redactor()), Store(db, Redactor())
    a.db.replica, b.db.replica = "bot-a/1/1", "bot-b/2/2"
    try:
        a.plans.save("0123456789ab", "deploy mtp a6000", "T1", "U1", "C1", "111.222", time.time() + 600)
        a.plans.set_message("0123456789ab", "111.333")
        assert a.plans.settle("0123456789ab", "confirmed") is None
        row = a.audit.queue(source="button", text="confirm plan 0123456789ab", user="U1", channel="C1",
                            plan_id="0123456789ab")
        a.audit.flush()
        assert row is not None
        a.replicas.beat(False)
        b.replicas.beat(False)
        a.jobs.started("0123456789ab", "deploy mtp a6000", "U1")
        assert b.jobs.lost(5.0) == []  # a beats: nothing is lost
        con = sqlite3.connect(db)
        con.execute("UPDATE replicas SET heartbeat = heartbeat - 60 WHERE id = 'bot-a/1/1'")
        con.execute("UPDATE jobs SET started_at = started_at - 60")
        con.commit()
        con.close()
        assert a.jobs.lost(5.0) == []  # a replica never claims its own jobs
        lost = b.jobs.lost(5.0)
        assert [(j.id, j.replica, j.channel, j.thread_ts) for j in lost] == [
            ("0123456789ab", "bot-a/1/1", "C1", "111.222")]
        assert b.jobs.lost(5.0) == []  # claimed once
        assert b.plans.settle("0123456789ab", "confirmed") == "lost"
        entry = next(e for e in b.audit.recent(10) if e.plan_id == "0123456789ab")
        assert entry.result == "lost" and entry.finished_at is not None
    finally:
        a.close()
        b.close()


def test_a_replica_whose_process_is_gone_on_this_machine_is_not_alive_at_once(tmp_path: Path) -> None:
    # issue 38: `specops replicas` listed a SIGKILLed leader as "standby" until its heartbeat aged past the lease
    import subprocess
    import sys

    from bot.app.watching.replicas import replica_views

    db = tmp_path / "s.db"
    store = Store(db, Redactor())
    try:
        store.replicas.beat(leader=False)
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        with sqlite3.connect(db) as conn:  # the row a replica SIGKILLed a moment ago leaves behind
            conn.execute("INSERT INTO replicas(id, machine, pid, started_at, heartbeat, leader, detail) "
                         "SELECT 'gone', machine, ?, started_at, heartbeat, 0, '' FROM replicas", (dead.pid,))
        views = {v.id: v for v in replica_views(store)}
        assert views["gone"].alive is False and views[store.replica].alive is True
    finally:
        store.close()
