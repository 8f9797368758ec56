"""The object graph, built once per process: one config, one redactor, one store, one incident manager.

Adapters get a `Services` and hand its parts on; nothing below `app` builds its own store or redactor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.app.incidents import IncidentManager, Notifier
from bot.app.watch import HostWatch
from bot.config import Config
from bot.core.report import Report
from bot.redact import REDACTOR, Redactor, register_config_secrets
from bot.store import Store

DAY = 24 * 3600.0


class _NoNotifier:
    """Until an adapter attaches its notifier, incidents are kept in the store and said nowhere."""

    def incident_opened(self, inc: object, alerts: object) -> None:
        return None

    def incident_note(self, inc: object, text: str, report: Report | None = None) -> None:
        return None

    def incident_closed(self, inc: object, text: str) -> None:
        return None

    def health_report(self, host: str, report: Report, chart_png: bytes | None) -> bool:
        return False


@dataclass
class Services:
    config: Config
    redactor: Redactor
    store: Store
    manager: IncidentManager
    watches: dict[str, HostWatch] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def notifier(self) -> Notifier:
        return self.manager.notifier

    def attach_notifier(self, notifier: Notifier, diagnose: Callable[[str], Report] | None = None) -> None:
        self.manager.notifier = notifier
        if diagnose is not None:
            self.manager.diagnose = diagnose

    def watch_state(self, host: str) -> HostWatch:
        with self.lock:
            return self.watches.setdefault(host, HostWatch())

    def prune(self, now: float | None = None) -> None:
        """Samples older than `watch.keep_samples_days` go (the health report reads the last 24 h)."""
        keep = max(1.0, float(self.config.watch.keep_samples_days)) * DAY
        self.store.prune_samples((now or time.time()) - keep)

    def close(self) -> None:
        self.manager.close()
        for w in list(self.watches.values()):
            w.close()
        self.store.close()


def build_services(config: Config, *, redactor: Redactor | None = None, notifier: Notifier | None = None,
                   diagnose: Callable[[str], Report] | None = None) -> Services:
    redactor = redactor or REDACTOR
    register_config_secrets(config, redactor)
    store = Store(config.settings.state, redactor)
    manager = IncidentManager(config, store, notifier or _NoNotifier(), diagnose)
    return Services(config, redactor, store, manager)
