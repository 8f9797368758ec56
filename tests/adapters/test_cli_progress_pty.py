"""On a terminal the running step's line is redrawn in place and ends as one line (a real pty)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.sim.host import SimHost
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def slow_start() -> Iterator[SimHost]:
    host = SimHost(stats_interval=0.5, startup_seconds=4.0, max_request_seconds=0.5).start()
    try:
        yield host
    finally:
        host.cleanup()


def test_the_running_line_is_redrawn_in_place_on_a_terminal(slow_start: SimHost, tmp_path: Path) -> None:
    cfg = tmp_path / "specops.json"
    cfg.write_text(slow_start.config(port=free_port()).model_dump_json())
    master, slave = os.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "160"}
    proc = subprocess.Popen([sys.executable, "-m", "bot", "--config", str(cfg), "deploy", "mtp", "--host", "a6000",
                             "--format", "json"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=slave,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            try:
                data = os.read(master, 65536)
            except OSError:  # the pty closes when the process (its only writer) exits
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)  # the session this test started
            proc.wait(timeout=10)
        os.close(master)
    out = b"".join(chunks).decode("utf-8", "replace")
    redraws = [seg for seg in out.split("\r\x1b[K") if "wait for /health" in seg and "waited" in seg]
    assert len(redraws) >= 2, out[-2000:]  # the wait was redrawn while it ran, not printed once and frozen
    # what the terminal shows at the end: of each line, what follows its last "clear the line"
    shown = [line.split("\r\x1b[K")[-1] for line in out.replace("\r\n", "\n").split("\n")]
    finals = [line for line in shown if "wait for /health" in line]
    assert len(finals) == 1 and "— ok" in finals[0], finals  # and it ends as one line, not twice
