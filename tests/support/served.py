"""`specops serve --http` as a user runs it, for the tests that need a real bot process: started in
its own session, stopped by its PID, spoken to with signed requests; and a deadline-bound wait."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from slack_sdk.signature import SignatureVerifier

from bot.config import Access, Config, SlackSettings
from tests.support.slack_emulator import SlackEmulator
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]
# a PID namespace of its own, as a container has: the same boot, but PIDs the other bots cannot see (root only)
OWN_PIDS = ("unshare", "--pid", "--fork", "--mount-proc")


def own_pids_work() -> bool:
    return subprocess.run([*OWN_PIDS, "true"], capture_output=True, timeout=30).returncode == 0


def wait_for(what: str, cond: Callable[[], Any], timeout: float = 60.0) -> Any:
    """`cond()`'s first truthy value; fails the test after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.1)


def bot_config(cfg: Config, **watch: Any) -> Config:
    """`cfg` as a served bot sees it: the test workspace, UDEPLOY may deploy, no scheduled watches."""
    out = cfg.model_copy(deep=True)
    out.slack = SlackSettings(team_id="T0TEST", channel="C1", deployers=Access(users=["UDEPLOY"]))
    out.watch = out.watch.model_copy(update={"interval": 0, "report_cron": None, **watch})
    return out


class Served:
    """`specops serve --http` as a process (its own session, stopped by its PID) and signed requests to it."""

    secret = "serve-secret-kill-1234"

    def __init__(self, tmp: Path, cfg_path: Path, emu: SlackEmulator, socket_mode: bool = False,
                 wrap: Sequence[str] = ()) -> None:
        """`wrap`: a command the bot runs under, such as tests.support.served.OWN_PIDS (a container's PIDs)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.emu = emu
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env.update(SLACK_BOT_TOKEN="xoxb-serve-kill-123456", SLACK_SIGNING_SECRET=self.secret,
                   SPECOPS_SLACK_API_URL=emu.base_url, HOME=str(tmp))
        self.log = open(tmp / f"serve-{self.port}.log", "w")  # noqa: SIM115 - closed in stop()
        if socket_mode:  # the emulator's apps.connections.open answers with its `wss_url`
            env["SLACK_APP_TOKEN"] = "xapp-1-serve-socket-123456"
        mode = [] if socket_mode else ["--http"]
        self.proc = subprocess.Popen([*wrap, sys.executable, "-m", "bot", "--config", str(cfg_path), "serve", *mode,
                                      "--port", str(self.port)], cwd=ROOT, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, Path(self.log.name).read_text()
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, Path(self.log.name).read_text()
            time.sleep(0.2)

    def signed(self, body: str, ctype: str) -> httpx.Response:
        ts = str(int(time.time()))
        sig = SignatureVerifier(self.secret).generate_signature(timestamp=ts, body=body)
        return httpx.post(f"{self.url}/slack/events", content=body.encode(), timeout=10, trust_env=False,
                          headers={"Content-Type": ctype, "X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig})

    def command(self, text: str, trigger_id: str | None = None) -> httpx.Response:
        return self.signed(urllib.parse.urlencode({"team_id": "T0TEST", "channel_id": "C1", "user_id": "UDEPLOY",
                                                   "command": "/specops", "text": text,
                                                   "trigger_id": trigger_id or f"{time.time_ns()}.{self.port}"}),
                           "application/x-www-form-urlencoded")

    def confirm(self, plan: dict[str, object]) -> None:
        self.press(plan, "plan_confirm")

    def press(self, message: dict[str, object], action_id: str) -> None:
        """UDEPLOY presses the message's button `action_id`, as Slack delivers it."""
        import json

        blocks = message["blocks"]
        assert isinstance(blocks, list)
        value = next(e["value"] for b in blocks if b["type"] == "actions" for e in b["elements"]
                     if e["action_id"] == action_id)
        payload = {"type": "block_actions", "user": {"id": "UDEPLOY", "team_id": "T0TEST"},
                   "team": {"id": "T0TEST"}, "channel": {"id": "C1"}, "trigger_id": f"{time.time_ns()}.press",
                   "container": {"message_ts": message["ts"]}, "message": {"ts": message["ts"]},
                   "actions": [{"action_id": action_id, "value": value, "type": "button"}]}
        resp = self.signed(urllib.parse.urlencode({"payload": json.dumps(payload)}),
                           "application/x-www-form-urlencoded")
        assert resp.status_code == 200, resp.text

    def kill(self, sig: int = signal.SIGKILL) -> None:
        os.killpg(self.proc.pid, sig)  # the session this test started
        self.proc.wait(timeout=45)
        self.log.close()
