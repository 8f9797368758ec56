"""The whole secret corpus (tests/support/secret_corpus.py) in a server log, in chat text and in an alert
annotation, through the real paths: none of it reaches Slack's Web API, the CLI (text, json, md), a file written,
the logs, the audit, any row of any table of the state database, or `/metrics`."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.adapters import alertmanager
from bot.adapters.selfmetrics import BotHealth
from bot.adapters.slack.bot import SpecopsBot
from bot.config import Config, WatchSettings
from bot.redact import install_log_redaction
from tests.adapters.slack.test_bot import CHANNEL, Harness, harness
from tests.support.secret_corpus import SHAPES

ROOT = Path(__file__).resolve().parents[2]
AM_TOKEN = "am-bearer-token-secret-corpus-9"
SECRETS = sorted({s for shape in SHAPES for s in shape.secrets}, key=len)


def log_with_the_corpus() -> str:
    lines = ["INFO 12-01 10:00:00 [api_server.py:1] vLLM API server version 0.20.1"]
    for n, shape in enumerate(SHAPES):
        for part in shape.line.splitlines() or [""]:
            lines.append(f"ERROR 12-01 10:00:{n % 60:02d} [x.py:{n}] {part}")
        if "\n" in shape.line:  # a key block, as a traceback would print it: the lines on their own
            lines.append(shape.line)
    return "\n".join(lines) + "\n"


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


@pytest.fixture
def h(monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    monkeypatch.setenv("SPECOPS_ALERTMANAGER_TOKEN", AM_TOKEN)

    def configure(cfg: Config) -> None:
        cfg.slack = cfg.slack.model_copy(update={"channel": CHANNEL})
        cfg.watch = WatchSettings(interval=0, oncall_channel=CHANNEL)

    def routes(cfg: Config, bot: SpecopsBot) -> dict[str, Any]:
        return {"/alertmanager": lambda hd, b: alertmanager.receive(cfg, bot.services.manager, AM_TOKEN, hd, b)}

    for hd in harness(configure, routes):
        health = BotHealth(hd.bot.services.store, lambda: 0)  # what `serve` mounts at GET /metrics
        hd.server.get_routes["/metrics"] = health.metrics
        try:
            yield hd
        finally:
            health.close()


def everything_sent(h: Harness) -> str:
    calls = [json.dumps(c.args, default=str) for c in h.emu.calls]
    uploads = [v.decode("utf-8", "replace") for v in h.emu.uploads.values()]
    return "\n".join(calls + uploads)


def every_row(db_path: Path) -> str:
    db = sqlite3.connect(db_path)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert tables, "no tables: the state database moved"
        return "\n".join(f"{t}: " + json.dumps(db.execute(f'SELECT * FROM "{t}"').fetchall(), default=str)
                         for t in tables)
    finally:
        db.close()


def cli(*args: str, cwd: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "bot", *args], capture_output=True, text=True, timeout=120,
                         cwd=cwd)
    assert out.returncode in (0, 1), out.stderr[-2000:]
    return out.stdout + out.stderr


def test_the_corpus_reaches_no_sink(h: Harness, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    install_log_redaction(h.bot.services.redactor)  # what `serve` does at start; caplog's handler gets it too
    # a deployment to diagnose: deployed through Slack, confirmed
    assert h.command("deploy mtp a6000").status_code == 200
    plan = h.wait(lambda: h.posts_with("plan_confirm"), what="the plan")[0]
    value = next(e["value"] for b in plan["blocks"] if b["type"] == "actions" for e in b["elements"]
                 if e["action_id"] == "plan_confirm")
    h.press("plan_confirm", value, "UDEPLOY", plan["ts"])
    h.wait(lambda: [m for m in h.emu.messages() if "deploy mtp a6000: deployed" in m["text"]], timeout=90,
           what="the deploy")
    log = h.sim.root / "srv/specops/server.log"
    with open(log, "a") as f:
        f.write(log_with_the_corpus())
    # the host's log, diagnosed from Slack
    assert h.command("diagnose a6000").status_code == 200
    h.wait(lambda: [m for m in h.emu.messages() if "diagnose a6000:" in m["text"]], timeout=90,
           what="the diagnosis")
    # secrets typed into chat, a few at a time (a slash command's text is short)
    for shape in SHAPES[::6]:
        h.command(f"diagnose a6000 {shape.line.splitlines()[0]}")
    # an alert whose annotations carry the corpus
    alert = {"version": "4", "status": "firing", "alerts": [{"status": "firing", "labels": {
        "alertname": "VllmDown", "specops_host": "a6000"}, "annotations": {
        "summary": "down; " + SHAPES[5].line, "description": "\n".join(s.line for s in SHAPES)}}]}
    resp = h.http.post("/alertmanager", json=alert, headers={"Authorization": f"Bearer {AM_TOKEN}"})
    assert resp.status_code == 200, resp.text
    h.wait(lambda: h.posts_with("Incident #"), what="the incident")
    # every post settles before the sinks are read: the diagnosis asked in chat and the incident's own (a count
    # of "diagnose a6000" anywhere was met only while the deploy's report advised it: MTP read "not paying off")
    verdicts = ("Healthy", "Degraded", "Failing", "Unknown")
    h.wait(lambda: h.posts_with("Automatic diagnosis") and len(
        [m for m in h.emu.messages() if m["text"].startswith(verdicts)]) >= 2, timeout=90, what="the diagnoses")
    metrics = h.http.get("/metrics").text
    assert "specops_" in metrics
    # the CLI on the same log: every format, and the files it writes
    out_file, chart = tmp_path / "report.md", tmp_path / "chart.png"
    printed = "\n".join([
        cli("diagnose", "--log", str(log), cwd=ROOT),
        cli("diagnose", "--log", str(log), "--format", "json", cwd=ROOT),
        cli("diagnose", "--log", str(log), "--format", "md", "--chart", str(chart), cwd=ROOT),
        cli("diagnose", "--log", str(log), "--format", "slack", cwd=ROOT),
    ])
    out_file.write_text(printed)
    files = "\n".join(p.read_text(errors="replace") for p in tmp_path.rglob("*")
                      if p.is_file() and p.suffix != ".png")
    sinks = {"Slack": everything_sent(h), "the CLI": printed, "files": files, "logs": caplog.text,
             "SQLite": every_row(Path(h.cfg.settings.state)), "/metrics": metrics}
    found = {where: leaks(text) for where, text in sinks.items()}
    assert not any(found.values()), {k: v for k, v in found.items() if v}
    assert AM_TOKEN not in sinks["Slack"] + sinks["SQLite"]
    # and the corpus did travel, masked rather than dropped
    assert "(redacted" in sinks["Slack"] and "(redacted" in sinks["SQLite"]


def test_a_secret_typed_as_a_wrong_word_is_not_echoed_in_part() -> None:
    from bot.app.commands import CommandError, parse
    from bot.redact import Redactor

    shape = next(s for s in SHAPES if s.name == "datadog")
    with pytest.raises(CommandError) as err:
        parse(f"diagnose {shape.line}")
    said = Redactor().text(str(err.value))
    secret = shape.secrets[0]
    assert not [secret[:n] for n in range(8, len(secret)) if secret[:n] in said], said
