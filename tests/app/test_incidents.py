"""Incidents stay open while their problem does: alerts tracked by fingerprint, only health resolves."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from bot.app.watching.incidents import IncidentManager
from bot.app.watching.watch import health_streak
from bot.config import Config, HostConfig, Profile, Settings
from bot.core.alerts import Alert
from bot.core.results.records import Incident
from bot.redact import Redactor
from bot.store.facade import Store


class Recorder:
    def __init__(self) -> None:
        self.said: list[tuple[str, int, str]] = []

    def incident_opened(self, inc: Incident, alerts: list[Alert]) -> tuple[str, str] | None:
        self.said.append(("opened", inc.id, inc.title))
        return None

    def incident_note(self, inc: Incident, text: str, report: Any = None) -> None:
        self.said.append(("note", inc.id, text))

    def incident_closed(self, inc: Incident, text: str) -> None:
        self.said.append(("closed", inc.id, text))

    def health_report(self, host: str, report: Any, chart_png: bytes | None) -> None:
        return None


def config(tmp_path: Path) -> Config:
    return Config(hosts={"h1": HostConfig(address="127.0.0.1", user="u", known_hosts=tmp_path / "kh")},
                  profiles={"dflash": Profile(model="/m", method="dflash", drafter="/d", num_speculative_tokens=15)},
                  settings=Settings(state=tmp_path / "s.db"))


def manager(tmp_path: Path, diagnose: Any = None) -> tuple[IncidentManager, Recorder]:
    rec = Recorder()
    cfg = config(tmp_path)
    return IncidentManager(cfg, Store(cfg.settings.state, Redactor()), rec, diagnose), rec


def am(name: str) -> Alert:
    return Alert(f"prometheus:{name}", f"{name} on h1", "…")


IDLE = {"up": True, "profile": "dflash", "alerts": []}  # no traffic: no acceptance measured
HEALTHY = {"up": True, "profile": "dflash", "alerts": [], "mean": 4.2}
SICK = {"up": True, "profile": "dflash", "alerts": ["acceptance"], "mean": 1.2}


def test_idle_samples_neither_resolve_nor_break_a_streak(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    assert health_streak(cfg, [SICK, IDLE, IDLE, IDLE, IDLE]) == 0
    assert health_streak(cfg, [SICK, HEALTHY, IDLE, HEALTHY, IDLE, HEALTHY]) == 3
    assert health_streak(cfg, [HEALTHY, {"up": False, "profile": "dflash"}]) == 0


def test_an_alertmanager_incident_is_not_resolved_by_the_watch(tmp_path: Path) -> None:
    mgr, _ = manager(tmp_path)
    inc = mgr.on_alerts("h1", "h1", [am("SpecDecodeNothingAccepted")], source="alertmanager", fingerprints=["am:1"])
    assert mgr.on_healthy("h1", 10) is None
    assert mgr.get(inc.id).state == "open"  # type: ignore[union-attr]
    assert mgr.on_resolved("h1", ["am:1"], "alertmanager") is not None
    assert mgr.get(inc.id).state == "resolved"  # type: ignore[union-attr]


def test_a_partial_resolve_keeps_the_incident_and_its_repeat_does_not_page_again(tmp_path: Path) -> None:
    mgr, rec = manager(tmp_path)
    first = mgr.on_alerts("h1", "h1", [am("A"), am("B")], source="alertmanager", fingerprints=["am:a", "am:b"])
    assert mgr.on_resolved("h1", ["am:a"], "alertmanager") is None
    again = mgr.on_alerts("h1", "h1", [am("B")], source="alertmanager", fingerprints=["am:b"])  # a repeat
    assert again.id == first.id and again.state == "open"
    assert [s for s in rec.said if s[0] == "opened"] == [("opened", first.id, "A on h1")]
    assert any("Still firing: B on h1" in s[2] for s in rec.said if s[0] == "note")
    assert mgr.on_resolved("h1", ["am:b"], "alertmanager") is not None


def test_the_watch_resolves_its_own_alerts_after_health_is_shown(tmp_path: Path) -> None:
    mgr, _ = manager(tmp_path)
    inc = mgr.on_alerts("h1", "h1", [Alert("acceptance", "acceptance collapsed", "…")])
    assert mgr.on_healthy("h1", 2) is None  # resolve_after is 3
    assert mgr.on_healthy("h1", 3) is not None
    assert mgr.get(inc.id).state == "resolved"  # type: ignore[union-attr]


def test_resolve_acts_on_the_incident_it_was_pressed_on(tmp_path: Path) -> None:
    mgr, _ = manager(tmp_path)
    old = mgr.on_alerts("h1", "h1", [am("A")], source="alertmanager", fingerprints=["am:a"])
    mgr.resolve_incident(old.id, "by a person", "slack:U1")
    new = mgr.on_alerts("h1", "h1", [am("B")], source="alertmanager", fingerprints=["am:b"])
    assert new.id != old.id
    assert mgr.resolve_incident(old.id, "pressed again on the old message", "slack:U1") is None
    assert mgr.get(new.id).state == "open"  # type: ignore[union-attr]


def test_the_diagnosis_runs_beside_the_caller_one_per_host(tmp_path: Path) -> None:
    release = threading.Event()
    calls: list[str] = []

    def slow(host: str) -> Any:
        calls.append(host)
        release.wait(10)  # an unreachable host: SSH times out much later
        raise OSError("unreachable")

    mgr, rec = manager(tmp_path, slow)
    t0 = time.monotonic()
    mgr.on_alerts("h1", "h1", [am("A")], source="alertmanager", fingerprints=["am:a"])
    mgr.on_alerts("other", "h1", [am("B")], source="alertmanager", fingerprints=["am:b"])  # same host
    assert time.monotonic() - t0 < 1.0
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls == ["h1"]  # the second one did not start a second diagnosis of the same host
    release.set()
    deadline = time.monotonic() + 5
    while not any("could not run" in s[2] for s in rec.said) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert any("could not run" in s[2] for s in rec.said)
    mgr.close()
