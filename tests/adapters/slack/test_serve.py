"""`specops serve --http --demo` as a user runs it: a subprocess, the emulator as Slack, signed requests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import httpx
from slack_sdk.signature import SignatureVerifier

from tests.support.slack_emulator import SlackEmulator
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[3]


def test_serve_demo_tells_the_story_at_once(tmp_path: Path) -> None:
    emu = SlackEmulator().start()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(SLACK_BOT_TOKEN="xoxb-serve-test-123456", SLACK_SIGNING_SECRET="serve-secret-abcdef",
               SPECOPS_SLACK_API_URL=emu.base_url, HOME=str(tmp_path))
    env.pop("SPECOPS_CONFIG", None)
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen([sys.executable, "-m", "bot", "serve", "--http", "--port", str(port), "--demo"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.2)
        body = urllib.parse.urlencode({"team_id": "T0TEST", "channel_id": "C1", "user_id": "U1",
                                       "command": "/specops", "text": "diagnose a6000",
                                       "response_url": emu.root_url + "r", "trigger_id": "t"})
        ts = str(int(time.time()))
        sig = SignatureVerifier("serve-secret-abcdef").generate_signature(timestamp=ts, body=body)
        resp = httpx.post(f"http://127.0.0.1:{port}/slack/events", content=body.encode(), timeout=5,
                          headers={"Content-Type": "application/x-www-form-urlencoded",
                                   "X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig})
        assert resp.status_code == 200 and "Working on" in resp.text
        deadline = time.monotonic() + 60
        while not any("40727" in str(m.get("blocks")) for m in emu.messages()):
            assert time.monotonic() < deadline, [m["text"] for m in emu.messages()]
            time.sleep(0.2)
        assert any("40898" in str(m.get("blocks")) for m in emu.messages())
        assert "xoxb-serve-test" not in (tmp_path / "serve.log").read_text()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the session we started
        try:
            proc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        emu.stop()
