"""The state store's faults as `specops serve` meets them (issue 23): PostgreSQL unreachable at start (retried,
then exit 69 for the unit to restart), a refused password (exit 78 at once, never printed), PostgreSQL gone
mid-run (chat says "state store unavailable" and runs nothing; /healthz 503). Real parts: `specops serve`
subprocesses, the Slack emulator, the session's PostgreSQL behind a loopback TCP relay."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from bot.config import Config, HostConfig, Profile, Settings
from tests.support.postgres import Postgres
from tests.support.served import ROOT, Served, bot_config, wait_for
from tests.support.slack_emulator import SlackEmulator
from tests.support.sshd import TcpRelay, free_port

_DB = itertools.count(1)


def _config(tmp: Path, state: str) -> Path:
    cfg = Config(hosts={"h1": HostConfig(address="127.0.0.1", port=free_port(), user="u", known_hosts=tmp / "kh")},
                 profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3)},
                 settings=Settings(state=state))
    path = tmp / "specops.json"
    path.write_text(bot_config(cfg).model_dump_json())
    return path


def _serve(tmp: Path, cfg: Path, emu: SlackEmulator, budget: float) -> tuple[subprocess.Popen[str], Path]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith("SPECOPS_")}
    env.update(SLACK_BOT_TOKEN="xoxb-store-fault-123456", SLACK_SIGNING_SECRET="store-fault-secret",
               SPECOPS_SLACK_API_URL=emu.base_url, HOME=str(tmp), SPECOPS_START_TIMEOUT=str(budget))
    log = tmp / f"serve-{time.monotonic_ns()}.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "bot", "--config", str(cfg), "serve", "--http", "--port",
                                 str(free_port())], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
    return proc, log


def _ended(proc: subprocess.Popen[str], timeout: float) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the session this test started
        proc.wait()
        raise


def test_postgres_unreachable_at_start_is_retried_then_exit_69(tmp_path: Path) -> None:
    password = "unreachable-pg-secret-981"
    cfg = _config(tmp_path, f"postgresql+psycopg://specops:{password}@127.0.0.1:{free_port()}/specops")
    with SlackEmulator() as emu:
        proc, log = _serve(tmp_path, cfg, emu, budget=4)
        code = _ended(proc, 60)
    said = log.read_text()
    assert code == 69, said
    retries = [line for line in said.splitlines() if "cannot open the state store" in line and "attempt" in line]
    assert len(retries) >= 2, said
    assert "state store unavailable" in said.strip().splitlines()[-1], said
    assert password not in said and "Traceback" not in said


def test_a_refused_password_is_exit_78_at_once_and_never_said(tmp_path: Path, postgres_server: Postgres) -> None:
    wrong = "wrong-pg-password-4417"
    cfg = _config(tmp_path, postgres_server.url_for("specops", password=wrong))
    with SlackEmulator() as emu:
        proc, log = _serve(tmp_path, cfg, emu, budget=120)
        code = _ended(proc, 60)  # at once: far less than the 120 s budget
    said = log.read_text()
    assert code == 78, said
    assert "password authentication failed" in said and "restarting cannot fix it" in said, said
    assert wrong not in said and "Traceback" not in said


@pytest.mark.parametrize("how", ["cut", "vanished"])
def test_postgres_gone_mid_run_stops_chat_and_fails_healthz(how: str, tmp_path: Path,
                                                            postgres_server: Postgres) -> None:
    """`cut`: every connection closed (the server stopped). `vanished`: the relay stops relaying and closes
    nothing (the server's machine gone from the network): the answer still comes before Slack's 3 s."""
    name = f"faults_{os.getpid()}_{next(_DB)}"
    direct = postgres_server.create_database(name)
    relay = TcpRelay(postgres_server.port)
    state = direct.replace(f":{postgres_server.port}/", f":{relay.port}/")
    emu = SlackEmulator().start()
    bot = None
    try:
        bot = Served(tmp_path, _config(tmp_path, state), emu)
        assert "deploy PROFILE" in bot.command("help").text
        engine = sa.create_engine(direct, poolclass=sa.pool.NullPool)

        def audited() -> list[str]:
            with engine.connect() as db:
                return [r[0] for r in db.execute(sa.text("SELECT text FROM audit"))]

        wait_for("the help turn's audit row", audited, 15)
        if how == "cut":
            relay.close()  # the database server is gone: every connection through the relay is cut
        else:
            relay.pause()
        bad = wait_for("/healthz to fail", lambda: (r := httpx.get(f"{bot.url}/healthz", timeout=15,
                                                                      trust_env=False)).status_code == 503 and r, 30)
        assert "cannot write" in bad.json()["checks"]["store"], bad.json()
        asked = time.monotonic()
        answer = bot.command("status h1").text
        assert time.monotonic() - asked < 3.0, "Slack retries an acknowledgement later than 3 s"
        assert "state store unavailable" in answer and "nothing runs" in answer, answer
        assert state.split("@")[0].split(":")[-1] not in answer  # the password is never said
        texts = audited()  # nothing ran unaudited: the refused turn left no row
        engine.dispose()
        assert "status h1" not in texts and "help" in texts, texts
    finally:
        relay.close()  # first: a bot stopping while the store does not answer waits for it (serve's STOP_WAIT)
        if bot is not None and bot.proc.poll() is None:
            bot.kill(signal.SIGTERM)
        emu.stop()

