"""A signal sets the event even when it lands while the main thread holds the event's own lock.

The child's main thread spends nearly all its time inside `Event.wait(0)`, so a handler
that called `Event.set()` itself would often be interrupted while holding that lock and wait for itself
forever; the child must end promptly after every one of the signals sent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

from bot.signal_event import set_on_signals

CHILD = textwrap.dedent("""
    import signal, sys, threading
    from bot.signal_event import set_on_signals
    stop = threading.Event()
    set_on_signals(stop, (signal.SIGTERM,))
    print("ready", flush=True)
    while not stop.wait(0):
        pass
    print("stopped", flush=True)
""")


def test_a_signal_during_the_main_threads_wait_stops_it() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for _ in range(10):  # the plain `Event.set()` handler hung in about 6 of 20 such runs
        child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True, env=env)
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
            time.sleep(0.05)  # well inside the busy loop
            child.send_signal(signal.SIGTERM)
            out, _ = child.communicate(timeout=20)
            assert child.returncode == 0 and out.strip() == "stopped"
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()


def test_the_event_is_set_in_this_process_too() -> None:
    stop = threading.Event()
    previous = signal.getsignal(signal.SIGUSR1)
    try:
        set_on_signals(stop, (signal.SIGUSR1,))
        os.kill(os.getpid(), signal.SIGUSR1)
        assert stop.wait(10)
    finally:
        signal.signal(signal.SIGUSR1, previous)
