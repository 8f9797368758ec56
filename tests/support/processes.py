"""A process that does one thing, says so, and is SIGKILLed: how a bot dies in the middle of something."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
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


def sim_env(tmp: Path) -> dict[str, str]:
    """The environment a user's `specops sim` gets, under the test's own HOME and TMPDIR (no SPECOPS_ settings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_")}
    env.update(TMPDIR=str(tmp / "t"), HOME=str(tmp / "home"))
    (tmp / "t").mkdir(exist_ok=True)
    return env


def alive(pid: int) -> bool:
    """The process runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"



# tgkill(2)'s number, where the tests run (Linux on x86_64 or arm64)
_TGKILL = {"x86_64": 234, "aarch64": 131}


def signal_another_thread(pid: int, sig: int) -> int:
    """Sends `sig` to one of `pid`'s threads that is not its main thread, as the kernel may deliver a signal sent
    to the process; the thread's id. Python runs the handler in the main thread only when that thread next runs
    bytecode."""
    import ctypes
    import platform

    number = _TGKILL.get(platform.machine())
    assert number is not None, f"tgkill's number on {platform.machine()} is not known here"
    tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    assert tids, f"process {pid} runs one thread"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, pid, tids[-1], sig) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill({pid}, {tids[-1]}, {sig})")
    return tids[-1]


def finishes_within(seconds: float, work: Callable[[], object]) -> bool:
    """Run `work` in a forked child and say whether it returned, without raising, before the deadline. A regular
    expression that backtracks cannot be interrupted inside the process: a test would hang instead of failing."""
    pid = os.fork()
    if pid == 0:  # the child: its exit status is the answer
        try:
            work()
        except BaseException:
            os._exit(1)
        os._exit(0)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) == 0
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)  # the child this helper forked
    os.waitpid(pid, 0)
    return False
