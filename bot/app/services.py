"""The object graph, built once per process: one config, one redactor, one store, one host pool, one
incident manager.

Adapters get a `Services` and hand its parts on; nothing below `app` builds its own store, redactor or
session. This is the only module that constructs a `Store` (besides tests); two graphs share nothing.
The APScheduler scheduler is an adapter's (bot/adapters/scheduler.py) and is built over a `Services`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bot.app.watching.incidents import IncidentManager, Notifier
from bot.app.watching.watch import HostWatch
from bot.config import Config, Settings
from bot.core.report import Report
from bot.core.results.health import HealthReport
from bot.engine.hosts import HostPool
from bot.redact import Redactor, redactor_for
from bot.store.engine import DATABASE_ERRORS, state_target
from bot.store.facade import Store

DAY = 24 * 3600.0

log = logging.getLogger("specops.services")


class _NoNotifier:
    """Until an adapter attaches its notifier, incidents are kept in the store and said nowhere."""

    def incident_opened(self, inc: object, alerts: object) -> None:
        return None

    def incident_note(self, inc: object, text: str, report: Report | None = None) -> None:
        return None

    def incident_closed(self, inc: object, text: str) -> None:
        return None

    def health_report(self, host: str, report: HealthReport, chart_png: bytes | None) -> bool:
        return False


class Services:
    """The graph. The store and the incident manager open on first use: a command line that only reads a
    log never creates the database (nor fails on a state directory it cannot write)."""

    def __init__(self, config: Config, redactor: Redactor, notifier: Notifier | None = None,
                 diagnose: Callable[[str], Report] | None = None) -> None:
        self.config = config
        self.redactor = redactor
        self.hosts = HostPool(config)
        self.watches: dict[str, HostWatch] = {}
        self.lock = threading.Lock()
        self._notifier: Notifier = notifier or _NoNotifier()
        self._diagnose = diagnose
        self._store: Store | None = None
        self._manager: IncidentManager | None = None

    @property
    def store(self) -> Store:
        with self.lock:
            if self._store is None:
                settings = self.config.settings
                self._store = Store(settings.state, self.redactor, password_env=settings.state_password_env,
                                    lease=settings.lease_seconds)
                try:
                    # a run killed before it could end its row (SIGKILL, OOM) left it `running`: it ends now
                    self._store.deployments.reconcile()
                except DATABASE_ERRORS as exc:  # a locked database: the rows are reconciled when next read
                    log.warning("could not reconcile deployment rows: %s", exc)
            return self._store

    @property
    def shared_store(self) -> bool:
        """Several replicas may serve on this state (a database server, not a file): what one holds in memory
        (a plan awaiting confirmation) is kept in the store instead."""
        return not isinstance(self.config.settings.state, Path)

    def existing_store(self) -> Store | None:
        """The store if there are records to read: what a read-only command (doctor, fleet) consults without
        creating the database."""
        state = self.config.settings.state
        if self._store is None and isinstance(state, Path) and not state.expanduser().exists():
            return None
        return self.store

    @property
    def manager(self) -> IncidentManager:
        store = self.store
        with self.lock:
            if self._manager is None:
                self._manager = IncidentManager(self.config, store, self._notifier, self._diagnose)
            return self._manager

    @property
    def notifier(self) -> Notifier:
        return self._manager.notifier if self._manager is not None else self._notifier

    def attach_notifier(self, notifier: Notifier, diagnose: Callable[[str], Report] | None = None) -> None:
        self._notifier = notifier
        self._diagnose = diagnose if diagnose is not None else self._diagnose
        if self._manager is not None:
            self._manager.notifier = notifier
            self._manager.diagnose = self._diagnose

    def watch_state(self, host: str) -> HostWatch:
        with self.lock:
            return self.watches.setdefault(host, HostWatch(pool=self.hosts))

    def prune(self, now: float | None = None) -> None:
        """Samples older than `watch.keep_samples_days` go (the health report reads the last 24 h)."""
        keep = max(1.0, float(self.config.watch.keep_samples_days)) * DAY
        self.store.samples.prune((now or time.time()) - keep)

    def close(self) -> None:
        if self._manager is not None:
            self._manager.close()
        for w in list(self.watches.values()):
            w.close()
        if self._store is not None:
            self._store.close()


def build_services(config: Config, *, redactor: Redactor | None = None, notifier: Notifier | None = None,
                   diagnose: Callable[[str], Report] | None = None) -> Services:
    """The graph for `config`. `redactor`: one the caller already prints through (it learns this config's
    secrets too); else a new one that knows them."""
    redactor = redactor_for(config) if redactor is None else _learn(redactor, config)
    return Services(config, redactor, notifier, diagnose)


def state_engine_url(settings: Settings) -> str:
    """The SQLAlchemy URL of the state (a SQLite file or PostgreSQL, password filled in) for what keeps its own
    tables beside the store's (APScheduler's job store)."""
    return str(state_target(settings.state, settings.state_password_env).url.render_as_string(hide_password=False))


def open_store(settings: Settings, redactor: Redactor | None = None) -> Store:
    """The store alone, for the commands that read records and need no inventory (audit, incidents, history)."""
    return Store(settings.state, redactor or redactor_for(None), password_env=settings.state_password_env,
                 lease=settings.lease_seconds)


def _learn(redactor: Redactor, config: Config) -> Redactor:
    from bot.redact import register_config_secrets

    register_config_secrets(config, redactor)
    return redactor
