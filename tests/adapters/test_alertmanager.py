"""The Alertmanager receiver against a real Alertmanager (Debian's prometheus-alertmanager) on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from slack_bolt import App

from bot.adapters import alertmanager
from bot.adapters.slack.http_server import SlackHTTPServer
from bot.app.watching.incidents import IncidentManager
from bot.config import Config, HostConfig, Profile, Settings
from bot.redact import Redactor
from bot.store.facade import Store
from tests.app.test_incidents import Recorder
from tests.support.served import wait_for
from tests.support.sshd import free_port

TOKEN = "am-bearer-token-123456"
BINARY = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


class World:
    def __init__(self, tmp: Path, diagnose: Any = None) -> None:
        self.cfg = Config(hosts={"h1": HostConfig(address="127.0.0.1", user="u", known_hosts=tmp / "kh")},
                          profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3)},
                          settings=Settings(state=tmp / "s.db"))
        self.store = Store(self.cfg.settings.state, Redactor())
        self.said = Recorder()
        self.manager = IncidentManager(self.cfg, self.store, self.said, diagnose)
        self.hits: list[float] = []
        app = App(token="xoxb-am-test", signing_secret="am-test-secret", token_verification_enabled=False)

        def route(headers: dict[str, str], body: bytes) -> Any:
            self.hits.append(time.monotonic())
            return alertmanager.receive(self.cfg, self.manager, TOKEN, headers, body)

        self.server = SlackHTTPServer(app, "127.0.0.1", 0, {"/alertmanager": route}).start()
        self.url = f"http://127.0.0.1:{self.server.port}/alertmanager"

    def close(self) -> None:
        self.server.stop()
        self.manager.close()
        self.store.close()


@pytest.fixture
def am(tmp_path: Path) -> Iterator[tuple[str, World]]:
    if BINARY is None:
        pytest.skip("prometheus-alertmanager is not installed (.ci/run installs it)")
    world = World(tmp_path)
    port = free_port()
    (tmp_path / "am.yml").write_text(json.dumps({
        "route": {"receiver": "specops", "group_by": ["alertname", "host"], "group_wait": "1s",
                  "group_interval": "1s", "repeat_interval": "2s"},
        "receivers": [{"name": "specops", "webhook_configs": [{
            "url": world.url, "send_resolved": True, "http_config": {"authorization": {"credentials": TOKEN}}}]}],
    }))
    proc = subprocess.Popen([BINARY, f"--config.file={tmp_path / 'am.yml'}", f"--storage.path={tmp_path / 'am'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "am.log", "w"),  # noqa: SIM115
                            start_new_session=True)
    api = f"http://127.0.0.1:{port}/api/v2"
    try:
        wait_for("Alertmanager to answer", lambda: _ready(api))
        yield api, world
    finally:
        proc.terminate()  # by the PID this fixture started
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        world.close()


def _ready(api: str) -> bool:
    try:
        return httpx.get(f"{api}/status", timeout=1, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def post(api: str, name: str, *, resolved: bool = False) -> None:
    now = datetime.now(UTC)
    alert: dict[str, Any] = {"labels": {"alertname": name, "host": "h1"}, "annotations": {"summary": f"{name} on h1"},
                             "startsAt": (now - timedelta(minutes=1)).isoformat()}
    if resolved:
        alert["endsAt"] = (now - timedelta(seconds=1)).isoformat()
    assert httpx.post(f"{api}/alerts", json=[alert], timeout=5, trust_env=False).status_code == 200


def test_fire_repeat_partial_resolve_resolve(am: tuple[str, World]) -> None:
    api, world = am
    post(api, "SpecDecodeNothingAccepted")
    post(api, "VllmDown")
    inc = wait_for("the incident", lambda: world.store.incidents.unresolved("h1"))[0]
    wait_for("both alerts in the incident", lambda: len(world.store.incidents.get(inc.id).active) == 2)  # type: ignore[union-attr]
    hits = len(world.hits)
    wait_for("Alertmanager to repeat", lambda: len(world.hits) >= hits + 2, timeout=20)
    assert [i.id for i in world.store.incidents.unresolved("h1")] == [inc.id]  # repeats join it, no new page
    assert sum(1 for s in world.said.said if s[0] == "opened") == 1
    post(api, "VllmDown", resolved=True)
    wait_for("the partial resolve", lambda: any("Still firing" in s[2] for s in world.said.said))
    assert world.store.incidents.get(inc.id).state == "open"  # type: ignore[union-attr]
    post(api, "SpecDecodeNothingAccepted", resolved=True)
    wait_for("the last resolve", lambda: world.store.incidents.get(inc.id).state == "resolved")  # type: ignore[union-attr]


def test_an_alert_about_an_unreachable_host_is_answered_at_once(tmp_path: Path) -> None:
    release = threading.Event()
    world = World(tmp_path, diagnose=lambda host: release.wait(15) or (_ for _ in ()).throw(OSError("timed out")))
    body = {"version": "4", "status": "firing", "alerts": [
        {"status": "firing", "labels": {"alertname": "VllmDown", "host": "h1"}, "annotations": {}}]}
    try:
        with httpx.Client(trust_env=False, timeout=10) as http:
            for i in range(3):  # and unrelated requests do not queue behind it
                t0 = time.monotonic()
                body["alerts"][0]["labels"]["alertname"] = f"VllmDown{i}"
                resp = http.post(world.url, json=body, headers={"Authorization": f"Bearer {TOKEN}"})
                assert resp.status_code == 200 and time.monotonic() - t0 < 1.0
    finally:
        release.set()
        world.close()
