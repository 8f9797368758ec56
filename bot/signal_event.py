"""An event that a signal handler sets without taking a lock.

`threading.Event.set()` takes the event's lock. Python runs a signal handler in the main thread between two
bytecodes, so when the main thread is itself inside `Event.wait` (holding that same, non-reentrant lock for a
moment) a handler calling `set()` waits for itself forever: a stop that never ends until SIGKILL. Here the
handler only writes a byte to a pipe (async-signal-safe); a daemon thread, never interrupted, sets the event.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterable
from types import FrameType


def set_on_signals(event: threading.Event, signals: Iterable[signal.Signals]) -> None:
    """From now on each of `signals` sets `event`, once (a stop: the event is not meant to be cleared). From the main
    thread only, as `signal.signal` requires."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("signal handlers can only be set from the main thread")
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)  # a full pipe already holds a wake-up: the handler never blocks

    def relay() -> None:
        try:
            os.read(read_end, 1)
        finally:
            event.set()
            os.close(read_end)  # later signals write to a pipe no one reads: EPIPE, ignored below

    threading.Thread(target=relay, name="signal-relay", daemon=True).start()

    def handler(signum: int, frame: FrameType | None) -> None:
        try:
            os.write(write_end, b"\0")
        except (BlockingIOError, BrokenPipeError):
            pass

    for sig in signals:
        signal.signal(sig, handler)
