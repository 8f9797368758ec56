"""`specops deploy` when the host vanishes mid-deploy, as a user at a terminal sees it: the CLI's own short
error naming the failed step on stderr, and nothing of paramiko (its transport thread logs the lost socket
with a traceback). A real OpenSSH sshd on 127.0.0.1 behind a TCP relay that resets or stops relaying."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import Config, Settings
from bot.sim.host import SimHost
from tests.support.openssh_sim import sim_behind_openssh
from tests.support.sshd import Sshd, TcpRelay, free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def openssh(tmp_path: Path) -> Iterator[tuple[SimHost, Sshd]]:
    # a slow start, so the relay is cut while the deploy waits on /health, not after it
    with sim_behind_openssh(tmp_path, startup_seconds=30.0) as both:
        yield both


@pytest.mark.parametrize("fault", ["reset", "blackhole"])
@pytest.mark.parametrize("verbosity", [[], ["-v"]])
def test_a_vanished_host_gives_the_clis_own_error_and_no_paramiko_traceback(
        openssh: tuple[SimHost, Sshd], tmp_path: Path, fault: str, verbosity: list[str]) -> None:
    host, sshd = openssh
    relay = TcpRelay(sshd.port)
    known = tmp_path / "known_hosts.relay"
    kind, blob = sshd.host_key.with_suffix(".pub").read_text().split()[:2]
    known.write_text(f"[127.0.0.1]:{relay.port} {kind} {blob}\n")
    cfg = Config(hosts={"a6000": host.host_config(port=relay.port).model_copy(update={
        "user": sshd.user, "key": sshd.client_key, "known_hosts": known, "connect_timeout": 5.0,
        "keepalive": 1.0})}, profiles=host.profiles(port=free_port()), settings=Settings(state=tmp_path / "s.db"))
    path = tmp_path / "specops.json"
    path.write_text(cfg.model_dump_json())
    proc = subprocess.Popen([sys.executable, "-m", "bot", "--config", str(path), *verbosity, "deploy", "mtp",
                             "--host", "a6000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    lines: list[str] = []
    cut = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "/health" in line and not cut.is_set():
                cut.set()  # the host is gone: its connection resets, or nothing answers any more
                relay.close() if fault == "reset" else relay.pause()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()  # the process this test started
            proc.wait(timeout=10)
        relay.close()
    reader.join(timeout=10)
    stderr = "".join(lines)
    assert cut.is_set(), stderr
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr and "paramiko" not in stderr.lower(), stderr
    assert "wait for /health" in stderr, stderr
    assert not any(line.startswith(("  File ", "    ")) for line in lines), stderr
