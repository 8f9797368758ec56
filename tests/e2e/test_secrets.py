"""Secrets never leave: planted in a profile env, a host log, chat text and an alert annotation, none
reaches Slack, the CLI, the audit or any table of the SQLite store, nor the host's process list."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.adapters import alertmanager
from bot.adapters.slack.bot import SpecopsBot
from bot.config import Config, WatchSettings
from tests.adapters.slack.test_bot import CHANNEL, Harness, harness

ROOT = Path(__file__).resolve().parents[2]
AWS_ID, AWS_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
DB_PASSWORD = "Sup3rS3cretPw"
HF = "hf_abcdefghijklmnopqrstuvwxyz123456"
SLACK = "xoxb-123456789012-abcdefABCDEF"
KEY_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
PLAIN = "plain-value-under-a-plain-name-42"
PLANTED = [AWS_ID, AWS_SECRET, DB_PASSWORD, HF, SLACK, KEY_BODY, PLAIN]
PRIVATE_KEY = f"-----BEGIN PRIVATE KEY-----\n{KEY_BODY}\n-----END PRIVATE KEY-----"
AM_TOKEN = "am-bearer-token-secret-9"


@pytest.fixture
def h(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    monkeypatch.setenv("SPECOPS_ALERTMANAGER_TOKEN", AM_TOKEN)

    def configure(cfg: Config) -> None:
        cfg.profiles["mtp"].env = {"AWS_ACCESS_KEY_ID": AWS_ID, "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
                                   "DATABASE_URL": f"postgres://svc:{DB_PASSWORD}@db:5432/app", "HF_TOKEN": HF,
                                   "MY_SETTING": PLAIN}
        cfg.slack = cfg.slack.model_copy(update={"channel": CHANNEL})
        cfg.watch = WatchSettings(interval=0, oncall_channel=CHANNEL)

    def routes(cfg: Config, bot: SpecopsBot) -> dict[str, Any]:
        return {"/alertmanager": lambda hd, b: alertmanager.receive(cfg, bot.services.manager, AM_TOKEN, hd, b)}

    yield from harness(configure, routes)


def everything_sent(h: Harness) -> str:
    calls = [json.dumps(c.args, default=str) for c in h.emu.calls]
    uploads = [v.decode("utf-8", "replace") for v in h.emu.uploads.values()]
    return "\n".join(calls + uploads)


def everything_stored(h: Harness) -> str:
    db = sqlite3.connect(h.cfg.settings.state)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(json.dumps(db.execute(f"SELECT * FROM {t}").fetchall(), default=str) for t in tables)
    finally:
        db.close()


def test_planted_secrets_reach_no_sink(h: Harness, tmp_path: Path) -> None:
    # a profile env: deploy through Slack, confirmed
    assert h.command("deploy mtp a6000").status_code == 200
    plan = h.wait(lambda: h.posts_with("plan_confirm"), what="the plan")[0]
    value = next(e["value"] for b in plan["blocks"] if b["type"] == "actions" for e in b["elements"]
                 if e["action_id"] == "plan_confirm")
    h.press("plan_confirm", value, "UDEPLOY", plan["ts"])
    h.wait(lambda: [m for m in h.emu.messages() if "deploy mtp a6000: deployed" in m["text"]], timeout=90,
           what="the deploy")
    pid = int((h.sim.root / "srv/specops/server.pid").read_text())
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace")
    assert not [s for s in PLANTED if s in cmdline], "a secret is in the host's process list"
    assert not list((h.sim.root / "srv/specops").glob("*.env")), "the env file outlived the start"
    # a host log with secrets, diagnosed from Slack
    log = h.sim.root / "srv/specops/server.log"
    with open(log, "a") as f:
        f.write(f"ERROR 12-01 10:00:00 [x.py:1] ValueError: could not connect to postgres://svc:{DB_PASSWORD}@db\n"
                f"INFO 12-01 10:00:01 [x.py:2] using {AWS_ID} {AWS_SECRET} and {HF} and {SLACK}\n{PRIVATE_KEY}\n")
    h.command("diagnose a6000")
    h.wait(lambda: [m for m in h.emu.messages() if "diagnose a6000:" in m["text"]], timeout=90, what="the diagnosis")
    # chat text with a key typed into it
    h.command(f"diagnose a6000 {AWS_ID} {HF}")
    # an alert annotation
    alert = {"version": "4", "status": "firing", "alerts": [{"status": "firing", "labels": {
        "alertname": "VllmDown", "specops_host": "a6000"}, "annotations": {
        "summary": f"down; token {SLACK}", "description": f"key {AWS_ID} {AWS_SECRET} url postgres://a:{DB_PASSWORD}@x"}}]}
    resp = h.http.post("/alertmanager", json=alert, headers={"Authorization": f"Bearer {AM_TOKEN}"})
    assert resp.status_code == 200, resp.text
    h.wait(lambda: h.posts_with("Incident #"), what="the incident")
    # a failed step's output: a drafter config.json holding secrets, and missing what DFlash needs
    drafter_cfg = h.sim.root / "models" / "Qwen3.6-27B-DFlash" / "config.json"
    drafter_cfg.write_text(json.dumps({"architectures": ["DFlashDraftModel"], "token": HF, "aws": [AWS_ID, AWS_SECRET],
                                       "dsn": f"postgres://svc:{DB_PASSWORD}@db/x", "slack": SLACK,
                                       "dflash_config": {"target_layer_ids": [1, 2]}}))
    h.command("deploy dflash-0.20.1 a6000 --force")  # past its checks before launch: the pre-flight step fails
    plan = h.wait(lambda: [m for m in h.posts_with("plan_confirm") if "dflash-0.20.1" in m["text"]],
                  what="the second plan")[0]
    value = next(e["value"] for b in plan["blocks"] if b["type"] == "actions" for e in b["elements"]
                 if e["action_id"] == "plan_confirm")
    h.press("plan_confirm", value, "UDEPLOY", plan["ts"])
    h.wait(lambda: [m for m in h.emu.messages() if "deploy dflash-0.20.1 a6000 --force: failed" in m["text"]],
           timeout=90, what="the failed deploy")
    h.wait(lambda: "mask_token_id" in everything_sent(h), what="the failed step in the report")
    # the CLI, on the same log
    out = subprocess.run([sys.executable, "-m", "bot", "diagnose", "--log", str(log), "--format", "json"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    printed = out.stdout + out.stderr
    for where, text in (("Slack", everything_sent(h)), ("SQLite", everything_stored(h)), ("the CLI", printed)):
        leaked = [s for s in PLANTED if s in text]
        assert not leaked, f"{leaked} reached {where}"
    assert AM_TOKEN not in everything_sent(h) + everything_stored(h)
    # and they did travel: masked, not dropped
    assert "(redacted)" in everything_sent(h) and "(redacted)" in everything_stored(h) and "(redacted)" in printed
