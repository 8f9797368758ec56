"""Two `specops serve` replicas on one PostgreSQL, as issue 23 asks: every replica answers chat, one leads the
schedules, and a SIGKILLed leader is replaced within the lease. Real parts: two serve subprocesses, the Slack
emulator, the session's PostgreSQL (tests/support/postgres.py), SIGKILL."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from bot.config import Config, HostConfig, Profile, Settings
from bot.redact import Redactor
from bot.store.facade import Store
from bot.store.locks import LockHeld
from tests.support.postgres import Postgres
from tests.support.served import ROOT, Served, bot_config, wait_for
from tests.support.slack_emulator import SlackEmulator
from tests.support.sshd import free_port

LEASE = 6.0  # settings.lease_seconds (default 30): short, so the test waits seconds, not half a minute
INTERVAL = 2.0  # watch.interval
_DB = itertools.count(1)


@pytest.fixture
def database(postgres_server: Postgres) -> str:
    return postgres_server.create_database(f"replicas_{os.getpid()}_{next(_DB)}")


def _config(tmp: Path, state: str) -> Path:
    cfg = Config(hosts={"h1": HostConfig(address="127.0.0.1", port=free_port(), user="u",  # nothing listens there
                                         known_hosts=tmp / "kh")},
                 profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3)},
                 settings=Settings(state=state, lease_seconds=LEASE))
    cfg = bot_config(cfg, interval=INTERVAL, report_cron="* * * * *")
    path = tmp / "specops.json"
    path.write_text(cfg.model_dump_json())
    return path


def _health(bot: Served) -> dict[str, object]:
    try:
        answer = httpx.get(f"{bot.url}/healthz", timeout=5, trust_env=False)
    except httpx.HTTPError:
        return {}
    return dict(answer.json())


@pytest.fixture
def replicas(tmp_path: Path, database: str) -> Iterator[tuple[SlackEmulator, Served, Served, sa.Engine]]:
    emu = SlackEmulator().start()
    cfg = _config(tmp_path, database)
    started: list[Served] = []
    engine = sa.create_engine(database, poolclass=sa.pool.NullPool)
    try:
        a = Served(tmp_path, cfg, emu)
        started.append(a)
        wait_for("the first replica to lead", lambda: _health(a).get("role") == "leader", 30)
        b = Served(tmp_path, cfg, emu)
        started.append(b)
        yield emu, a, b, engine
    finally:
        for bot in started:
            if bot.proc.poll() is None:
                bot.kill(signal.SIGTERM)
        engine.dispose()
        emu.stop()


def _rows(engine: sa.Engine, sql: str) -> list[tuple[object, ...]]:
    with engine.connect() as db:
        return [tuple(r) for r in db.execute(sa.text(sql))]


def test_two_replicas_answer_once_schedule_once_and_fail_over(
        replicas: tuple[SlackEmulator, Served, Served, sa.Engine]) -> None:
    emu, a, b, engine = replicas
    a_id = str(_health(a)["replica"])
    standby = _health(b)
    assert standby["role"] == "standby" and standby["leader"] == a_id and standby["ok"] is True, standby
    assert "specops_leader{" in httpx.get(f"{b.url}/metrics", timeout=5, trust_env=False).text

    # 50 slash commands spread over both, and 10 of them replayed on the other replica (a load balancer's retry)
    def send(i: int) -> list[str]:
        first, other = (a, b) if i % 2 else (b, a)
        trigger = f"4242.{i}.replicas"
        said = [first.command("help", trigger_id=trigger).text]
        if i < 10:
            said.append(other.command("help", trigger_id=trigger).text)
        return said

    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(send, range(50)))
    assert all("deploy PROFILE" in said[0] or "already being handled" in said[0] for said in answers), answers
    assert sum("deploy PROFILE" in s for said in answers for s in said) == 50, answers  # each run once...
    assert sum("already being handled" in s for said in answers for s in said) == 10, answers  # ...replays answered
    wait_for("50 audit rows", lambda: _rows(engine, "SELECT count(*) FROM audit WHERE source = 'slash'")[0][0] >= 50)
    assert _rows(engine, "SELECT count(*) FROM audit WHERE source = 'slash'")[0][0] == 50

    # the watch runs once per interval across both: no two samples closer than half an interval
    wait_for("six watches", lambda: _rows(engine, "SELECT count(*) FROM samples WHERE host = 'h1'")[0][0] >= 6, 60)
    wait_for("an incident for the unreachable host",
             lambda: _rows(engine, "SELECT count(*) FROM incidents WHERE host = 'h1'")[0][0] >= 1, 60)

    # a plan posted by one replica is confirmed through the other (Slack delivers a press to any of them), once
    assert "Preparing the plan" in a.command("stop h1").text
    plan = wait_for("the plan's message", lambda: next((m for m in emu.messages() if "confirm or cancel"
                                                        in str(m.get("text"))), None), 30)
    b.confirm(plan)
    wait_for("the plan confirmed on the other replica",
             lambda: "Confirmed by" in str(emu.message(plan["ts"]).get("text")), 30)
    a.confirm(plan)  # a second press, on the replica that posted it
    said = wait_for("the second press answered", lambda: [c.args.get("text") for c in
                                                           emu.calls_to("chat.postEphemeral")], 30)
    assert any("already confirmed" in str(t) for t in said), said
    wait_for("the stop's audit row", lambda: _rows(engine, "SELECT count(*) FROM audit WHERE text LIKE "
                                                   "'confirm plan%'")[0][0] == 2)

    killed_at = time.time()
    a.kill(signal.SIGKILL)
    took = wait_for("the standby to lead", lambda: _health(b).get("role") == "leader" and time.time(), 30)
    failover = took - killed_at
    assert failover < 30, failover
    before = _rows(engine, "SELECT count(*) FROM samples WHERE host = 'h1'")[0][0]
    wait_for("watches on the new leader",
             lambda: _rows(engine, "SELECT count(*) FROM samples WHERE host = 'h1'")[0][0] >= before + 3, 60)
    ats = [float(r[0]) for r in _rows(engine, "SELECT at FROM samples WHERE host = 'h1' ORDER BY at")]
    gaps = [later - earlier for earlier, later in itertools.pairwise(ats)]
    assert min(gaps) > INTERVAL / 2, gaps

    # the open incident is the same one: the new leader's watch did not open (or post) another
    incidents = _rows(engine, "SELECT id, state FROM incidents WHERE host = 'h1'")
    assert len(incidents) == 1 and incidents[0][1] != "resolved", incidents

    # the next report is posted exactly once (cron each minute; both replicas saw the same job store)
    wait_for("a report posted after the failover",
             lambda: _rows(engine, f"SELECT count(*) FROM report_runs WHERE posted_at > {took}")[0][0] >= 1, 75)
    periods = _rows(engine, "SELECT period, channel, ts FROM report_runs WHERE posted_at IS NOT NULL")
    report_posts = [m for m in emu.messages() if "Health report" in str(m.get("text", ""))
                    or "health report" in str(m.get("text", "")).lower()]
    assert len(report_posts) == len(periods), (periods, [m.get("text") for m in report_posts])

    rows = {r[0]: (bool(r[1]), float(r[2])) for r in _rows(engine, "SELECT id, leader, heartbeat FROM replicas")}
    leaders = [rid for rid, (lead, _) in rows.items() if lead]
    assert leaders == [str(_health(b)["replica"])], rows


_HOLDER = textwrap.dedent("""
    import sys
    from bot.redact import Redactor
    from bot.store.facade import Store
    store = Store(sys.argv[1], Redactor(), lease=float(sys.argv[2]))
    store.locks.acquire("h1", "U1 via slack", "deploy mtp")
    print("held", flush=True)
    sys.stdin.read()  # holds the lock (and renews it) until the test kills it or closes its stdin
