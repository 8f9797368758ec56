"""`specops serve` at boot, as systemd starts it: Slack unreachable is retried with backoff, then exit 69 (the unit
restarts it); Slack coming back mid-retry brings the bot up; a token Slack refuses is exit 78 at once (the unit
stops there); a port in use says so (75)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.sim.host import SimHost
from tests.support.served import ROOT, bot_config, wait_for
from tests.support.slack_emulator import SlackEmulator, WebSocketServer
from tests.support.sshd import free_port


@pytest.fixture
def cfg_path(tmp_path: Path) -> Iterator[Path]:
    with SimHost() as sim:  # any valid config: a simulated host's (its keys exist while it runs)
        path = tmp_path / "specops.yaml"
        path.write_text(bot_config(sim.config()).model_dump_json())
        yield path


def _serve(tmp: Path, cfg: Path, slack_port: int, *args: str, budget: float = 60,
           **env_extra: str) -> tuple[subprocess.Popen[str], Path]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith("SPECOPS_")}
    env.update(SLACK_BOT_TOKEN="xoxb-start-test-123456", SLACK_SIGNING_SECRET="start-secret-abcdef",
               SPECOPS_SLACK_API_URL=f"http://127.0.0.1:{slack_port}/api/", HOME=str(tmp),
               SPECOPS_START_TIMEOUT=str(budget), **env_extra)
    log = tmp / f"serve-{time.monotonic_ns()}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "bot", "--config", str(cfg), "serve", *args], cwd=ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return proc, log


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # the session this test started
        try:
            proc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _attempts(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if "auth.test:" in line and "attempt" in line]


def _last_line(log: Path) -> str:
    return log.read_text().strip().splitlines()[-1]


def test_slack_unreachable_is_retried_then_exit_69(tmp_path: Path, cfg_path: Path) -> None:
    refused = free_port()  # nothing listens there: connection refused
    started = time.monotonic()
    proc, log = _serve(tmp_path, cfg_path, refused, "--http", "--port", str(free_port()), budget=4)
    try:
        assert proc.wait(timeout=60) == 69, log.read_text()
    finally:
        _stop(proc)
    took = time.monotonic() - started
    attempts = _attempts(log)
    assert len(attempts) >= 3, log.read_text()  # 1 s, 2 s, then the budget's rest
    assert "Connection refused" in attempts[0] and "attempt 1, next in 1 s" in attempts[0]
    assert 4 <= took < 30
    last = _last_line(log)
    assert last.startswith("specops: error: Slack unavailable: auth.test failed") and "cannot listen" not in last
    text = log.read_text()
    assert "Traceback" not in text and "xoxb-start-test" not in text


def test_slack_back_mid_retry_brings_serve_up(tmp_path: Path, cfg_path: Path) -> None:
    slack_port, http_port = free_port(), free_port()
    proc, log = _serve(tmp_path, cfg_path, slack_port, "--http", "--port", str(http_port), budget=120)
    emu = SlackEmulator()
    try:
        wait_for("two failed attempts", lambda: len(_attempts(log)) >= 2 or proc.poll() is not None, 30)
        assert proc.poll() is None, log.read_text()
        emu.start(port=slack_port)  # the network is back

        def healthy() -> bool:
            assert proc.poll() is None, log.read_text()
            try:
                return httpx.get(f"http://127.0.0.1:{http_port}/healthz", timeout=2, trust_env=False).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for("/healthz after Slack came back", healthy, 60)
        assert emu.calls_to("auth.test")
        assert "Slack answered on attempt" in log.read_text()
    finally:
        _stop(proc)
        emu.stop()
    assert proc.returncode == 0, log.read_text()  # SIGTERM: a clean stop


@pytest.mark.parametrize("mode", ["http", "socket"])
def test_a_refused_token_is_exit_78_at_once(tmp_path: Path, cfg_path: Path, mode: str) -> None:
    emu = SlackEmulator().start()
    if mode == "http":
        emu.respond("auth.test", {"ok": False, "error": "invalid_auth"})
        args, extra, hint = ["--http", "--port", str(free_port())], {}, "SLACK_BOT_TOKEN"
    else:  # the bot token is fine; the app token is not
        emu.respond("apps.connections.open", {"ok": False, "error": "invalid_auth"})
        args, extra, hint = ["--port", str(free_port())], {"SLACK_APP_TOKEN": "xapp-1-start-test-123456"}, \
            "SLACK_APP_TOKEN"
    try:
        proc, log = _serve(tmp_path, cfg_path, emu.port, *args, budget=300, **extra)
        try:
            assert proc.wait(timeout=60) == 78, log.read_text()
        finally:
            _stop(proc)
    finally:
        emu.stop()
    last = _last_line(log)
    assert "Slack refused" in last and "invalid_auth" in last and hint in last, last
    assert not _attempts(log)  # no retry


def test_a_port_in_use_says_so(tmp_path: Path, cfg_path: Path) -> None:
    emu = SlackEmulator().start()
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        proc, log = _serve(tmp_path, cfg_path, emu.port, "--http", "--port", str(port))
        try:
            assert proc.wait(timeout=60) == 75, log.read_text()
        finally:
            _stop(proc)
    finally:
        holder.close()
        emu.stop()
    assert _last_line(log) == (f"specops: error: cannot listen on 127.0.0.1:{port}: the address is already in use "
                               "(another `specops serve`?)")


def test_a_bad_config_is_exit_78(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: {}\n")
    proc, log = _serve(tmp_path, bad, free_port(), "--http", "--port", str(free_port()))
    try:
        assert proc.wait(timeout=60) == 78, log.read_text()
    finally:
        _stop(proc)
    assert "the config has problems" in log.read_text()


def _socket_attempts(log: Path) -> list[str]:
    lines = log.read_text().splitlines()
    return [line for line in lines if "the Socket Mode connection:" in line and "attempt" in line]


def test_a_websocket_that_does_not_open_is_retried_then_exit_69(tmp_path: Path, cfg_path: Path) -> None:
    """Slack's Web API answers but its WebSocket cannot be reached: slack_sdk logs that and returns, so `serve`
    said "connected" and ran on unconnected (/healthz 503, never restarted). It is a failed attempt."""
    emu = SlackEmulator().start()
    emu.wss_url = f"ws://127.0.0.1:{free_port()}/link/?ticket=test"  # nothing listens there
    try:
        proc, log = _serve(tmp_path, cfg_path, emu.port, "--port", str(free_port()), budget=4,
                           SLACK_APP_TOKEN="xapp-1-start-test-123456")
        try:
            assert proc.wait(timeout=60) == 69, log.read_text()
        finally:
            _stop(proc)
    finally:
        emu.stop()
    text = log.read_text()
    assert "Socket Mode: connected" not in text, text
    attempts = _socket_attempts(log)
    assert attempts and "the WebSocket did not open: Connection refused" in attempts[0], text
    assert _last_line(log).startswith("specops: error: Slack unavailable: the Socket Mode connection failed")
    assert "Traceback" not in text and "xapp-1-start-test" not in text


def test_a_websocket_back_mid_retry_connects(tmp_path: Path, cfg_path: Path) -> None:
    emu = SlackEmulator().start()
    emu.wss_url = f"ws://127.0.0.1:{free_port()}/link/?ticket=test"
    ws = WebSocketServer().start()
    try:
        proc, log = _serve(tmp_path, cfg_path, emu.port, "--port", str(free_port()), budget=120,
                           SLACK_APP_TOKEN="xapp-1-start-test-123456")
        try:
            wait_for("a failed WebSocket attempt", lambda: _socket_attempts(log) or proc.poll() is not None, 30)
            assert proc.poll() is None, log.read_text()
            emu.wss_url = ws.url  # the next attempt's apps.connections.open names a WebSocket that opens
            wait_for("connected", lambda: "Socket Mode: connected" in log.read_text() or proc.poll() is not None, 60)
            assert proc.poll() is None, log.read_text()
            ws.wait_connected(timeout=10)
        finally:
            _stop(proc)
    finally:
        ws.stop()
        emu.stop()
    assert proc.returncode == 0, log.read_text()


def test_a_slack_close_that_never_returns_does_not_hold_the_shutdown(monkeypatch: pytest.MonkeyPatch,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """slack_sdk's close joins its threads with no timeout: a session runner stuck on its WebSocket held the whole
    stop until the 40 s watchdog ended the process as a hang. The Slack side gets its own few seconds."""
    import threading

    from bot.adapters.slack import run

    monkeypatch.setattr(run, "SLACK_CLOSE_WAIT", 0.05)
    stuck = threading.Event()  # never set: a close that never returns
    with caplog.at_level("WARNING", logger="specops"):
        run._close_slack(lambda: stuck.wait())
    stuck.set()  # the thread the close left behind ends here, not with the test process
    assert "did not close within" in caplog.text
    done: list[bool] = []
    run._close_slack(lambda: done.append(True))  # a close that returns: no warning, it ran
    assert done == [True]
