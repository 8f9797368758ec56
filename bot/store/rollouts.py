"""The rollout record: its plan (hosts, batches, gate) and how far it got, per host, what `rollout --resume` and
`--abort` act on after a crash."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

from bot.store.database import Database
from bot.store.engine import sql
from bot.store.holders import boot_id, holder_gone, process_start


@dataclass
class RolloutRecord:
    """A rollout as the store keeps it: its plan (hosts, batches, gate) and how far it got, per host."""

    id: str
    profile: str
    owner: str
    state: str  # running | passed | failed | cancelled | aborted | restored
    plan: dict[str, Any]
    progress: dict[str, Any]
    started_at: float
    updated_at: float
    holder_gone: bool  # its process is gone (a SIGKILL, a crash): --resume or --abort may act on it


class Rollouts:
    def __init__(self, db: Database) -> None:
        self.db = db

    def begin(self, rollout_id: str, profile: str, owner: str, plan: dict[str, Any],
              progress: dict[str, Any]) -> None:
        me = os.getpid()
        with self.db.transaction() as db:
            db.execute(sql("INSERT INTO rollouts(id, profile, owner, state, plan, progress, started_at, updated_at, "
                           "pid, boot_id, pid_start, replica) VALUES (:id, :profile, :owner, 'running', :plan, "
                           ":progress, :now, :now, :pid, :boot, :start, :replica)"),
                       {"id": rollout_id, "profile": profile, "owner": owner, "plan": json.dumps(plan),
                        "progress": json.dumps(self.db.redactor.obj(progress)), "now": time.time(), "pid": me,
                        "boot": boot_id(), "start": process_start(me), "replica": self.db.replica})

    def update(self, rollout_id: str, *, progress: dict[str, Any] | None = None, state: str | None = None,
               resumed: bool = False) -> None:
        """Save where the rollout is; `resumed`: this process carries it on (its holder is this one now)."""
        sets = ["updated_at = :now"]
        args: dict[str, Any] = {"id": rollout_id, "now": time.time()}
        if progress is not None:
            sets.append("progress = :progress")
            args["progress"] = json.dumps(self.db.redactor.obj(progress))
        if state is not None:
            sets.append("state = :state")
            args["state"] = state
        if resumed:
            me = os.getpid()
            sets += ["pid = :pid", "boot_id = :boot", "pid_start = :start", "replica = :replica"]
            args.update(pid=me, boot=boot_id(), start=process_start(me), replica=self.db.replica)
        with self.db.transaction() as db:
            db.execute(sql(f"UPDATE rollouts SET {', '.join(sets)} WHERE id = :id"), args)

    def recent(self, state: str | None = None, limit: int = 20) -> list[RolloutRecord]:
        """The latest rollouts first; `state`: only those in it ('running': begun and not ended)."""
        where = "WHERE state = :state " if state else ""
        with self.db.transaction() as db:
            rows = db.execute(sql("SELECT id, profile, owner, state, plan, progress, started_at, updated_at, pid, "
                                  f"boot_id, pid_start FROM rollouts {where}ORDER BY started_at DESC LIMIT :limit"),
                              {"state": state, "limit": limit}).fetchall()
        return [RolloutRecord(r[0], r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]), float(r[6]), float(r[7]),
                              holder_gone(r[8], r[9], r[10])) for r in rows]
