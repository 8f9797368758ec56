"""The simulated host's files and fake vllm, reached through a real OpenSSH sshd on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bot.sim.host import SimHost
from tests.support.sshd import Sshd


@contextmanager
def sim_behind_openssh(folder: Path, startup_seconds: float = 0.5) -> Iterator[tuple[SimHost, Sshd]]:
    host = SimHost(folder / "host", stats_interval=0.5, startup_seconds=startup_seconds, max_request_seconds=1.0)
    sshd = Sshd(folder / "sshd", extra_config=[f"SetEnv {k}={v}" for k, v in host.env().items()]).start()
    try:
        yield host, sshd
    finally:
        host.cleanup()  # stops the fake vllm a deploy left running, by its recorded PID
        sshd.stop()
