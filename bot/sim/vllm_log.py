"""vLLM's log line format on the fake's stdout."""

from __future__ import annotations

import sys
import threading
import time


class Log:
    """vLLM's line format on stdout. One lock, so lines from request threads never interleave."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._lock = threading.Lock()

    def emit(self, text: str) -> None:
        with self._lock:
            try:
                sys.stdout.write(text + "\n")
                sys.stdout.flush()  # the ops tool tails the file: every line must land at once
            except (OSError, ValueError):
                pass  # a vanished log reader must not take the server down with it

    def info(self, where: str, message: str, proc: str = "APIServer", level: str = "INFO") -> None:
        stamp = time.strftime("%m-%d %H:%M:%S")
        self.emit(f"({proc} pid={self.pid}) {level} {stamp} [{where}] {message}")

    def uvicorn(self, message: str) -> None:
        self.emit(f"(APIServer pid={self.pid}) INFO:     {message}")

    def partial(self, text: str) -> None:
        """A progress bar mid-way: tqdm redraws it with \\r and ends the line only when it is done."""
        with self._lock:
            try:
                sys.stdout.write(text + "\r")
                sys.stdout.flush()
            except (OSError, ValueError):
                pass
