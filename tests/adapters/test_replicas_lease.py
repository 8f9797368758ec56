"""A deploy lock held by a SIGKILLed replica, as issue 23 asks: refused while its lease is fresh, then taken with a
clear message once it expires. The killed replica runs in a PID namespace of its own, as a second container on
the same machine does: it shares the boot but not the PIDs, so its lock is judged by its lease, never by a PID
that means another process here. Real parts: two `specops serve` on the session's PostgreSQL, the Slack
emulator, the simulated host over a real sshd, unshare(1), SIGKILL."""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from bot.config import Settings
from bot.sim.host import SimHost
from tests.support.postgres import Postgres
from tests.support.served import OWN_PIDS, Served, bot_config, own_pids_work, wait_for
from tests.support.slack_emulator import SlackEmulator
from tests.support.sshd import free_port

LEASE = 6.0
_DB = itertools.count(1)


@pytest.fixture
def slow_start() -> Iterator[SimHost]:
    """A start of 20 s: the deploy is still waiting for /health when its replica is killed."""
    host = SimHost(stats_interval=0.5, startup_seconds=20.0, max_request_seconds=0.5).start()
    try:
        yield host
    finally:
        host.cleanup()


def _plan(emu: SlackEmulator, after: int) -> dict[str, object]:
    return wait_for("the plan", lambda: next((m for m in emu.messages()[after:]
                                              if "plan_confirm" in str(m.get("blocks"))), None), 30)


def _progress(emu: SlackEmulator, after: int) -> dict[str, object]:
    """The job's progress message, with its Cancel button."""
    return wait_for("the progress message", lambda: next((m for m in emu.messages()[after:]
                                                          if "job_cancel" in str(m.get("blocks"))), None), 30)


def _said(emu: SlackEmulator, after: int, *words: str) -> str:
    def text() -> str | None:
        for m in [*emu.messages()[after:], *(c.args for c in emu.calls_to("chat.update"))]:
            t = f"{m.get('text')} {m.get('blocks') or ''}"  # a report's findings are in its blocks
            if all(w in t for w in words):
                return t
        return None
    return str(wait_for(" and ".join(words), text, 60))


def test_a_killed_replicas_deploy_lock_is_refused_for_its_lease_then_taken(
        slow_start: SimHost, postgres_server: Postgres, tmp_path: Path) -> None:
    if not own_pids_work():
        pytest.skip("unshare --pid needs root: a replica in another PID namespace cannot be started here")
    state = postgres_server.create_database(f"lease_{os.getpid()}_{next(_DB)}")
    cfg = bot_config(slow_start.config(port=free_port()))
    cfg.settings = Settings(state=state, lease_seconds=LEASE)
    path = tmp_path / "specops.json"
    path.write_text(cfg.model_dump_json())
    emu = SlackEmulator().start()
    other = Served(tmp_path, path, emu, wrap=OWN_PIDS)  # "another container"
    here = Served(tmp_path, path, emu)
    try:
        # a Cancel pressed on the replica that does not run the job reaches the one that does
        assert other.command("deploy mtp a6000").status_code == 200
        other.confirm(_plan(emu, 0))
        here.press(_progress(emu, 0), "job_cancel")
        _said(emu, 0, "deploy mtp a6000: cancelled")

        seen = len(emu.messages())
        assert other.command("deploy mtp a6000").status_code == 200
        other.confirm(_plan(emu, seen))
        job = _progress(emu, seen)
        wait_for("the server to start", lambda: (slow_start.root / "srv/specops/server.pid").exists(), 60)
        other.kill(signal.SIGKILL)  # mid-deploy: its lock stays, and nothing renews it

        seen = len(emu.messages())
        assert here.command("stop a6000").status_code == 200
        here.confirm(_plan(emu, seen))
        refused = _said(emu, seen, "a6000 is busy", "lease")
        assert "expires in" in refused and "deploy mtp" in refused, refused
        assert (slow_start.root / "srv/specops/server.pid").exists()  # nothing ran

        seen = len(emu.messages())
        wait_for("the lease to expire", lambda: _lease_expired(state), LEASE * 3)
        assert here.command("stop a6000").status_code == 200
        here.confirm(_plan(emu, seen))
        taken = _said(emu, seen, "took over the lock of a6000")
        assert "its lease expired" in taken and "deploy mtp" in taken, taken
        _said(emu, seen, "stop a6000: stopped")
        here.press(job, "job_cancel")  # the killed replica's job: its Cancel says where it ran
        gone = wait_for("the answer to Cancel", lambda: [str(c.args.get("text")) for c in emu.calls_to(
            "chat.postEphemeral") if "is gone" in str(c.args.get("text"))], 30)
        assert "it is not running" in gone[0], gone
        assert not (slow_start.root / "srv/specops/server.pid").exists()
    finally:
        for bot in (other, here):
            if bot.proc.poll() is None:
                bot.kill(signal.SIGTERM)
        emu.stop()


def _lease_expired(state: str) -> bool:
    """The killed replica's lock has gone unrenewed for longer than its lease."""
    engine = sa.create_engine(state, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as db:
            beat = db.execute(sa.text("SELECT heartbeat FROM locks WHERE host = 'a6000'")).scalar_one()
    finally:
        engine.dispose()
    return time.time() - float(beat) > LEASE
