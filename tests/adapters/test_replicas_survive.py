"""Leadership that survives its database (issue 36): PostgreSQL restarted under two `specops serve` replicas, the
leader SIGSTOPped, the leader's connection stalled behind a relay that stops relaying — each time one replica
leads again within a lease or two, and a replica says 503 while none leads. Real parts: two serve subprocesses, the
Slack emulator, a PostgreSQL of this module's own (it is restarted), a loopback TCP relay, SIGSTOP/SIGCONT."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from bot.config import Config, HostConfig, Profile, Settings
from tests.support.postgres import Postgres, running_postgres
from tests.support.served import Served, bot_config, wait_for
from tests.support.slack_emulator import SlackEmulator
from tests.support.sshd import TcpRelay, free_port

LEASE = 6.0
# `SPECOPS_TEST_PG_OUTAGE=60 pytest -k postgres_restart` holds PostgreSQL down that long (CI keeps it to the few
# seconds both loops need to meet the outage twice)
OUTAGE = float(os.environ.get("SPECOPS_TEST_PG_OUTAGE", "0"))


@pytest.fixture
def server() -> Iterator[Postgres]:
    """A server of the test's own: restarting the session's would pull it from under every other test."""
    yield from running_postgres()


def _config(tmp: Path, state: str) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = Config(hosts={"h1": HostConfig(address="127.0.0.1", port=free_port(), user="u", known_hosts=tmp / "kh")},
                 profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3)},
                 settings=Settings(state=state, lease_seconds=LEASE))
    path = tmp / "specops.json"
    path.write_text(bot_config(cfg).model_dump_json())
    return path


def _health(bot: Served) -> tuple[int, dict[str, object]]:
    try:
        answer = httpx.get(f"{bot.url}/healthz", timeout=3, trust_env=False)
    except httpx.HTTPError:
        return 0, {}
    return answer.status_code, dict(answer.json())


def _check(bot: Served, name: str) -> object:
    checks = _health(bot)[1].get("checks")
    return checks.get(name) if isinstance(checks, dict) else None


def _leads(bot: Served) -> bool:
    code, body = _health(bot)
    return code == 200 and body.get("role") == "leader"


def _stands_by(bot: Served) -> bool:
    code, body = _health(bot)
    return code == 200 and body.get("role") == "standby"


def _home(tmp: Path, name: str) -> Path:
    home = tmp / name
    home.mkdir(parents=True, exist_ok=True)
    return home


def _log(bot: Served) -> str:
    return Path(bot.log.name).read_text()


@contextmanager
def _pair(tmp_path: Path, emu: SlackEmulator, cfg_a: Path,
          cfg_b: Path | None = None) -> Iterator[tuple[Served, Served]]:
    """Two `serve` replicas, a started first (it leads), b standing by; both stopped (a stopped one resumed) after."""
    a = Served(_home(tmp_path, "a"), cfg_a, emu)
    b = Served(_home(tmp_path, "b"), cfg_b or cfg_a, emu)
    try:
        wait_for("a to lead, b to stand by", lambda: _leads(a) and _stands_by(b), 30)
        yield a, b
    finally:
        _stop(a, b)


def _stop(*bots: Served) -> None:
    for bot in bots:
        if bot.proc.poll() is None:
            os.killpg(bot.proc.pid, signal.SIGCONT)  # a stopped process must run to take its SIGTERM
            bot.kill(signal.SIGTERM)


def test_a_postgres_restart_leaves_one_leader_and_no_dead_thread(tmp_path: Path, server: Postgres) -> None:
    with SlackEmulator() as emu, _pair(tmp_path, emu, _config(tmp_path, server.url)) as (a, b):
        server.halt()
        halted = time.monotonic()
        wait_for("both to say 503 while the store is gone", lambda: _health(a)[0] == _health(b)[0] == 503, 30)
        # the outage lasts until both leadership loops have met it twice (a few seconds without PostgreSQL)
        wait_for("both loops to meet the outage twice",
                 lambda: all(_log(x).count("leadership check failed") >= 2 for x in (a, b)), 4 * LEASE)
        if OUTAGE > 0:  # a longer outage on request (issue 36 names 60 s): many leases with no database at all
            wait_for(f"{OUTAGE:g} s without PostgreSQL", lambda: time.monotonic() - halted >= OUTAGE, OUTAGE + 5)
        server.restart()
        wait_for("exactly one replica to lead again, the other to stand by",
                 lambda: (_leads(a) and _stands_by(b)) or (_leads(b) and _stands_by(a)), 2 * LEASE + 10)
        for bot in (a, b):
            said = _log(bot)
            assert "Exception in thread" not in said and "Traceback" not in said, said


def test_a_stopped_leader_is_replaced_and_steps_down_when_it_resumes(tmp_path: Path, server: Postgres) -> None:
    with SlackEmulator() as emu, _pair(tmp_path, emu, _config(tmp_path, server.url)) as (a, b):
        os.killpg(a.proc.pid, signal.SIGSTOP)  # the session this test started: its session stays open
        # "no replica leads" lasts from the stale heartbeat until b ends the stopped leader's session: on a loaded
        # machine b may already lead when it is first asked, which the log line asserted below proves it reached
        wait_for("b to say no replica leads, or to lead already",
                 lambda: _check(b, "leader") == "no replica leads" or _leads(b), 3 * LEASE)
        wait_for("b to take the lead from the stopped leader", lambda: _leads(b), 3 * LEASE)
        os.killpg(a.proc.pid, signal.SIGCONT)
        wait_for("a to step down on resuming", lambda: _stands_by(a), 3 * LEASE)
        assert _leads(b)
        assert "ended the session of a leader whose heartbeat stopped" in _log(b), _log(b)


def test_a_leader_behind_a_stalled_network_is_replaced(tmp_path: Path, server: Postgres) -> None:
    relay = TcpRelay(server.port)
    stalled = server.url.replace(f"127.0.0.1:{server.port}/", f"127.0.0.1:{relay.port}/")
    try:
        with SlackEmulator() as emu, _pair(tmp_path, emu, _config(tmp_path / "a", stalled),
                                           _config(tmp_path / "b", server.url)) as (a, b):
            relay.pause()  # both sockets stay open; the kernel still acknowledges
            wait_for("b to take the lead", lambda: _leads(b), 4 * LEASE)
            relay.resume()
            wait_for("a to stand by", lambda: _stands_by(a), 4 * LEASE)
    finally:
        relay.close()


def test_a_confirmed_job_lost_with_its_replica_is_said_in_its_thread_and_a_second_press_says_so(
        tmp_path: Path, server: Postgres) -> None:
    """The plan is posted by a, confirmed on b, and b is SIGKILLed while the job runs (its host does not answer:
    the SSH connection waits). a says in the plan's thread that it was lost, the audit row is closed, and a
    second press says what happened instead of "already confirmed"."""
    silent = TcpRelay(free_port())  # accepts, then relays nothing: the SSH handshake waits
    silent.pause()
    cfg = Config(hosts={"h1": HostConfig(address="127.0.0.1", port=silent.port, user="u",
                                         known_hosts=tmp_path / "kh")},
                 profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3)},
                 settings=Settings(state=server.url, lease_seconds=LEASE))
    (tmp_path / "kh").write_text("")
    path = tmp_path / "specops.json"
    path.write_text(bot_config(cfg).model_dump_json())
    try:
        with SlackEmulator() as emu, _pair(tmp_path, emu, path) as (a, b):
            assert "Preparing the plan" in a.command("stop h1").text
            plan = wait_for("the plan's message", lambda: next((m for m in emu.messages() if "confirm or cancel"
                                                                in str(m.get("text"))), None), 30)
            b.confirm(plan)
            wait_for("the press answered", lambda: "Confirmed by" in str(emu.message(plan["ts"]).get("text")), 30)
            b.kill(signal.SIGKILL)
            said = wait_for("the loss said in the plan's thread", lambda: [
                m for m in emu.messages() if "stopped before it finished" in str(m.get("text"))], 6 * LEASE)
            assert said[0].get("thread_ts") == plan["ts"], said
            a.confirm(plan)
            answers = wait_for("the second press answered", lambda: [
                str(c.args.get("text")) for c in emu.calls_to("chat.postEphemeral")], 30)
            assert any("replica running it stopped" in t and "new plan" in t for t in answers), answers
    finally:
        silent.close()
