"""Deployment rows of killed or superseded runs end (issue 21, items 2 and 9): a run whose process is gone
leaves a `failed` row that says why, a deployment that another replaced or a stop ended is `stopped`.

Real parts: a real SQLite file, a real child process SIGKILLed, the simulated host for deploy and stop.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from bot.app.operations import ops
from bot.app.services import build_services
from bot.config import Config
from bot.redact import Redactor
from bot.sim.host import SimHost
from bot.store.facade import Store
from tests.support.sshd import free_port

REPO = Path(__file__).resolve().parents[2]

# a run that records its deployment and then waits (on stdin, not a sleep) until it is killed
_RUN = """
import sys
from bot.redact import Redactor
from bot.store.facade import Store
store = Store(sys.argv[1], Redactor())
dep = store.deployments.record("a6000", "dflash", "fp", "running")
print(dep, flush=True)
sys.stdin.read()
"""


def _killed_run(db: Path) -> tuple[int, int]:
    """(deployment id, pid) of a run SIGKILLed while its row said `running`."""
    child = subprocess.Popen([sys.executable, "-c", _RUN, str(db)], cwd=REPO, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert child.stdout is not None
    dep_id = int(child.stdout.readline())
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=10)
    return dep_id, child.pid


def _row(db: Path, dep_id: int) -> tuple[str, dict[str, object], float | None]:
    import json

    con = sqlite3.connect(db)
    try:
        status, detail, finished = con.execute("SELECT status, detail, finished_at FROM deployments WHERE id = ?",
                                               (dep_id,)).fetchone()
    finally:
        con.close()
    return status, json.loads(detail), finished


def test_a_sigkilled_runs_row_becomes_failed_with_why(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    dep_id, pid = _killed_run(db)
    assert _row(db, dep_id)[0] == "running"  # what the killed run left
    store = Store(db, Redactor())
    try:
        assert store.deployments.reconcile() == 1
        status, detail, finished = _row(db, dep_id)
        assert status == "failed"
        assert detail["message"] == f"the run that wrote it (pid {pid}) is gone"
        assert finished is not None
        assert store.deployments.reconcile() == 0
    finally:
        store.close()


def test_the_object_graph_reconciles_when_it_opens_the_store(tmp_path: Path, sim: SimHost) -> None:
    cfg = sim.config(port=free_port())
    dep_id, pid = _killed_run(cfg.settings.state)
    svc = build_services(cfg)
    try:
        dep = svc.store.deployments.latest("a6000")
        assert dep is not None and dep.id == dep_id
        assert dep.status == "failed" and dep.detail["message"] == f"the run that wrote it (pid {pid}) is gone"
    finally:
        svc.close()


def test_a_live_runs_row_is_left_alone(tmp_path: Path) -> None:
    store = Store(tmp_path / "state.db", Redactor())
    try:
        dep_id = store.deployments.record("a6000", "dflash", "fp", "running")
        assert store.deployments.reconcile() == 0
        dep = store.deployments.latest("a6000")
        assert dep is not None and dep.id == dep_id and dep.status == "running"
    finally:
        store.close()


def test_a_row_without_its_run_ends_only_when_its_host_holds_no_lock(tmp_path: Path) -> None:
    """A row written before rows named their run: only the host's lock says whether a run is behind it."""
    db = tmp_path / "state.db"
    store = Store(db, Redactor())
    try:
        locked = store.deployments.record("a6000", "dflash", "fp", "running")
        free = store.deployments.record("h100", "dflash", "fp", "running")
        con = sqlite3.connect(db)
        con.execute("UPDATE deployments SET holder_pid = NULL, holder_boot = NULL, holder_start = NULL")
        con.commit()
        con.close()
        store.locks.acquire("a6000", "alice", "deploy dflash")  # held by this live process
        assert store.deployments.reconcile() == 1
        assert _row(db, locked)[0] == "running"
        status, detail, _ = _row(db, free)
        assert status == "failed" and detail["message"] == "the run that wrote it is gone (h100 holds no lock)"
    finally:
        store.close()


def test_serving_supersedes_the_hosts_older_rows(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = Store(db, Redactor())
    try:
        first = store.deployments.record("a6000", "dflash", "fp1", "running")
        store.deployments.update(first, status="serving", pid=100, finished=True)
        other = store.deployments.record("h100", "dflash", "fp1", "running")
        store.deployments.update(other, status="serving", pid=300, finished=True)
        second = store.deployments.record("a6000", "mtp", "fp2", "running")
        assert _row(db, first)[0] == "serving"  # until the new one serves, the old one does
        store.deployments.update(second, status="serving", pid=200, finished=True)
        status, detail, _ = _row(db, first)
        assert status == "stopped" and detail["message"] == f"superseded by deployment #{second}"
        assert _row(db, second)[0] == "serving"
        assert _row(db, other)[0] == "serving"  # another host's row is its own
    finally:
        store.close()


def test_an_old_schema_database_still_opens(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    con = sqlite3.connect(db)
    con.executescript("""
        CREATE TABLE deployments (id INTEGER PRIMARY KEY AUTOINCREMENT, host TEXT NOT NULL, profile TEXT NOT NULL,
            fingerprint TEXT NOT NULL, pid INTEGER, status TEXT NOT NULL, started_at REAL NOT NULL,
            finished_at REAL, detail TEXT NOT NULL DEFAULT '{}');
        INSERT INTO deployments(host, profile, fingerprint, pid, status, started_at)
            VALUES ('a6000', 'dflash', 'fp', 4242, 'running', 1.0);
    """)
    con.commit()
    con.close()
    store = Store(db, Redactor())
    try:
        cols = {r[1] for r in sqlite3.connect(db).execute("PRAGMA table_info(deployments)")}
        assert {"holder_pid", "holder_boot", "holder_start"} <= cols
        dep = store.deployments.latest("a6000")
        assert dep is not None and dep.status == "failed"
        assert dep.detail["message"] == "the run that wrote it is gone (a6000 holds no lock)"
        assert dep.pid == 4242  # the remote server's PID is kept
    finally:
        store.close()


def test_deploy_supersedes_and_stop_ends_the_serving_row(sim: SimHost) -> None:
    cfg: Config = sim.config(port=free_port())
    svc = build_services(cfg)
    try:
        def req(profile: str | None) -> ops.HostRequest:
            return ops.HostRequest(cfg, "a6000", profile, force=True, store=svc.store, hosts=svc.hosts)

        ops.deploy(req("dflash"))
        first = svc.store.deployments.latest("a6000")
        assert first is not None and first.status == "serving"
        ops.deploy(req("dflash-0.20.1"))
        second = svc.store.deployments.latest("a6000")
        assert second is not None and second.id != first.id and second.status == "serving"
        status, detail, _ = _row(cfg.settings.state, first.id)
        assert status == "stopped" and detail["message"] == f"superseded by deployment #{second.id}"
        stopped = ops.stop(req(None))
        assert stopped.status == "changed", stopped.operation
        ended = svc.store.deployments.latest("a6000")
        assert ended is not None and ended.id == second.id and ended.status == "stopped"
        assert str(ended.detail["message"]).startswith("stopped by ")
    finally:
        svc.close()
