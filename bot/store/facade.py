"""The store as the object graph holds it: one database, opened (and migrated) here, and one object per table group
over it. A use case takes the group it needs (`store.locks`, `store.audit`, `store.incidents`, ...)."""

from __future__ import annotations

import os
from pathlib import Path

from bot.redact import Redactor
from bot.store.audit import Audit
from bot.store.database import LEASE, Database
from bot.store.deliveries import Deliveries
from bot.store.deployments import Deployments
from bot.store.engine import StateTarget
from bot.store.incidents import Incidents
from bot.store.jobs import Jobs
from bot.store.locks import Locks
from bot.store.plans import Plans
from bot.store.replicas import Replicas
from bot.store.reports import Reports
from bot.store.rollouts import Rollouts
from bot.store.startups import Startups
from bot.store.watches import LogCursors, Samples


class Store:
    def __init__(self, path: str | os.PathLike[str], redactor: Redactor, *, password_env: str | None = None,
                 migrations: Path | None = None, lease: float = LEASE) -> None:
        self.db = Database(path, redactor, password_env=password_env, migrations=migrations, lease=lease)
        self.locks = Locks(self.db)
        self.deployments = Deployments(self.db)
        self.startups = Startups(self.db)
        self.audit = Audit(self.db)
        self.incidents = Incidents(self.db)
        self.samples = Samples(self.db)
        self.cursors = LogCursors(self.db)
        self.reports = Reports(self.db)
        self.replicas = Replicas(self.db)
        self.deliveries = Deliveries(self.db)
        self.plans = Plans(self.db)
        self.jobs = Jobs(self.db)
        self.rollouts = Rollouts(self.db)

    @property
    def redactor(self) -> Redactor:
        return self.db.redactor

    @property
    def lease(self) -> float:
        """How long a host lock, or a replica's lead, not renewed is good for (settings.lease_seconds)."""
        return self.db.lease

    @property
    def replica(self) -> str:
        """This process among the bots on the store (holders.replica_id)."""
        return self.db.replica

    @property
    def target(self) -> StateTarget:
        return self.db.target

    @property
    def path(self) -> Path | None:
        """The SQLite file (None on a database server)."""
        return self.db.path

    @property
    def shared(self) -> bool:
        """More than one replica may use this store (PostgreSQL): what a replica holds in memory, it shares."""
        return self.db.pg

    def write_probe(self, timeout: float = 1.0) -> str | None:
        """None if a write to the database commits now; else why not (database.Database.write_probe)."""
        return self.db.write_probe(timeout)

    def close(self) -> None:
        self.locks.close()
        self.deliveries.close()
        self.audit.close()  # what was queued is written before the database closes
        self.db.close()
