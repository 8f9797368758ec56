"""A process that does one thing, says so, and is SIGKILLed: how a bot dies in the middle of something."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def killed_after(code: str, ready: str, *args: str) -> None:
    """Run `code` (it prints `ready` when it is where it should die), then SIGKILL its process group."""
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == ready
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this helper created
        proc.wait(timeout=10)
