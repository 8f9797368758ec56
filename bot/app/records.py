"""What the store remembers, as the adapters may read or change it: locks, audit, incidents, samples."""

from __future__ import annotations

import time
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from bot.config import Config, Settings
from bot.errors import OperationError
from bot.store import AuditEntry, Incident, Store

__all__ = ["AuditEntry", "Incident", "LockInfo", "audit_entries", "break_lock", "incidents", "samples"]


@dataclass
class LockInfo:
    owner: str
    operation: str
    started_at: float
    stale: bool = False  # its holder process is gone

    @property
    def age(self) -> float:
        return time.time() - self.started_at


def _store(config: Config) -> closing[Store]:
    return closing(Store(config.settings.state))


def lock_of(config: Config, host: str) -> LockInfo | None:
    with _store(config) as store:
        held = store.lock_of(host)
        return LockInfo(*held, stale=store.lock_stale(host)) if held else None


def break_lock(config: Config, host: str, *, force: bool) -> LockInfo | None:
    """Break HOST's deploy lock; a fresh lock (younger than settings.lock_stale_after) only with force."""
    with _store(config) as store:
        held = store.lock_of(host)
        if held is None:
            return None
        info = LockInfo(*held, stale=store.lock_stale(host))
        if info.age < config.settings.lock_stale_after and not force and not info.stale:
            raise OperationError(f"{host} is locked by {info.owner} for {info.operation} since "
                                 f"{info.age / 60:.0f} min: it may still be running. "
                                 "Use --force if you know it is not.")
        store.break_lock(host)
        return info


# Reading the records needs only `settings.state`: no inventory, no profiles.

def audit_entries(settings: Settings, limit: int) -> list[AuditEntry]:
    with closing(Store(settings.state)) as store:
        return store.audit_list(limit)


def incidents(settings: Settings, limit: int) -> list[Incident]:
    with closing(Store(settings.state)) as store:
        return store.incidents(limit)


def samples(settings: Settings, host: str, hours: float) -> list[tuple[float, bool, dict[str, Any]]]:
    with closing(Store(settings.state)) as store:
        found = store.samples(host, since=time.time() - hours * 3600)
    return found


def latest_profile(settings: Settings, host: str) -> str | None:
    """The profile of the host's latest deployment, if specops recorded one (no database: none)."""
    if not settings.state.expanduser().exists():
        return None
    with closing(Store(settings.state)) as store:
        dep = store.latest_deployment(host)
    return dep.profile if dep is not None else None
