"""The listings a script reads — `incidents`, `incidents show ID`, `audit`, `schedule list` — through the real
CLI in a subprocess, over a real SQLite store seeded through the store's own API: `--format text|md|json` (JSON:
one document, a list of objects with stable keys, times ISO-8601 UTC, secrets redacted), the incident's timeline,
cut table cells ending in "…", and `demo --format json` as one document."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bot.redact import Redactor
from bot.store.facade import Store

ROOT = Path(__file__).resolve().parents[2]
SECRET = "Zq81-plainvalue-4471"  # the config hands it to vLLM as HF_TOKEN: every output must mask it
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
LONG_TITLE = "a6000: acceptance collapsed (dflash) " + "x" * 120 + " and the end of the title"


def run(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SPECOPS_CONFIG"}
    return subprocess.run([sys.executable, "-m", "bot", "--config", str(cfg), *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env={**env, "COLUMNS": "200"})


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    """A config and its store: two incidents (one with a whole timeline), three audit rows."""
    state = tmp_path / "state.db"
    cfg = tmp_path / "specops.yaml"
    cfg.write_text(yaml.safe_dump({
        "hosts": {"a6000": {"address": "127.0.0.1", "user": "vllm", "known_hosts": str(tmp_path / "kh")}},
        "profiles": {"mtp": {"model": "m", "method": "mtp", "num_speculative_tokens": 1,
                             "env": {"HF_TOKEN": SECRET}}},
        "settings": {"state": str(state)},
        "watch": {"interval": 60, "report_cron": "0 8 * * *"},
    }))
    store = Store(state, Redactor())  # it does not know the config's secret: the listing's redactor must
    try:
        inc, _ = store.incidents.open("a6000", "a6000", "a6000: down", {
            "event": "opened", "source": "watch",
            "alerts": [{"kind": "down", "title": "a6000: down", "detail": f"no /health (token {SECRET})"}]})
        store.incidents.update(inc.id, channel="C0ONCALL", ts="1700000000.000100")
        store.incidents.update(inc.id, state="acknowledged", event={"event": "acknowledged", "user": "U0ALICE"})
        store.incidents.update(inc.id, event={"event": "alert", "source": "alertmanager", "alerts": [
            {"kind": "prometheus:SpecDecodeAcceptanceLow", "title": "acceptance low", "detail": "mean 1.2"}]})
        store.incidents.update(inc.id, state="resolved", event={
            "event": "resolved", "source": "slack", "why": "fixed by U0ALICE"})
        store.incidents.open("a6000:accept", "a6000", LONG_TITLE, {"event": "opened", "source": "watch", "alerts": []})
        for text, result in ((f"deploy mtp --host a6000 {SECRET}", "ok"), ("status", "ok"),
                             ("diagnose a6000 " + "y" * 150, "failed")):
            row = store.audit.queue(source="slack", text=text, team="T01", user="U0ALICE", channel="C0OPS",
                                    plan_id="p1" if text.startswith("deploy") else None)
            store.audit.queue_end(row, result, detail="done" if result == "ok" else "host unreachable")
        store.audit.queue(source="cli", text="deploy dflash --host a6000", user="bob")  # still running
        store.audit.flush()
    finally:
        store.close()
    return cfg


def _json(p: subprocess.CompletedProcess[str]) -> object:
    assert p.returncode == 0, p.stderr
    assert SECRET not in p.stdout
    return json.loads(p.stdout)  # one document: json.loads refuses two


def test_incidents_list_as_json(seeded: Path) -> None:
    data = _json(run(seeded, "incidents", "--format", "json"))
    assert isinstance(data, list) and [d["id"] for d in data] == [2, 1]  # newest first
    keys = {"id", "key", "host", "state", "title", "opened_at", "resolved_at", "events", "last_event", "firing",
            "slack_channel", "slack_ts"}
    assert all(set(d) == keys for d in data), data
    old = data[1]
    assert old["state"] == "resolved" and old["events"] == 4 and old["last_event"] == "resolved"
    assert ISO_UTC.match(old["opened_at"]) and ISO_UTC.match(old["resolved_at"])
    assert old["slack_channel"] == "C0ONCALL"
    assert data[0]["title"] == LONG_TITLE and data[0]["resolved_at"] is None  # JSON never cuts


def test_incident_show_prints_its_timeline_in_every_format(seeded: Path) -> None:
    doc = _json(run(seeded, "incidents", "show", "1", "--format", "json"))
    assert isinstance(doc, dict) and doc["id"] == 1
    events = doc["timeline"]
    assert [e["event"] for e in events] == ["opened", "acknowledged", "alert", "resolved"]
    assert all(set(e) == {"at", "event", "source", "user", "detail", "alerts"} for e in events), events
    assert all(ISO_UTC.match(e["at"]) for e in events)
    assert events[1]["user"] == "U0ALICE" and events[3]["source"] == "slack"
    assert events[3]["detail"] == "fixed by U0ALICE"
    assert events[0]["alerts"][0]["kind"] == "down" and "(redacted)" in events[0]["alerts"][0]["detail"]
    text = run(seeded, "incidents", "show", "1")
    assert text.returncode == 0 and SECRET not in text.stdout, text.stderr
    lines = text.stdout.splitlines()
    assert "#1" in lines[0] and "resolved" in lines[0]
    body = "\n".join(lines)
    for word in ("opened", "acknowledged", "U0ALICE", "alert", "acceptance low", "resolved", "fixed by U0ALICE"):
        assert word in body, body
    assert body.index("opened") < body.index("acknowledged") < body.index("acceptance low") < body.index("fixed by")
    md = run(seeded, "incidents", "show", "1", "--format", "md")
    assert md.returncode == 0 and "| when | event | by | what |" in md.stdout and SECRET not in md.stdout, md.stdout
    missing = run(seeded, "incidents", "show", "99")
    assert missing.returncode == 2 and "no incident #99" in missing.stderr and "Traceback" not in missing.stderr


def test_incidents_help_tells_the_truth(seeded: Path) -> None:
    p = run(seeded, "incidents", "--help")
    assert p.returncode == 0 and "show" in p.stdout and "timeline" in p.stdout, p.stdout


def test_audit_as_json_and_md(seeded: Path) -> None:
    data = _json(run(seeded, "audit", "--format", "json"))
    assert isinstance(data, list) and len(data) == 4
    keys = {"id", "started_at", "finished_at", "seconds", "source", "user", "team", "channel", "text", "command",
            "plan_id", "result", "detail"}
    assert all(set(d) == keys for d in data), data
    assert data[0]["result"] == "started" and data[0]["finished_at"] is None  # newest first, still running
    deploy = data[3]
    assert deploy["plan_id"] == "p1" and "(redacted)" in deploy["text"] and ISO_UTC.match(deploy["started_at"])
    md = run(seeded, "audit", "--format", "md")
    assert md.returncode == 0 and md.stdout.startswith("| id |") and SECRET not in md.stdout, md.stdout
    assert "y" * 150 in md.stdout  # Markdown never cuts: the reader's viewer wraps


def test_schedule_list_as_json(seeded: Path) -> None:
    data = _json(run(seeded, "schedule", "list", "--format", "json"))
    assert isinstance(data, list)
    assert sorted(d["id"] for d in data) == ["prune:samples", "report:a6000", "watch:a6000"]
    assert all(set(d) == {"id", "next_run", "trigger"} for d in data), data
    assert all(ISO_UTC.match(d["next_run"]) for d in data), data


def test_unknown_format_is_one_line(seeded: Path) -> None:
    for cmd in (["incidents"], ["audit"], ["schedule", "list"]):
        p = run(seeded, *cmd, "--format", "yaml")
        assert p.returncode == 2 and "Traceback" not in p.stderr and "text, md, json" in p.stderr, p.stderr


def test_text_tables_cut_cells_with_an_ellipsis(seeded: Path) -> None:
    inc = run(seeded, "incidents")
    assert inc.returncode == 0, inc.stderr
    row = next(line for line in inc.stdout.splitlines() if "acceptance collapsed" in line)
    assert row.rstrip().endswith("…") and "the end of the title" not in row, row
    audit = run(seeded, "audit")
    assert audit.returncode == 0 and SECRET not in audit.stdout, audit.stderr
    long = next(line for line in audit.stdout.splitlines() if "diagnose a6000" in line)
    assert "y" * 150 not in long and "y…" in long, long
    running = next(line for line in audit.stdout.splitlines() if "deploy dflash" in line)
    assert "running" in running, running  # never "runnin"


def test_demo_json_is_one_document_with_both_reports(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SPECOPS_CONFIG"}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    p = subprocess.run([sys.executable, "-m", "bot", "demo", "--format", "json", "--out", str(tmp_path / "d")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert list(doc) == ["dflash-0.20.1", "dflash"], list(doc)
    # each deploy's result: what it did, and the diagnosis of the server it left
    assert all(isinstance(r, dict) and r["operation"]["kind"] == "deploy" and r["diagnosis"]["verdict"]
               for r in doc.values()), doc
