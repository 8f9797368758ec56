"""The simulated host's SSH server keeps every exec channel until its command's exit status is sent, under load:
many short commands at once over one connection (a deploy's health wait reads /proc/<pid>/stat while its
/health probes open forward channels) each get their status, never "Channel closed." (a deploy once failed
at its /health step that way, and the fleet tests' module fixture with it)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bot.remote.ssh import SSHSession
from bot.sim import sshd
from bot.sim.host import SimHost


def _busy(stop: Any) -> None:
    while not stop.is_set():
        pass


@pytest.fixture
def cpu_load() -> Iterator[None]:
    """Two busy processes: the two cores the CI runs on, taken."""
    stop = multiprocessing.get_context("spawn").Event()
    procs = [multiprocessing.get_context("spawn").Process(target=_busy, args=(stop,), daemon=True) for _ in range(2)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        stop.set()
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()


def test_many_short_commands_at_once_over_one_connection_under_load(sim: SimHost, cpu_load: None) -> None:
    session = SSHSession("a6000", sim.host_config()).connect()
    failures: list[str] = []

    def work() -> None:
        for _ in range(40):
            try:
                r = session.run(["cat", "/proc/self/stat"], timeout=10)
            except Exception as exc:  # the client's own words, the test's evidence
                failures.append(str(exc))
                return
            if r.exit_status != 0:
                failures.append(f"exit status {r.exit_status}: {r.err()}")

    try:
        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
        assert failures == []
    finally:
        session.close()


def test_a_session_channel_still_runs_its_command_after_other_channels_open(sim: SimHost) -> None:
    """The server held an accepted session channel only until it accepted the next one (or waited half a second
    for one); paramiko's transport holds channels weakly, so the channel closed before its exec request came."""
    session = SSHSession("a6000", sim.host_config()).connect()
    try:
        transport = session._transport()
        first = transport.open_session(timeout=10)
        others = [transport.open_session(timeout=10) for _ in range(2)]
        time.sleep(1.0)  # the server's accept loop goes round (it polls every 0.5 s)
        first.exec_command("exit 3")
        assert first.recv_exit_status() == 3
        for c in (first, *others):
            c.close()
    finally:
        session.close()


def test_a_command_that_ends_before_its_exec_request_is_answered(sim: SimHost,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The transport thread, descheduled between accepting the exec request and sending its reply (a loaded
    machine), while the command runs, ends and closes its channel: the client's exec must still succeed."""
    accept = sshd._Server.check_channel_exec_request

    def slow(self: sshd._Server, channel: Any, command: bytes) -> bool:
        ok = accept(self, channel, command)
        time.sleep(0.5)  # what a loaded machine does to the thread that is to answer
        return ok

    monkeypatch.setattr(sshd._Server, "check_channel_exec_request", slow)
    session = SSHSession("a6000", sim.host_config()).connect()
    try:
        r = session.run(["sh", "-c", "echo done; exit 4"], timeout=10)
        assert (r.exit_status, r.out()) == (4, "done\n")
    finally:
        session.close()
