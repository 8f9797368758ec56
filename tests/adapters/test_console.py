"""`specops chat`: the same commands in a terminal, with the same plan-then-confirm."""

from __future__ import annotations

import io
import sqlite3
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from bot.adapters.console import ChatConsole
from bot.sim.host import SimHost
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_chat_session(sim: SimHost) -> None:
    answers = iter(["help", "bogus $(id)", "deploy mtp", "no", "deploy mtp", "yes", "status", "stop", "yes", "quit"])
    asked: list[str] = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return next(answers)

    buf = io.StringIO()
    console = ChatConsole(sim.config(port=free_port()), ask=ask, out=Console(file=buf, width=200), fmt="md")
    console.loop()
    out = buf.getvalue()
    assert "deploy PROFILE [HOST]" in out
    assert "unknown command 'bogus'" in out and "$(id)" not in out
    assert "Cancelled; nothing ran." in out
    assert asked.count("Type 'yes' to deploy mtp a6000: ") == 2
    assert "**Deploy** `mtp` on `a6000`: **changed**" in out
    assert "**Stop** `mtp` on `a6000`: **changed** — stopped PID" in out
    assert not (sim.root / "srv/specops/server.pid").exists()
    results = [e.result for e in console.services.store.audit.recent(20)]
    assert results.count("cancelled") == 1 and "changed" in results and "usage" in results


def test_end_of_input_at_the_confirmation_cancels_and_closes_the_audit_row(sim: SimHost) -> None:
    answers = iter(["deploy mtp"])

    def ask(prompt: str) -> str:
        try:
            return next(answers)
        except StopIteration:
            raise EOFError from None

    buf = io.StringIO()
    console = ChatConsole(sim.config(port=free_port()), ask=ask, out=Console(file=buf, width=200), fmt="md")
    console.loop()
    entry = console.services.store.audit.recent(1)[0]
    assert entry.result == "cancelled" and entry.finished_at is not None
    assert "Cancelled; nothing ran." in buf.getvalue()


def test_help_names_the_hosts_and_profiles_typos_get_a_suggestion_status_is_short(sim: SimHost) -> None:
    answers = iter(["help", "stauts", "deploy mpt", "status a600", "deploy mtp", "yes", "quit", "yes"])
    buf = io.StringIO()
    console = ChatConsole(sim.config(port=free_port()), ask=lambda _p: next(answers),
                          out=Console(file=buf, width=200), fmt="text")
    console.loop()
    out = buf.getvalue()
    assert "Hosts: a6000" in out and "Profiles:" in out and "mtp" in out
    assert "did you mean 'status'?" in out
    assert "did you mean 'mtp'?" in out
    assert "did you mean 'a6000'?" in out
    start = len(buf.getvalue())
    console.handle("status")
    status = buf.getvalue()[start:]
    assert "'diagnose a6000' for the whole report" in status
    assert len(status.strip().splitlines()) <= 4, status
    assert "--host" not in status  # chat advice in chat syntax
    console.handle("stop")


def test_end_of_input_at_the_confirmation_of_specops_chat_closes_the_audit_row_on_disk(sim: SimHost,
                                                                                      tmp_path: Path) -> None:
    """The terminal as a user has it: `specops chat` reading a pipe that ends at the confirmation. The process
    exits right after; the row must be 'cancelled' in the database, not left 'started' in a queue."""
    cfg = sim.config(port=free_port())
    cfg.settings.state = tmp_path / "specops.db"
    path = tmp_path / "specops.json"
    path.write_text(cfg.model_dump_json())
    p = subprocess.run([sys.executable, "-m", "bot", "--config", str(path), "chat"], input="deploy mtp\n",
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "Cancelled; nothing ran." in p.stdout and "Traceback" not in p.stderr
    db = sqlite3.connect(cfg.settings.state)
    try:
        rows = db.execute("SELECT text, result FROM audit ORDER BY id").fetchall()
    finally:
        db.close()
    assert rows == [("deploy mtp", "cancelled")] or rows[-1][1] == "cancelled", rows
    assert not (sim.root / "srv/specops/server.pid").exists()
