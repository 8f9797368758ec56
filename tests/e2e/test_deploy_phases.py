"""The /health wait of a deploy says which phase vLLM is in and how long each took (from the server's own
log lines), and after a first start of the profile on the host, what to expect from the last ones — through
the command line (`python -m bot deploy … --host a6000`) against the simulated host, whose fake vLLM logs the
real lines of each phase."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.redact import Redactor
from bot.sim.host import SimHost
from bot.store.facade import Store
from bot.store.schema import SCHEMA
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]
WAIT = "wait for /health"
# the ok line: the time to ready, then every phase the simulated start goes through, in order, with its time
PHASES_DONE = re.compile(r"/health answered 200 after 0:\d\d \(start 0:\d\d · weights 0:\d\d · drafter 0:\d\d · "
                         r"compile 0:\d\d · KV cache 0:\d\d · CUDA graphs 0:\d\d · API server 0:\d\d\)")
RUNNING = re.compile(r"waited 0:\d\d of up to \d+:\d\d · now: (?:starting \(imports, config, engine process\)|"
                     r"loading weights|loading the drafter|torch\.compile|profiling memory, sizing the KV cache|"
                     r"capturing CUDA graphs|starting the API server|after [\w ]+) \d:\d\d")


@pytest.fixture
def slow_start() -> Iterator[SimHost]:
    """A start of 8 s, so a pipe's progress (a line every 3 s) sees phases go by."""
    host = SimHost(stats_interval=0.5, startup_seconds=8.0, max_request_seconds=0.5).start()
    try:
        yield host
    finally:
        host.cleanup()


def specops(cfg: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", "--config", str(cfg), *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=180)


def wait_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if WAIT in line]


def test_the_wait_names_the_phases_then_the_next_deploy_expects_the_last_ones(slow_start: SimHost,
                                                                               tmp_path: Path) -> None:
    cfg = tmp_path / "specops.json"
    cfg.write_text(slow_start.config(port=free_port()).model_dump_json())
    first = specops(cfg, "deploy", "mtp", "--host", "a6000")
    assert first.returncode == 0, first.stderr
    lines = wait_lines(first.stderr)
    assert any(RUNNING.search(line) for line in lines), lines  # the phase now, with its time
    done = next(line for line in lines if f"{WAIT} — ok" in line)
    assert PHASES_DONE.search(done), done
    assert "last time" not in first.stderr  # nothing to compare with yet

    assert specops(cfg, "stop", "--host", "a6000").returncode == 0  # the same profile starts again
    second = specops(cfg, "deploy", "mtp", "--host", "a6000")
    assert second.returncode == 0, second.stderr
    lines = wait_lines(second.stderr)
    running = [line for line in lines if RUNNING.search(line)]
    assert running and all("expected ready in ~" in line or "slower than before" in line for line in running), lines
    assert any(re.search(r" took (?:\d+ s|under 1 s) last time", line) for line in running), running
    done = next(line for line in lines if f"{WAIT} — ok" in line)
    assert PHASES_DONE.search(done) and re.search(r"; ready after 0:\d\d last time$", done), done
    print("\n".join(wait_lines(first.stderr) + lines))


def test_an_older_store_gains_the_startup_table(tmp_path: Path) -> None:
    """A database from before the table (every other table as it was) opens, then keeps and gives back starts."""
    path = tmp_path / "old.db"
    table = r"CREATE TABLE IF NOT EXISTS startup_runs \(.*?\);\nCREATE INDEX IF NOT EXISTS startup_runs_key[^;]*;\n"
    old = re.sub(table, "", SCHEMA, flags=re.S)
    assert "startup_runs" not in old
    with sqlite3.connect(path) as db:
        db.executescript(old)
    from bot.core.startup import StartupRun

    store = Store(path, Redactor())
    try:
        assert store.startups.history("a6000", "mtp").runs == ()
        for ready in (50.0, 40.0, 45.0, 90.0):
            store.startups.record("a6000", "mtp", StartupRun(ready, (("weights", ready / 2),)), keep=3)
        history = store.startups.history("a6000", "mtp")
        assert [r.ready_seconds for r in history.runs] == [90.0, 45.0, 40.0]  # newest first, the oldest pruned
        assert history.ready_seconds() == 45.0 and history.phase_seconds("weights") == 22.5
        assert store.startups.history("a6000", "dflash").runs == ()  # per profile
    finally:
        store.close()


def test_the_slack_threads_live_progress_names_the_phases(slow_start: SimHost, tmp_path: Path) -> None:
    """The same wait through the bot: the progress message, edited while vLLM starts, names the phase."""
    from tests.support.served import Served, bot_config, wait_for
    from tests.support.slack_emulator import SlackEmulator

    emu = SlackEmulator().start()
    path = tmp_path / "cfg.json"
    path.write_text(bot_config(slow_start.config(port=free_port())).model_dump_json())
    bot = Served(tmp_path, path, emu)
    try:
        assert bot.command("deploy mtp a6000").status_code == 200
        plan = wait_for("the plan", lambda: [m for m in emu.messages() if "plan_confirm" in str(m.get("blocks"))])
        bot.confirm(plan[0])
        wait_for("the deploy to finish", lambda: any("verdict" in str(c.args.get("text"))
                                                  for c in emu.calls_to("chat.update")), timeout=120)
        texts = [str(c.args.get("text")) for c in emu.calls_to("chat.update")]
        waiting = [t for t in texts if f"{WAIT} — running" in t]
        assert any(RUNNING.search(t) for t in waiting), texts
    finally:
        bot.kill(15)
        emu.stop()
