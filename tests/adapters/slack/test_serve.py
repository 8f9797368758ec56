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

from bot.redact import Redactor
from bot.sim.host import SimHost
from tests.support.served import ROOT, Served, bot_config, wait_for
from tests.support.slack_emulator import SlackEmulator
from tests.support.sshd import free_port


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


def test_serve_builds_one_store_one_redactor_one_scheduler(tmp_path: Path) -> None:
    """The bot, the scheduler's jobs and the incident notifier share one object graph and redact alike."""
    from bot.adapters import scheduler
    from bot.adapters.slack.run import assemble
    from bot.adapters.slack.settings import SlackSecrets
    from bot.app.watching.incidents import Incident
    from bot.config import Config, HostConfig, Profile, Settings, SlackSettings

    emu = SlackEmulator().start()
    cfg = Config(hosts={"h1": HostConfig(address="127.0.0.1", user="u", known_hosts=tmp_path / "kh")},
                 profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3,
                                          env={"HF_TOKEN": "hf_profile_secret_value_123"})},
                 settings=Settings(state=tmp_path / "specops.db"), slack=SlackSettings(channel="C0REPORT"))
    secrets = SlackSecrets(slack_bot_token="xoxb-assembly-test-1", slack_signing_secret="assembly-secret-1",
                           specops_slack_api_url=emu.base_url)
    parts = assemble(cfg, secrets, http=True, schedule=True)
    try:
        svc = parts.services
        assert parts.bot.services is svc and parts.bot.chat.store is svc.store
        assert scheduler.runtime() is svc
        assert parts.bot.sink.redactor is svc.redactor
        assert svc.manager.notifier.bot is parts.bot  # type: ignore[attr-defined]
        assert len(parts.scheduler.jobs()) >= 1
        planted = "token hf_profile_secret_value_123 and xoxb-assembly-test-1"
        inc = Incident(id=1, key="h1", host="h1", state="open", opened_at=0.0, resolved_at=None, channel="C0REPORT",
                       ts="1.1", title="t", timeline=[])
        svc.manager.notifier.incident_note(inc, planted)  # the incident notifier
        parts.bot.sink.post("C0REPORT", planted)  # the bot's own sink
        texts = [m["text"] for m in emu.messages("C0REPORT")]
        assert len(texts) == 2 and texts[0] == texts[1]
        assert "hf_profile_secret_value_123" not in texts[0] and "xoxb-assembly-test-1" not in texts[0]
    finally:
        parts.close()
        emu.stop()


def test_a_bot_killed_mid_deploy_leaves_a_lock_the_next_one_sees_through(sim: SimHost, tmp_path: Path) -> None:
    """SIGKILL of a real `specops serve` in the middle of a deploy; after the restart `stop` works at once."""
    from bot.store.facade import Store

    emu = SlackEmulator().start()
    cfg = bot_config(sim.config(port=free_port()))
    cfg_path = tmp_path / "specops.json"
    cfg_path.write_text(cfg.model_dump_json())
    first = Served(tmp_path, cfg_path, emu)
    try:
        assert first.command("deploy mtp a6000").status_code == 200
        plan = wait_for("the plan", lambda: [m for m in emu.messages() if "plan_confirm" in str(m.get("blocks"))])
        first.confirm(plan[0])
        wait_for("the server to start", lambda: (sim.root / "srv/specops/server.pid").exists())
    finally:
        first.kill()  # mid-deploy: it holds the host's lock
    assert Store(cfg.settings.state, Redactor()).locks.holder("a6000") is not None
    second = Served(tmp_path, cfg_path, emu)
    try:
        emu.reset()
        resp = second.command("stop a6000")
        assert resp.status_code == 200 and "busy" not in resp.text, resp.text
        plan = wait_for("the stop plan", lambda: [m for m in emu.messages() if "plan_confirm" in str(m.get("blocks"))])
        second.confirm(plan[0])
        wait_for("the stop", lambda: [m for m in emu.messages() if "stop a6000: stopped" in m["text"]])
        assert not (sim.root / "srv/specops/server.pid").exists()
    finally:
        second.kill(signal.SIGTERM)
        emu.stop()
