"""Incidents: one open incident per key (a host down, an alert), its timeline and what still fires, shared by the
replicas that receive the same alerts."""

from __future__ import annotations

import json
import time
from typing import Any

from bot.core.results.records import Incident, IncidentState
from bot.store.database import Database
from bot.store.engine import sql


class Incidents:
    def __init__(self, db: Database) -> None:
        self.db = db

    def open(self, key: str, host: str, title: str, event: dict[str, Any]) -> tuple[Incident, bool]:
        """The open incident for `key`, creating it if there is none: (incident, created)."""
        with self.db.transaction() as db:
            row = db.execute(sql(_INCIDENT_SELECT + " WHERE key = :key AND state != 'resolved'"),
                             {"key": key}).fetchone()
            if row is not None:
                return _incident(row), False
            now = time.time()
            new_id = self.db.insert(db, "INSERT INTO incidents(key, host, state, opened_at, title, timeline) "
                                    "VALUES (:key, :host, 'open', :now, :title, :timeline)",
                                    {"key": key, "host": host, "now": now, "title": self.db.redactor.text(title),
                                     "timeline": json.dumps([{"at": now, **self.db.redactor.obj(event)}])})
            row = db.execute(sql(_INCIDENT_SELECT + " WHERE id = :id"), {"id": new_id}).fetchone()
            return _incident(row), True

    def add_alerts(self, incident_id: int, active: dict[str, dict[str, Any]], alerts: list[dict[str, Any]],
                   source: str) -> tuple[Incident | None, list[dict[str, Any]]]:
        """In one transaction: `active` (fingerprint -> what fires) joins the incident's active alerts, and the
        `alerts` whose kind its timeline has not seen come back, added to it as one event. Two replicas given
        the same alert note it once."""
        with self.db.transaction() as db:
            row = db.execute(sql(_INCIDENT_SELECT + " WHERE id = :id"), {"id": incident_id}).fetchone()
            if row is None:
                return None, []
            inc = _incident(row)
            seen = {a.get("kind") for e in inc.timeline for a in e.get("alerts", [])}
            fresh = [a for a in alerts if a.get("kind") not in seen]
            for fp, what in active.items():
                inc.active.setdefault(fp, self.db.redactor.obj(what))
            if fresh:
                inc.timeline.append({"at": time.time(), **self.db.redactor.obj(
                    {"event": "alert", "source": source, "alerts": fresh})})
            db.execute(sql("UPDATE incidents SET timeline = :timeline, active = :active WHERE id = :id"),
                       {"timeline": json.dumps(inc.timeline), "active": json.dumps(inc.active), "id": incident_id})
            return inc, fresh

    def get(self, incident_id: int) -> Incident | None:
        with self.db.transaction() as db:
            row = db.execute(sql(_INCIDENT_SELECT + " WHERE id = :id"), {"id": incident_id}).fetchone()
        return _incident(row) if row else None

    def unresolved(self, host: str | None = None) -> list[Incident]:
        with self.db.transaction() as db:
            if host is None:
                rows = db.execute(sql(_INCIDENT_SELECT + " WHERE state != 'resolved' ORDER BY id")).fetchall()
            else:
                rows = db.execute(sql(_INCIDENT_SELECT + " WHERE state != 'resolved' AND host = :host ORDER BY id"),
                                  {"host": host}).fetchall()
        return [_incident(r) for r in rows]

    def recent(self, limit: int = 50) -> list[Incident]:
        with self.db.transaction() as db:
            rows = db.execute(sql(_INCIDENT_SELECT + " ORDER BY id DESC LIMIT :limit"), {"limit": limit}).fetchall()
        return [_incident(r) for r in rows]

    def update(self, incident_id: int, *, state: IncidentState | None = None, channel: str | None = None,
               ts: str | None = None, event: dict[str, Any] | None = None,
               active: dict[str, dict[str, Any]] | None = None) -> Incident | None:
        with self.db.transaction() as db:
            row = db.execute(sql(_INCIDENT_SELECT + " WHERE id = :id"), {"id": incident_id}).fetchone()
            if row is None:
                return None
            inc = _incident(row)
            if event is not None:
                inc.timeline.append({"at": time.time(), **self.db.redactor.obj(event)})
            if state is not None:
                inc.state = state
                if state == "resolved":
                    inc.resolved_at = time.time()
            inc.channel = channel or inc.channel
            inc.ts = ts or inc.ts
            if active is not None:
                inc.active = self.db.redactor.obj(active)
            db.execute(sql("UPDATE incidents SET state = :state, resolved_at = :resolved, channel = :channel, "
                           "ts = :ts, timeline = :timeline, active = :active WHERE id = :id"),
                       {"state": inc.state, "resolved": inc.resolved_at, "channel": inc.channel, "ts": inc.ts,
                        "timeline": json.dumps(inc.timeline), "active": json.dumps(inc.active), "id": incident_id})
            return inc

    def read_open_count(self) -> int:
        """How many incidents are not resolved, read without waiting for the write lock."""
        with self.db.reader() as db:
            return int(db.execute(sql("SELECT COUNT(*) FROM incidents WHERE state != 'resolved'")).scalar_one())


_INCIDENT_SELECT = ("SELECT id, key, host, state, opened_at, resolved_at, channel, ts, title, timeline, active "
                    "FROM incidents")


def _incident(row: Any) -> Incident:
    return Incident(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], json.loads(row[9]),
                    json.loads(row[10] or "{}"))
