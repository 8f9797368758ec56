"""Deployment rows: what was deployed on each host, by which run, and what it serves now. A row whose run is gone
(SIGKILLed, the machine restarted) is ended when read, not left `running`."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

from bot.store.database import Database
from bot.store.engine import sql
from bot.store.holders import boot_id, holder_gone, process_start, this_boot

DeploymentStatus = Literal["running", "serving", "failed", "stopped"]


@dataclass
class Deployment:
    id: int
    host: str
    profile: str
    fingerprint: str
    pid: int | None
    status: str
    started_at: float
    finished_at: float | None
    detail: dict[str, Any]


class Deployments:
    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, host: str, profile: str, fingerprint: str, status: DeploymentStatus,
               pid: int | None = None, detail: dict[str, Any] | None = None) -> int:
        me = os.getpid()
        with self.db.transaction() as db:
            return self.db.insert(db, "INSERT INTO deployments(host, profile, fingerprint, pid, status, started_at, "
                                  "detail, holder_pid, holder_boot, holder_start) VALUES (:host, :profile, :fp, :pid, "
                                  ":status, :at, :detail, :me, :boot, :start)",
                                  {"host": host, "profile": profile, "fp": fingerprint, "pid": pid, "status": status,
                                   "at": time.time(), "detail": json.dumps(self.db.redactor.obj(detail or {})),
                                   "me": me, "boot": boot_id(), "start": process_start(me)})

    def update(self, dep_id: int, *, status: DeploymentStatus | None = None, pid: int | None = None,
               detail: dict[str, Any] | None = None, finished: bool = False) -> None:
        with self.db.transaction() as db:
            if status is not None:
                db.execute(sql("UPDATE deployments SET status = :status WHERE id = :id"),
                           {"status": status, "id": dep_id})
            if status == "serving":
                # one server per host: what served (or was being deployed) there before this one is gone now
                # (in the same transaction, so no reader sees two serving rows)
                row = db.execute(sql("SELECT host FROM deployments WHERE id = :id"), {"id": dep_id}).fetchone()
                if row is not None:
                    self._end_rows(db, "host = :host AND id < :id AND status IN ('serving', 'running')",
                                   {"host": row[0], "id": dep_id}, "stopped", f"superseded by deployment #{dep_id}")
            if pid is not None:
                db.execute(sql("UPDATE deployments SET pid = :pid WHERE id = :id"), {"pid": pid, "id": dep_id})
            if detail is not None:
                db.execute(sql("UPDATE deployments SET detail = :detail WHERE id = :id"),
                           {"detail": json.dumps(self.db.redactor.obj(detail)), "id": dep_id})
            if finished:
                db.execute(sql("UPDATE deployments SET finished_at = :at WHERE id = :id"),
                           {"at": time.time(), "id": dep_id})

    def stop(self, host: str, why: str) -> int:
        """The host's server was stopped: its serving rows say so (how many there were)."""
        with self.db.transaction() as db:
            return self._end_rows(db, "host = :host AND status = 'serving'", {"host": host}, "stopped", why)

    def reconcile(self, host: str | None = None) -> int:
        """End the `running` rows whose run is gone (SIGKILLed, the machine restarted): they become `failed`,
        with why. How many rows changed."""
        with self.db.transaction() as db:
            return self._reconcile(db, host)

    def _reconcile(self, db: sa.Connection, host: str | None) -> int:
        where = "status = 'running'" if host is None else "status = 'running' AND host = :host"
        rows = db.execute(sql(f"SELECT id, host, holder_pid, holder_boot, holder_start FROM deployments "
                              f"WHERE {where}"), {"host": host}).fetchall()
        changed = 0
        for dep_id, dep_host, pid, boot, started in rows:
            if pid is not None and this_boot(boot):
                if not holder_gone(pid, boot, started):
                    continue  # its run is still going
                why = f"the run that wrote it (pid {pid}) is gone"
            else:
                # written before rows knew their run, or in another boot: a deploy holds the host's lock while it
                # runs, so a row whose host has no live lock has no run behind it
                lock = db.execute(sql("SELECT pid, boot_id, pid_start FROM locks WHERE host = :host"),
                                  {"host": dep_host}).fetchone()
                if lock is not None and not holder_gone(lock[0], lock[1], lock[2]):
                    continue
                why = (f"the run that wrote it (pid {pid}) is gone" if pid is not None
                       else f"the run that wrote it is gone ({dep_host} holds no lock)")
            changed += self._end_rows(db, "id = :id", {"id": dep_id}, "failed", why)
        return changed

    def _end_rows(self, db: sa.Connection, where: str, args: dict[str, Any], status: DeploymentStatus,
                  why: str) -> int:
        """Rows matching `where` take `status`, a finish time if they had none, and `why` as their message
        (what the row said before stays in its detail)."""
        now = time.time()
        rows = db.execute(sql(f"SELECT id, detail FROM deployments WHERE {where}"), args).fetchall()
        for dep_id, raw in rows:
            try:
                detail = json.loads(raw or "{}")
            except ValueError:
                detail = {}
            if not isinstance(detail, dict):
                detail = {}
            if "message" in detail:
                detail["before"] = detail["message"]
            detail["message"] = why
            db.execute(sql("UPDATE deployments SET status = :status, finished_at = COALESCE(finished_at, :now), "
                           "detail = :detail WHERE id = :id"),
                       {"status": status, "now": now, "detail": json.dumps(self.db.redactor.obj(detail)), "id": dep_id})
        return len(rows)

    def latest(self, host: str) -> Deployment | None:
        """The host's latest row, reconciled first: a row whose run is gone does not read as `running`."""
        with self.db.transaction() as db:
            self._reconcile(db, host)
            row = db.execute(sql("SELECT id, host, profile, fingerprint, pid, status, started_at, finished_at, "
                                 "detail FROM deployments WHERE host = :host ORDER BY id DESC LIMIT 1"),
                             {"host": host}).fetchone()
        if row is None:
            return None
        return Deployment(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], json.loads(row[8] or "{}"))

    def read_serving(self) -> dict[str, str]:
        """Per host, the profile its latest deployment row serves (hosts whose latest row is not serving are left
        out); waits for no write lock (the bot's own /metrics exports it for the alert rules and the dashboard)."""
        with self.db.reader() as db:
            rows = db.execute(sql("SELECT d.host, d.profile FROM deployments d WHERE d.status = 'serving' AND "
                                  "d.id = (SELECT MAX(e.id) FROM deployments e WHERE e.host = d.host)")).fetchall()
        return {r[0]: r[1] for r in rows if r[1]}
