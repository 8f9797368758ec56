"""On-call incidents: one open incident per key (a host, or an Alertmanager group), with its timeline
in SQLite; a Notifier (Slack, or the terminal) shows it. Opening one runs the diagnosis and puts
it in the incident's thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

from bot.app.watch import Alert
from bot.config import Config
from bot.core.report import Report
from bot.store import Incident, Store

log = logging.getLogger("specops.incidents")


class Notifier(Protocol):
    def incident_opened(self, inc: Incident, alerts: list[Alert]) -> tuple[str, str] | None: ...

    def incident_note(self, inc: Incident, text: str, report: Report | None = None) -> None: ...

    def incident_closed(self, inc: Incident, text: str) -> None: ...

    def health_report(self, host: str, report: Report, chart_png: bytes | None) -> None: ...


class IncidentManager:
    def __init__(self, config: Config, store: Store, notifier: Notifier, diagnose: Any = None) -> None:
        self.config = config
        self.store = store
        self.notifier = notifier
        self.diagnose = diagnose  # host -> Report, for the first message's thread; None: no diagnosis
        self._lock = threading.Lock()

    def get(self, incident_id: int) -> Incident | None:
        return self.store.incident(incident_id)

    def acknowledge(self, incident_id: int, user: str) -> Incident | None:
        inc = self.store.incident(incident_id)
        if inc is None:
            return None
        return self.store.update_incident(inc.id, state="acknowledged" if inc.state == "open" else None,
                                          event={"event": "acknowledged", "user": user}) or inc

    def on_alerts(self, key: str, host: str, alerts: list[Alert], source: str = "watch") -> Incident:
        """Open the key's incident, or add what is new to its thread."""
        with self._lock:
            inc, created = self.store.open_incident(key, host, alerts[0].title, {
                "event": "opened", "source": source, "alerts": [a.__dict__ for a in alerts]})
            if created:
                where = self.notifier.incident_opened(inc, alerts)
                if where is not None:
                    inc = self.store.update_incident(inc.id, channel=where[0], ts=where[1]) or inc
                self._diagnose_into(inc)
                return inc
            seen = {a.get("kind") for e in inc.timeline for a in e.get("alerts", [])}
            fresh = [a for a in alerts if a.kind not in seen]
            if fresh:
                inc = self.store.update_incident(inc.id, event={
                    "event": "alert", "source": source, "alerts": [a.__dict__ for a in fresh]}) or inc
                self.notifier.incident_note(inc, "\n".join(f"*{a.title}*: {a.detail}" for a in fresh))
            return inc

    def _diagnose_into(self, inc: Incident) -> None:
        if self.diagnose is None:
            return
        try:
            report = self.diagnose(inc.host)
        except Exception as exc:  # the incident stands even when the diagnosis cannot run
            log.warning("diagnosis for incident %s failed: %s", inc.id, exc)
            self.notifier.incident_note(inc, f"The automatic diagnosis could not run: {exc}")
            return
        self.notifier.incident_note(inc, "Automatic diagnosis:", report)

    def on_healthy(self, key: str, streak: int) -> Incident | None:
        """Resolve the key's incident after `resolve_after` healthy samples in a row."""
        need = self.config.watch.rules.resolve_after
        with self._lock:
            open_ = [i for i in self.store.open_incidents() if i.key == key]
            if not open_ or streak < need:
                return None
            inc = self.store.update_incident(open_[0].id, state="resolved",
                                             event={"event": "resolved", "source": "watch", "healthy": streak})
            if inc is not None:
                self.notifier.incident_closed(inc, f"Resolved automatically after {streak} healthy samples.")
            return inc

    def resolve(self, key: str, why: str, source: str) -> Incident | None:
        with self._lock:
            open_ = [i for i in self.store.open_incidents() if i.key == key]
            if not open_:
                return None
            inc = self.store.update_incident(open_[0].id, state="resolved",
                                             event={"event": "resolved", "source": source, "why": why})
            if inc is not None:
                self.notifier.incident_closed(inc, why)
            return inc
