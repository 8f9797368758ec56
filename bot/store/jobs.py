"""Running jobs, shared: a Cancel press may reach a replica other than the one running the job, and a job whose
replica stopped is found and said lost by another."""

from __future__ import annotations

import time
from dataclasses import dataclass

from bot.store.database import Database
from bot.store.engine import sql


@dataclass
class LostJob:
    """A job whose replica stopped before it finished (see Jobs.lost), with where its plan was posted."""

    id: str
    replica: str
    command: str
    requester: str
    channel: str | None
    thread_ts: str | None
    message_ts: str | None


@dataclass
class RunningJob:
    """A job some replica runs, as the shared store knows it."""

    id: str
    replica: str
    command: str
    requester: str
    cancel_by: str | None
    replica_silent: float | None  # seconds since its replica last beat
    replica_alive: bool


class Jobs:
    def __init__(self, db: Database) -> None:
        self.db = db

    def started(self, job_id: str, command: str, requester: str) -> None:
        with self.db.transaction() as db:
            db.execute(sql("INSERT INTO jobs(id, replica, command, requester, started_at) "
                           "VALUES (:id, :replica, :command, :requester, :now)"),
                       {"id": job_id, "replica": self.db.replica, "command": self.db.redactor.text(command),
                        "requester": requester, "now": time.time()})

    def finished(self, job_id: str) -> None:
        with self.db.transaction() as db:
            db.execute(sql("DELETE FROM jobs WHERE id = :id"), {"id": job_id})

    def running(self, job_id: str) -> RunningJob | None:
        """The job as its replica recorded it, with how long ago that replica last beat (None: never)."""
        with self.db.transaction() as db:
            row = db.execute(sql("SELECT j.replica, j.command, j.requester, j.cancel_by, r.heartbeat FROM jobs j "
                                 "LEFT JOIN replicas r ON r.id = j.replica WHERE j.id = :id"),
                             {"id": job_id}).fetchone()
        if row is None:
            return None
        silent = None if row[4] is None else max(0.0, time.time() - float(row[4]))
        return RunningJob(job_id, row[0], row[1], row[2], row[3], silent, silent is not None and silent < self.db.lease)

    def lost(self, silent_for: float) -> list[LostJob]:
        """Jobs whose replica has not beaten for `silent_for` s (or has no row any more): that replica is gone and
        the job with it. Each is claimed by deleting its row (so one replica reports it), its plan becomes `lost`
        and the plan's audit rows still open are closed."""
        now = time.time()
        out: list[LostJob] = []
        with self.db.transaction() as db:
            rows = db.execute(sql("SELECT j.id, j.replica, j.command, j.requester FROM jobs j LEFT JOIN replicas r "
                                  "ON r.id = j.replica WHERE (r.id IS NULL OR r.heartbeat < :old) "
                                  "AND j.started_at < :old AND j.replica != :me"),
                              {"old": now - silent_for, "me": self.db.replica}).fetchall()
            for job_id, replica, command, requester in rows:
                if db.execute(sql("DELETE FROM jobs WHERE id = :id AND replica = :replica"),
                              {"id": job_id, "replica": replica}).rowcount != 1:
                    continue  # another replica claimed it
                plan = db.execute(sql("SELECT channel, thread_ts, message_ts FROM plans WHERE id = :id"),
                                  {"id": job_id}).fetchone()
                db.execute(sql("UPDATE plans SET state = 'lost' WHERE id = :id"), {"id": job_id})
                db.execute(sql("UPDATE audit SET result = 'lost', finished_at = :now, detail = :detail "
                               "WHERE plan_id = :id AND finished_at IS NULL"),
                           {"now": now, "id": job_id, "detail": f"replica {replica} stopped before the job finished"})
                out.append(LostJob(str(job_id), str(replica), str(command), str(requester),
                                   *(plan if plan is not None else (None, None, None))))
        return out

    def request_cancel(self, job_id: str, by: str) -> bool:
        """Ask the job's replica to cancel it; False if the job is over (its row is gone)."""
        with self.db.transaction() as db:
            return db.execute(sql("UPDATE jobs SET cancel_by = :by, cancel_at = :now WHERE id = :id"),
                              {"by": by, "now": time.time(), "id": job_id}).rowcount == 1

    def cancels(self) -> list[str]:
        """This replica's jobs that someone asked (on any replica) to cancel."""
        with self.db.reader() as db:
            rows = db.execute(sql("SELECT id FROM jobs WHERE replica = :replica AND cancel_at IS NOT NULL"),
                              {"replica": self.db.replica}).fetchall()
        return [str(r[0]) for r in rows]