""")


def _holder(state: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, state, str(LEASE / 2)], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _elsewhere(state: str) -> None:
    """The holder as if on another machine (its boot id is not ours): only its lease says whether it lives."""
    engine = sa.create_engine(state, poolclass=sa.pool.NullPool)
    with engine.begin() as db:
        db.execute(sa.text("UPDATE locks SET boot_id = 'another-machine'"))
    engine.dispose()


def test_a_lock_of_another_machine_is_a_lease_renewed_while_its_holder_lives(database: str) -> None:
    holder = _holder(database)
    store = Store(database, Redactor(), lease=LEASE / 2)
    try:
        _elsewhere(database)
        deadline = time.monotonic() + LEASE * 1.5  # three leases: a live holder renews, nothing expires
        while time.monotonic() < deadline:
            with pytest.raises(LockHeld) as held:
                store.locks.acquire("h1", "U2", "stop")
            assert "lease was renewed" in str(held.value), held.value
            time.sleep(0.5)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # the session this test started
        holder.wait()
        store.close()


def test_a_killed_holders_lease_expires_and_is_taken_with_a_clear_message(database: str) -> None:
    holder = _holder(database)
    os.killpg(holder.pid, signal.SIGKILL)
    holder.wait()
    _elsewhere(database)
    store = Store(database, Redactor(), lease=LEASE / 2)
    try:
        with pytest.raises(LockHeld) as held:
            store.locks.acquire("h1", "U2", "stop")
        assert "expires in" in str(held.value), held.value

        def taken() -> str | None:
            try:
                return store.locks.acquire("h1", "U2", "stop")
            except LockHeld:
                return None

        said = wait_for("the lease to expire", taken, LEASE * 2)
        assert "deploy mtp by U1 via slack" in said and "its lease expired, not renewed for" in said, said
        assert store.locks.holder("h1") is not None and store.locks.holder("h1")[0] == "U2"  # type: ignore[index]
    finally:
        store.close()
