"""Plans awaiting their confirm button, shared: the press may reach any replica, which settles the plan once."""

from __future__ import annotations

import time

from bot.store.database import Database
from bot.store.engine import sql


class Plans:
    def __init__(self, db: Database) -> None:
        self.db = db

    def save(self, plan_id: str, command: str, team: str | None, user: str, channel: str,
             thread_ts: str | None, expires_at: float) -> None:
        with self.db.transaction() as db:
            db.execute(sql('INSERT INTO plans(id, command, team, "user", channel, thread_ts, expires_at, state) '
                           "VALUES (:id, :command, :team, :user, :channel, :thread, :expires, 'pending')"),
                       {"id": plan_id, "command": self.db.redactor.text(command), "team": team, "user": user,
                        "channel": channel, "thread": thread_ts, "expires": expires_at})
            db.execute(sql("DELETE FROM plans WHERE expires_at < :old"), {"old": time.time() - 3600.0})

    def set_message(self, plan_id: str, message_ts: str | None) -> None:
        with self.db.transaction() as db:
            db.execute(sql("UPDATE plans SET message_ts = :ts WHERE id = :id"), {"ts": message_ts, "id": plan_id})

    def row(self, plan_id: str) -> tuple[str, str | None, str, str, str | None, float, str | None, str] | None:
        """(command, team, user, channel, thread_ts, expires_at, message_ts, state)."""
        with self.db.transaction() as db:
            row = db.execute(sql('SELECT command, team, "user", channel, thread_ts, expires_at, message_ts, state '
                                 "FROM plans WHERE id = :id"), {"id": plan_id}).fetchone()
        return (row[0], row[1], row[2], row[3], row[4], float(row[5]), row[6], row[7]) if row else None

    def settle(self, plan_id: str, state: str) -> str | None:
        """Move a pending plan to `state` once across replicas: None if this call did, else its state now."""
        with self.db.transaction() as db:
            done = db.execute(sql("UPDATE plans SET state = :state WHERE id = :id AND state = 'pending' "
                                  "AND expires_at >= :now"), {"state": state, "id": plan_id, "now": time.time()})
            if done.rowcount == 1:
                return None
            db.execute(sql("UPDATE plans SET state = 'expired' WHERE id = :id AND state = 'pending'"),
                       {"id": plan_id})
            row = db.execute(sql("SELECT state FROM plans WHERE id = :id"), {"id": plan_id}).fetchone()
        return str(row[0]) if row else "unknown"
