"""On-call incidents: one open incident per key (a host, or an Alertmanager group), with its timeline
in SQLite; a Notifier (Slack, or the terminal) shows it. Opening one runs the diagnosis and puts
it in the incident's thread.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from bot.config import Config
from bot.core.alerts import Alert
from bot.core.report import Report
from bot.core.results.health import HealthReport
from bot.core.results.records import Incident
from bot.store.facade import Store

log = logging.getLogger("specops.incidents")


class Notifier(Protocol):
    def incident_opened(self, inc: Incident, alerts: list[Alert]) -> tuple[str, str] | None: ...

    def incident_note(self, inc: Incident, text: str, report: Report | None = None) -> None: ...

    def incident_closed(self, inc: Incident, text: str) -> None: ...

    def health_report(self, host: str, report: HealthReport, chart_png: bytes | None) -> bool:
        """Post it; False when it could not be posted (it is tried again)."""
        ...


class IncidentManager:
    """One open incident per key; inside it, what still fires, by fingerprint.

    An alert keeps its incident open until its own source says it is over: Alertmanager's `resolved`
    for its fingerprint, or the watch's health for the watch's alerts. Only samples that show health
    count (an idle server shows nothing). A person's resolve closes it whatever fires. The automatic
    diagnosis runs on a small pool, at most one per host at a time, so a slow or unreachable host never
    holds the caller (the Alertmanager webhook answers at once)."""

    def __init__(self, config: Config, store: Store, notifier: Notifier, diagnose: Any = None,
                 workers: int = 4) -> None:
        self.config = config
        self.store = store
        self.notifier = notifier
        self.diagnose = diagnose  # host -> Report, for the first message's thread; None: no diagnosis
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="specops-incident")
        self._diagnosing: set[str] = set()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def get(self, incident_id: int) -> Incident | None:
        return self.store.incidents.get(incident_id)

    def acknowledge(self, incident_id: int, user: str) -> Incident | None:
        inc = self.store.incidents.get(incident_id)
        if inc is None:
            return None
        return self.store.incidents.update(inc.id, state="acknowledged" if inc.state == "open" else None,
                                           event={"event": "acknowledged", "user": user}) or inc

    def on_alerts(self, key: str, host: str, alerts: list[Alert], source: str = "watch",
                  fingerprints: list[str] | None = None) -> Incident:
        """Open the key's incident, or add what is new to its thread; remember each alert as firing."""
        prints = fingerprints or [f"{source}:{a.kind}" for a in alerts]
        with self._lock:
            inc, created = self.store.incidents.open(key, host, alerts[0].title, {
                "event": "opened", "source": source, "alerts": [a.__dict__ for a in alerts]})
            now = time.time()
            active = dict(inc.active)
            for fp, a in zip(prints, alerts, strict=True):
                active.setdefault(fp, {"source": source, "kind": a.kind, "title": a.title, "since": now})
            if created:
                inc = self.store.incidents.update(inc.id, active=active) or inc
                where = self.notifier.incident_opened(inc, alerts)
                if where is not None:
                    inc = self.store.incidents.update(inc.id, channel=where[0], ts=where[1]) or inc
                self._diagnose_later(inc)
                return inc
            merged, fresh = self.store.incidents.add_alerts(inc.id, active, [a.__dict__ for a in alerts], source)
            inc = merged or inc
            if fresh:
                self.notifier.incident_note(inc, "\n".join(f"*{a['title']}*: {a['detail']}" for a in fresh))
            return inc

    def on_resolved(self, key: str, fingerprints: list[str], source: str) -> Incident | None:
        """Some of the key's alerts are over. The incident closes when nothing fires any more."""
        with self._lock:
            inc = self._open(key)
            if inc is None:
                return None
            gone = [fp for fp in fingerprints if fp in inc.active]
            if not gone:
                return None
            active = {fp: a for fp, a in inc.active.items() if fp not in gone}
            titles = ", ".join(sorted({str(inc.active[fp].get("title")) for fp in gone}))
            if active:
                still = ", ".join(sorted({str(a.get("title")) for a in active.values()}))
                inc = self.store.incidents.update(inc.id, active=active, event={
                    "event": "partly resolved", "source": source, "resolved": gone}) or inc
                self.notifier.incident_note(inc, f"Resolved: {titles}. Still firing: {still}.")
                return None
            return self._close(inc, f"Resolved: {titles} ({source}).", source, active={})

    def on_healthy(self, key: str, streak: int) -> Incident | None:
        """`streak` samples in a row showed health: the watch's own alerts are over."""
        if streak < self.config.watch.rules.resolve_after:
            return None
        inc = self._open(key)
        if inc is None:
            return None
        prints = inc.active_from("watch")
        if not prints and inc.active:  # opened by Alertmanager: only Alertmanager (or a person) resolves it
            return None
        if not prints:  # an incident from before fingerprints: the watch opened it
            with self._lock:
                return self._close(inc, f"Resolved automatically after {streak} healthy samples.", "watch", {})
        return self.on_resolved(key, prints, "watch")

    def resolve_incident(self, incident_id: int, why: str, source: str) -> Incident | None:
        """A person resolves this incident (a button acts on its own incident, not the host's newest)."""
        with self._lock:
            inc = self.store.incidents.get(incident_id)
            if inc is None or inc.state == "resolved":
                return None
            return self._close(inc, why, source, {})

    def resolve(self, key: str, why: str, source: str) -> Incident | None:
        inc = self._open(key)
        return self.resolve_incident(inc.id, why, source) if inc is not None else None

    def _open(self, key: str) -> Incident | None:
        return next((i for i in self.store.incidents.unresolved() if i.key == key), None)

    def _close(self, inc: Incident, why: str, source: str, active: dict[str, dict[str, Any]]) -> Incident | None:
        done = self.store.incidents.update(inc.id, state="resolved", active=active,
                                           event={"event": "resolved", "source": source, "why": why})
        if done is not None:
            self.notifier.incident_closed(done, why)
        return done

    def _diagnose_later(self, inc: Incident) -> None:
        if self.diagnose is None or inc.host in self._diagnosing:
            return
        self._diagnosing.add(inc.host)
        try:
            self._pool.submit(self._diagnose_into, inc)
        except RuntimeError:  # the pool is shut down: the bot is stopping
            self._diagnosing.discard(inc.host)

    def _diagnose_into(self, inc: Incident) -> None:
        try:
            report = self.diagnose(inc.host)
        except Exception as exc:  # the incident stands even when the diagnosis cannot run
            log.warning("diagnosis for incident %s failed: %s", inc.id, exc)
            self.notifier.incident_note(inc, f"The automatic diagnosis could not run: {exc}")
            return
        finally:
            self._diagnosing.discard(inc.host)
        self.notifier.incident_note(inc, "Automatic diagnosis:", report)
