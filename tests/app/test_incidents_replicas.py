"""Two replicas, one store: the same new alert reaching both (Alertmanager's HA pair sends each of its webhooks,
a retry lands on the other replica) is noted in the incident's thread once. Real parts: both engines of the
store (SQLite's file, the session's PostgreSQL), two managers with a store each, as two processes have."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from bot.app.watching.incidents import IncidentManager
from bot.core.results.records import Incident
from bot.redact import Redactor
from bot.store.facade import Store
from bot.store.incidents import Incidents
from tests.app.test_incidents import Recorder, am, config
from tests.support.store_engines import ENGINES, state_on


class _MeetAfterOpen(Incidents):
    """A store's incidents whose `open` returns only when the other replica's has too: the two read the incident
    at the same moment, the interleaving that noted an alert twice."""

    meet: threading.Barrier

    def open(self, key: str, host: str, title: str, event: dict[str, Any]) -> tuple[Incident, bool]:
        found = super().open(key, host, title, event)
        self.meet.wait(timeout=30)
        return found


@pytest.mark.parametrize("engine", ENGINES)
def test_one_new_alert_on_two_replicas_is_noted_once(engine: str, tmp_path: Path,
                                                     request: pytest.FixtureRequest) -> None:
    state = state_on(engine, tmp_path, request)
    cfg = config(tmp_path)
    first = Store(state, Redactor())
    first_manager = IncidentManager(cfg, first, Recorder())
    first_manager.on_alerts("h1", "h1", [am("Down")], source="alertmanager", fingerprints=["fp-down"])
    meet = threading.Barrier(2)
    replicas: list[tuple[IncidentManager, Recorder]] = []
    for _ in range(2):
        store = Store(state, Redactor())
        store.incidents = meeting = _MeetAfterOpen(store.db)
        meeting.meet = meet
        said = Recorder()
        replicas.append((IncidentManager(cfg, store, said), said))
    try:
        both = [threading.Thread(target=m.on_alerts, args=("h1", "h1", [am("Slow")]),
                                 kwargs={"source": "alertmanager", "fingerprints": ["fp-slow"]}) for m, _ in replicas]
        for t in both:
            t.start()
        for t in both:
            t.join(timeout=60)
        notes = [s for _, said in replicas for s in said.said if s[0] == "note"]
        assert len(notes) == 1 and "Slow on h1" in notes[0][2], notes
        inc = first.incidents.unresolved()[0]
        assert set(inc.active) == {"fp-down", "fp-slow"}
        assert sum(1 for e in inc.timeline if e.get("event") == "alert") == 1, inc.timeline
    finally:
        for m, _ in replicas:
            m.store.close()
            m.close()
        first.close()
        first_manager.close()
