"""A stop signal the kernel delivers to a thread other than the main one still stops the process. Python runs
the handler in the main thread only when that thread next runs bytecode; `serve` blocked its main thread in one
endless wait and outlived SIGTERM for minutes in a CI run (its handler pending), `sim` slept an hour at a time.
Real processes, each signalled on one of its other threads with tgkill(2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from bot.sim.host import SimHost
from tests.support.processes import signal_another_thread, sim_env
from tests.support.served import ROOT, Served, bot_config, wait_for
from tests.support.slack_emulator import SlackEmulator


def test_serve_stops_on_a_sigterm_delivered_to_another_thread(tmp_path: Path) -> None:
    emu = SlackEmulator().start()
    try:
        with SimHost(tmp_path / "sim") as sim:
            path = tmp_path / "specops.json"
            path.write_text(bot_config(sim.config()).model_dump_json())
            bot = Served(tmp_path, path, emu)
            try:
                signal_another_thread(bot.proc.pid, signal.SIGTERM)
                assert bot.proc.wait(timeout=30) == 0, Path(bot.log.name).read_text()
            finally:
                if bot.proc.poll() is None:
                    os.killpg(bot.proc.pid, signal.SIGKILL)  # the session Served started
                    bot.proc.wait(timeout=10)
                bot.log.close()
    finally:
        emu.stop()


def test_sim_stops_on_a_sigterm_delivered_to_another_thread(tmp_path: Path) -> None:
    log_path = tmp_path / "sim.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "bot", "sim", "--write-config", str(tmp_path / "sim.yaml")],
                                cwd=ROOT, env=sim_env(tmp_path), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        wait_for("the simulated host (or its exit)",
                 lambda: proc.poll() is not None or "Ctrl-C stops it" in log_path.read_text(), 90)
        assert proc.poll() is None, log_path.read_text()
        signal_another_thread(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 143, log_path.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the session this test started
            proc.wait(timeout=10)
    assert "stopped (SIGTERM)" in log_path.read_text()
    assert json.loads((tmp_path / "sim.yaml").read_text())["hosts"]
