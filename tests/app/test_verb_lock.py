"""`lock`: a read-only verb added through the registry alone — chat, help, the console and the CLI know it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.app.chat import ChatDispatcher, Who
from bot.app.commands import USAGE, parse
from bot.app.services import build_services
from bot.config import Config, HostConfig, Profile, Settings

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path) -> Config:
    (tmp_path / "kh").write_text("")
    return Config(hosts={"a6000": HostConfig(address="127.0.0.1", port=9, user="x", known_hosts=tmp_path / "kh")},
                  profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3)},
                  settings=Settings(state=tmp_path / "specops.db"))


def test_lock_says_who_holds_the_host_and_changes_nothing(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    svc = build_services(cfg)
    chat = ChatDispatcher(svc)
    try:
        assert "`lock [HOST]`" in USAGE and not parse("lock a6000", cfg).destructive_verb
        decision = chat.decide("lock a6000", Who("slash", "U1"))
        assert decision.next == "run" and decision.command is not None  # read-only: no plan, no confirm
        assert chat.run(decision.command, decision.audit, "U1").text == "a6000 is not locked"  # type: ignore[attr-defined]
        svc.store.locks.acquire("a6000", "someone@box (cli)", "deploy mtp")
        decision = chat.decide("lock", Who("slash", "U1"))  # the only host is the default
        said = chat.run(decision.command, decision.audit, "U1").text  # type: ignore[arg-type, attr-defined]
        assert said.startswith("a6000 is locked by someone@box (cli) for deploy mtp")
        assert svc.store.locks.holder("a6000") is not None  # still held
    finally:
        svc.close()


def test_the_command_line_has_it_too(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(_config(tmp_path).model_dump_json())
    p = subprocess.run([sys.executable, "-m", "bot", "--config", str(cfg), "lock", "--host", "a6000"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "a6000 is not locked", p.stderr
