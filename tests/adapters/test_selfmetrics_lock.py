"""/metrics and /healthz answer while another process holds the state database's write lock (issue 21, item 7).

Real parts: the bot's HTTP server, a real SQLite file, and a child process that holds the lock.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from slack_bolt import App

from bot.adapters.selfmetrics import BotHealth
from bot.adapters.slack.http_server import SlackHTTPServer
from bot.redact import Redactor
from bot.store.facade import Store

# the child takes the write lock and keeps it until its stdin closes (no sleep: the test decides when)
_HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
db.execute("INSERT INTO samples(host, at, up, data) VALUES ('held', 1.0, 1, '{}')")
print("locked", flush=True)
sys.stdin.read()
db.execute("ROLLBACK")
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Store, httpx.Client]]:
    store = Store(tmp_path / "state.db", Redactor())
    store.samples.add("a6000", True, {}, at=1_700_000_000.0)
    store.incidents.open("k1", "a6000", "server down", {"kind": "opened"})
    health = BotHealth(store, lambda: 0)
    app = App(token="xoxb-metrics-test", signing_secret="metrics-test-secret", token_verification_enabled=False)
    server = SlackHTTPServer(app, "127.0.0.1", 0,
                             get_routes={"/healthz": health.healthz, "/metrics": health.metrics}).start()
    # a hung scrape fails the test in 5 s, not in the store's 10 s busy timeout times each read
    client = httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=5.0, trust_env=False)
    try:
        yield store, client
    finally:
        client.close()
        server.stop()
        health.close()
        store.close()


def _hold_lock(path: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "locked"
    return child


def _release(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None
    child.stdin.close()
    child.wait(timeout=10)


def test_metrics_answers_before_the_busy_timeout_while_another_process_holds_the_write_lock(
        served: tuple[Store, httpx.Client]) -> None:
    store, client = served
    before = client.get("/metrics")
    assert before.status_code == 200
    assert "specops_incidents_open 1.0" in before.text
    assert "specops_store_readable 1.0" in before.text
    child = _hold_lock(store.path)
    try:
        t0 = time.monotonic()
        resp = client.get("/metrics")
        took = time.monotonic() - t0
        assert resp.status_code == 200
        assert took < 4.0, f"/metrics took {took:.2f} s under a held write lock"  # blocked: the 10 s busy timeout
        # WAL readers are not blocked by a writer: the values are the committed ones
        assert "specops_incidents_open 1.0" in resp.text
        assert 'specops_last_up_watch_timestamp_seconds{host="a6000"} 1.7e+09' in resp.text
        t0 = time.monotonic()
        hz = client.get("/healthz")
        took = time.monotonic() - t0
        assert hz.status_code == 503, hz.text
        assert took < 4.0, f"/healthz took {took:.2f} s"
    finally:
        _release(child)
    assert client.get("/healthz").status_code == 200


def test_metrics_keeps_the_last_values_when_the_database_cannot_be_read(
        served: tuple[Store, httpx.Client]) -> None:
    store, client = served
    assert "specops_incidents_open 1.0" in client.get("/metrics").text
    store.path.unlink()  # unreadable now: the scrape still answers, with what it last read
    for suffix in ("-wal", "-shm"):
        Path(f"{store.path}{suffix}").unlink(missing_ok=True)
    t0 = time.monotonic()
    resp = client.get("/metrics")
    assert time.monotonic() - t0 < 1.0
    assert resp.status_code == 200
    assert "specops_store_readable 0.0" in resp.text
    assert "specops_incidents_open 1.0" in resp.text
