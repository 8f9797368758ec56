"""The bot's own health: `/healthz` checks the store, the scheduler and Slack; `/metrics` is scraped
by a real Prometheus (Debian's package) from a real `specops serve` on 127.0.0.1."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.sim.host import SimHost
from tests.support.served import Served, bot_config, wait_for
from tests.support.slack_emulator import SlackEmulator
from tests.support.sshd import free_port

PROMETHEUS = shutil.which("prometheus")


@pytest.fixture
def served(sim: SimHost, tmp_path: Path) -> Iterator[tuple[Served, Path]]:
    emu = SlackEmulator().start()
    cfg = bot_config(sim.config(port=free_port()))
    path = tmp_path / "specops.json"
    path.write_text(cfg.model_dump_json())
    bot = Served(tmp_path, path, emu)
    try:
        yield bot, Path(cfg.settings.state)
    finally:
        bot.kill(15)
        emu.stop()


def test_healthz_checks_store_scheduler_and_slack_and_is_503_when_the_store_cannot_be_written(
        served: tuple[Served, Path]) -> None:
    bot, state = served
    ok = httpx.get(f"{bot.url}/healthz", timeout=5, trust_env=False)
    assert ok.status_code == 200
    assert ok.json()["checks"] == {"store": "ok", "scheduler": "ok", "leader": "ok", "slack": "ok"}
    # another process holds the database's write lock: the bot cannot record anything now
    blocker = sqlite3.connect(state, timeout=5, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        bad = httpx.get(f"{bot.url}/healthz", timeout=10, trust_env=False)
        assert bad.status_code == 503
        assert "locked" in bad.json()["checks"]["store"]
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert httpx.get(f"{bot.url}/healthz", timeout=5, trust_env=False).status_code == 200


def test_healthz_answers_all_the_while_hostile_pastes_are_diagnosed(served: tuple[Served, Path]) -> None:
    """Issue 36: pastes built to make a matcher backtrack (the EPLB template's line without its second `with
    config`), an escaped secret on every line and a long unbroken value, from a member who may only diagnose:
    each is answered in its thread, and the HTTP front answers every /healthz while they are diagnosed — well under
    what waiting out a diagnosis would take; its latency meanwhile is bench/healthz.py's number."""
    import json
    import time

    bot, _state = served
    eplb = "Model: a with config " + "x " * 400 + "mismatch with new model b"
    lines = [eplb, "ERROR password=" + "y" * 3000, '{"token": "ab\\u002d' + "z" * 2000 + '"}'] * 8
    paste = "\n".join(lines)[:38_000]  # under Slack's 40,000 characters of a message
    sent = []
    for n in range(4):
        ts = f"1700000{n}00.000100"
        event = {"type": "app_mention", "user": "UMEMBER", "text": f"<@U0BOT> diagnose ```{paste}```", "ts": ts,
                 "channel": "C1", "event_ts": ts, "team": "T0TEST"}
        body = json.dumps({"token": "legacy", "team_id": "T0TEST", "api_app_id": "A0TEST", "type": "event_callback",
                           "event_id": f"Ev{n}{time.time_ns()}", "event_time": int(time.time()), "event": event})
        assert bot.signed(body, "application/json").status_code == 200
        sent.append(ts)
    answered: set[str] = set()
    slowest = 0.0
    deadline = time.monotonic() + 120
    while len(answered) < len(sent):
        assert time.monotonic() < deadline, f"answered {sorted(answered)} of {sent}"
        t0 = time.monotonic()
        r = httpx.get(f"{bot.url}/healthz", timeout=5, trust_env=False)
        slowest = max(slowest, time.monotonic() - t0)
        assert r.status_code == 200, r.text
        answered = {ts for ts in sent if bot.emu.thread(ts)}
        time.sleep(0.05)
    # a front blocked by a matcher would wait out a diagnosis (seconds to minutes); its latency is bench/healthz.py's
    assert slowest < 3.0, f"/healthz took {slowest:.2f} s while pastes were diagnosed"
    posted = json.dumps([bot.emu.thread(ts) for ts in sent])
    assert "y" * 40 not in posted and "z" * 40 not in posted  # the values are masked, not quoted


def test_socket_mode_serves_healthz_on_the_port_and_reports_a_lost_socket(sim: SimHost, tmp_path: Path) -> None:
    from tests.support.slack_emulator import WebSocketServer

    emu = SlackEmulator().start()
    ws = WebSocketServer().start()
    emu.wss_url = ws.url
    path = tmp_path / "specops.json"
    path.write_text(bot_config(sim.config(port=free_port())).model_dump_json())
    bot = Served(tmp_path, path, emu, socket_mode=True)  # no --http, no --webhook-port: --port serves health
    try:
        ws.wait_connected(timeout=10)
        envelope = ws.send_envelope({"team_id": "T0TEST", "channel_id": "C1", "user_id": "UDEPLOY",
                                     "command": "/specops", "text": "help", "trigger_id": "t", "api_app_id": "A0"})
        assert "deploy PROFILE" in str(ws.wait_ack(envelope, timeout=10))
        ok = httpx.get(f"{bot.url}/healthz", timeout=5, trust_env=False)
        assert ok.status_code == 200 and ok.json()["checks"]["slack"] == "ok"
        assert "specops_" in httpx.get(f"{bot.url}/metrics", timeout=5, trust_env=False).text
        ws.stop()  # Slack's socket is gone: the bot is up but deaf
        bad = wait_for("/healthz to report the lost socket", lambda: (
            r if (r := httpx.get(f"{bot.url}/healthz", timeout=5, trust_env=False)).status_code == 503 else None))
        assert bad.json()["checks"]["slack"] != "ok"
        # and the journal says so at the default level (issue 38: a lost WebSocket was silent)
        log = Path(bot.log.name)
        wait_for("the lost socket in the log", lambda: "Socket Mode connection closed" in log.read_text())
    finally:
        bot.kill(15)
        ws.stop()
        emu.stop()


def test_metrics_are_scraped_by_a_real_prometheus(served: tuple[Served, Path], tmp_path: Path) -> None:
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (.ci/run installs it)")
    bot, _ = served
    assert bot.command("status a6000").status_code == 200  # one chat job, counted
    text = httpx.get(f"{bot.url}/metrics", timeout=5, trust_env=False).text
    assert "specops_job_queue_depth" in text and "specops_incidents_open" in text
    wait_for("the job's count", lambda: "specops_jobs_total{" in httpx.get(
        f"{bot.url}/metrics", timeout=5, trust_env=False).text)
    port = free_port()
    (tmp_path / "prom.yml").write_text(
        "global: {scrape_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: specops\n    static_configs: [{{targets: ['127.0.0.1:{bot.port}']}}]\n")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prom.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    api = f"http://127.0.0.1:{port}/api/v1/query"

    def value(query: str) -> float | None:
        try:
            data = httpx.get(api, params={"query": query}, timeout=2, trust_env=False).json()
        except (httpx.HTTPError, ValueError):
            return None
        result = data.get("data", {}).get("result", [])
        return float(result[0]["value"][1]) if result else None

    try:
        assert wait_for("Prometheus to scrape the bot", lambda: value('up{job="specops"}') == 1.0)
        assert value("specops_incidents_open") == 0.0
        assert wait_for("the chat job in Prometheus",
                        lambda: value('sum(specops_jobs_total{verb="status"})')) >= 1.0
    finally:
        proc.terminate()  # the process this test started, by its PID
        proc.wait(timeout=30)
