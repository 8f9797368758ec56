"""Replicas: the bots serving on one store, each beating its row (and the lease of the locks it holds)."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

from bot.store.database import Database
from bot.store.deliveries import SEEN_KEEP
from bot.store.engine import sql


@dataclass
class Replica:
    id: str
    machine: str
    pid: int
    started_at: float
    heartbeat: float
    leader: bool
    detail: str


class Replicas:
    def __init__(self, db: Database) -> None:
        self.db = db

    def beat(self, leader: bool, detail: str = "", started_at: float | None = None) -> None:
        """This replica is alive (and leads, or not): its row, and the lease of every lock it holds."""
        now = time.time()
        me = self.db.replica
        with self.db.transaction() as db:
            db.execute(sql("INSERT INTO replicas(id, machine, pid, started_at, heartbeat, leader, detail) VALUES "
                           "(:id, :machine, :pid, :started, :now, :leader, :detail) ON CONFLICT(id) DO UPDATE SET "
                           "heartbeat = excluded.heartbeat, leader = excluded.leader, detail = excluded.detail"),
                       {"id": me, "machine": socket.gethostname(), "pid": os.getpid(),
                        "started": started_at or now, "now": now, "leader": int(leader), "detail": detail})
            if leader:  # one row says it leads: a dead leader's row does not say so any more
                db.execute(sql("UPDATE replicas SET leader = 0 WHERE id != :id AND leader = 1"), {"id": me})
            db.execute(sql("UPDATE locks SET heartbeat = :now WHERE replica = :id"), {"now": now, "id": me})
            db.execute(sql("DELETE FROM replicas WHERE heartbeat < :old"), {"old": now - 86400.0})
            db.execute(sql("DELETE FROM slack_seen WHERE at < :old"), {"old": now - SEEN_KEEP})

    def leave(self) -> None:
        """A replica that stops says so: its row goes."""
        with self.db.transaction() as db:
            db.execute(sql("DELETE FROM replicas WHERE id = :id"), {"id": self.db.replica})

    def all(self) -> list[Replica]:
        with self.db.transaction() as db:
            rows = db.execute(sql("SELECT id, machine, pid, started_at, heartbeat, leader, detail FROM replicas "
                                  "ORDER BY started_at")).fetchall()
        return [Replica(r[0], r[1], int(r[2]), float(r[3]), float(r[4]), bool(r[5]), r[6]) for r in rows]
