"""Startup phases: how long each start of a profile on a host took to get ready, phase by phase, the estimate the
/health wait of the next start says."""

from __future__ import annotations

import json
import time

from bot.core.startup import StartupHistory, StartupRun
from bot.store.database import Database
from bot.store.engine import sql

STARTUP_KEEP = 20  # starts kept per host and profile
STARTUP_ESTIMATE_FROM = 3  # the newest starts the estimate is the median of


class Startups:
    def __init__(self, db: Database) -> None:
        self.db = db

    def record(self, host: str, profile: str, run: StartupRun, keep: int = STARTUP_KEEP) -> None:
        """One start of PROFILE on HOST that reached ready: its phases' times, for the next start's estimate
        (only the newest `keep` of each host and profile are kept)."""
        with self.db.transaction() as db:
            db.execute(sql("INSERT INTO startup_runs(host, profile, at, ready_seconds, phases) "
                           "VALUES (:host, :profile, :at, :ready, :phases)"),
                       {"host": host, "profile": profile, "at": time.time(), "ready": run.ready_seconds,
                        "phases": json.dumps([list(p) for p in run.phases])})
            db.execute(sql("DELETE FROM startup_runs WHERE host = :host AND profile = :profile AND id NOT IN "
                           "(SELECT id FROM startup_runs WHERE host = :host AND profile = :profile "
                           "ORDER BY id DESC LIMIT :keep)"), {"host": host, "profile": profile, "keep": keep})

    def history(self, host: str, profile: str, limit: int = STARTUP_ESTIMATE_FROM) -> StartupHistory:
        """The newest starts of PROFILE on HOST, newest first (none yet: an empty history)."""
        with self.db.transaction() as db:
            rows = db.execute(sql("SELECT ready_seconds, phases FROM startup_runs WHERE host = :host AND "
                                  "profile = :profile ORDER BY id DESC LIMIT :limit"),
                              {"host": host, "profile": profile, "limit": limit}).fetchall()
        runs = []
        for ready, phases in rows:
            try:
                pairs = tuple((str(k), float(v)) for k, v in json.loads(phases))
            except (ValueError, TypeError):
                continue  # a row written by hand or damaged: the others still make an estimate
            runs.append(StartupRun(float(ready), pairs))
        return StartupHistory(tuple(runs))
