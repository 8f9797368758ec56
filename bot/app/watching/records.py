"""What the store remembers, as the adapters may read or change it: locks, audit, incidents, samples.

Every function takes the store of the object graph (app/services.py); none opens one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from bot.app.watching.replicas import replica_views
from bot.config import Config
from bot.core.results.records import AuditEntry, Incident, ReplicaView
from bot.errors import InputError, OperationError
from bot.store.facade import Store

# Store is handed on: the front doors may not import the store
__all__ = ["LockInfo", "Store", "audit_entries", "break_lock", "incident", "incidents", "latest_profile", "lock_of",
           "refuse_unforced", "samples"]


@dataclass
class LockInfo:
    owner: str
    operation: str
    started_at: float
    stale: bool = False  # its holder process is gone

    @property
    def age(self) -> float:
        return time.time() - self.started_at


def lock_of(store: Store, config: Config, host: str) -> LockInfo | None:
    config.host(host)
    held = store.locks.holder(host)
    return LockInfo(*held, stale=store.locks.stale(host)) if held else None


def refuse_unforced(config: Config, host: str, info: LockInfo, *, force: bool) -> None:
    """A fresh lock (younger than settings.lock_stale_after) whose holder is alive is broken only with force: the
    one rule of `unlock`, its plan and its run. Raises OperationError."""
    if info.age < config.settings.lock_stale_after and not force and not info.stale:
        raise OperationError(f"{host} is locked by {info.owner} for {info.operation} since "
                             f"{info.age / 60:.0f} min: it may still be running. Only `unlock {host} --force` "
                             "breaks it, if you know it is not.")


def break_lock(store: Store, config: Config, host: str, *, force: bool) -> LockInfo | None:
    """Break HOST's deploy lock (see refuse_unforced)."""
    info = lock_of(store, config, host)
    if info is None:
        return None
    refuse_unforced(config, host, info, force=force)
    store.locks.clear(host)
    return info


def replicas(store: Store) -> list[ReplicaView]:
    """The bots that serve on this store, the leader first (`specops replicas`)."""
    return replica_views(store)


def audit_entries(store: Store, limit: int) -> list[AuditEntry]:
    return store.audit.recent(limit)


def incidents(store: Store, limit: int) -> list[Incident]:
    return store.incidents.recent(limit)


def incident(store: Store, incident_id: int) -> Incident:
    """One incident with its whole timeline; a number the store does not have is the user's mistake."""
    found = store.incidents.get(incident_id)
    if found is None:
        raise InputError(f"no incident #{incident_id}; `specops incidents` lists them")
    return found


def samples(store: Store, host: str, hours: float) -> list[tuple[float, bool, dict[str, Any]]]:
    return store.samples.for_host(host, since=time.time() - hours * 3600)


def latest_profile(store: Store, host: str) -> str | None:
    """The profile of the host's latest deployment, if specops recorded one."""
    dep = store.deployments.latest(host)
    return dep.profile if dep is not None else None
