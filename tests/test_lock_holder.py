"""A lock knows its holder by PID, start time and boot: a reused PID (a restarted container's bot is PID 1
again) is not taken for the holder (issue 21, item 2)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bot.redact import Redactor
from bot.store.facade import Store
from bot.store.holders import boot_id, holder_gone, process_start
from bot.store.locks import LockHeld

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def _plant(path: Path, pid: int, start: int | None) -> None:
    """A lock row as a holder with this PID and start time left it."""
    db = sqlite3.connect(path)
    try:
        db.execute("INSERT INTO locks(host, owner, operation, started_at, pid, boot_id, heartbeat, pid_start) "
                   "VALUES ('a6000', 'bot@box', 'deploy mtp', 0, ?, ?, 0, ?)", (pid, boot_id(), start))
        db.commit()
    finally:
        db.close()


def test_a_reused_pid_is_not_the_holder(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db", Redactor())
    try:
        me, started = os.getpid(), process_start(os.getpid())
        assert started is not None
        # the restarted bot got the dead one's PID (PID 1 in a container): same PID, another start time
        _plant(tmp_path / "s.db", me, started - 1)
        assert store.locks.stale("a6000")
        taken = store.locks.acquire("a6000", "bot@box (restarted)", "deploy mtp")
        assert taken is not None and "is gone" in taken
        assert store.locks.holder("a6000") is not None and store.locks.holder("a6000")[0] == "bot@box (restarted)"  # type: ignore[index]
    finally:
        store.close()


def test_a_live_holder_still_holds_and_a_dead_one_does_not(tmp_path: Path) -> None:
    # a holder that lives until its stdin closes: no sleep, it ends when the test lets it
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        start = process_start(child.pid)
        assert start is not None and not holder_gone(child.pid, boot_id(), start)
        store = Store(tmp_path / "s.db", Redactor())
        try:
            _plant(tmp_path / "s.db", child.pid, start)
            with pytest.raises(LockHeld):
                store.locks.acquire("a6000", "someone else", "stop")
        finally:
            store.close()
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    assert holder_gone(child.pid, boot_id(), start)


def test_a_lock_from_before_start_times_were_kept_still_uses_the_pid(tmp_path: Path) -> None:
    assert not holder_gone(os.getpid(), boot_id(), None)  # this process: alive, as before
    assert holder_gone(os.getpid(), boot_id(), -1)  # recorded with another start: not this process


def test_a_holder_in_another_pid_namespace_is_never_judged_by_its_pid(tmp_path: Path) -> None:
    """A second container on this machine shares the boot but not the PIDs: its PID 1 is not ours, so only its
    lease can free its lock. A lock row of the release before namespaces (the kernel's boot alone) still is."""
    from tests.support.served import OWN_PIDS, own_pids_work

    if not own_pids_work():
        pytest.skip("unshare --pid needs root")
    probe = ("import os; from bot.store.holders import boot_id, process_start; "
             "print(os.getpid(), boot_id(), process_start(1))")
    out = subprocess.run([*OWN_PIDS, sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                         check=True, cwd=Path(__file__).resolve().parents[1]).stdout.split()
    pid, boot, start = int(out[0]), out[1], int(out[2])
    assert pid == 1 and boot != boot_id() and boot.split("/")[0] == boot_id().split("/")[0]
    assert not holder_gone(pid, boot, start)  # here, PID 1 is another process: that says nothing about it
    legacy = boot_id().split("/")[0]
    assert holder_gone(os.getpid(), legacy, -1) and not holder_gone(os.getpid(), legacy, None)
