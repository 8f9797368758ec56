"""Ports handed out now and bound later (a simulated vLLM's, a bot's): chosen below the kernel's ephemeral range,
so that nothing bound to port 0 meanwhile (an SSH server) and no outgoing connection (each takes an ephemeral port
of its own) can take one first. A port from `bind(0)` is in that range: a test once saw a simulated sshd listening
on the port a fleet had picked for its vLLM, and the deploy refused it as "already in use"."""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10000  # below: well-known and registered services people run
MIN_SPAN = 2000  # fewer ports than this outside the ephemeral range: take the kernel's pick instead

_lock = threading.Lock()
_given: set[int] = set()  # never handed out twice by one process, bound or not
_pick = random.SystemRandom()  # processes started at once do not walk the same sequence


def _outside_ephemeral() -> range | None:
    try:
        low, high = (int(x) for x in RANGE_FILE.read_text().split()[:2])
    except (OSError, ValueError):
        return None
    if low - LOWEST >= MIN_SPAN:
        return range(LOWEST, low)
    if 65535 - high >= MIN_SPAN:
        return range(high + 1, 65536)
    return None


def _candidate(span: range | None) -> socket.socket | None:
    """A socket bound to a port picked in `span` (the kernel's pick when None); None when that one is taken."""
    port = 0 if span is None else _pick.choice(span)
    if port in _given:
        return None
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    return s


def free_ports(n: int = 1) -> list[int]:
    """`n` distinct ports on 127.0.0.1 that are free now and that this process has not handed out before."""
    span = _outside_ephemeral()
    held: list[socket.socket] = []
    out: list[int] = []
    try:
        with _lock:
            for _ in range(200 * n):
                if len(out) == n:
                    break
                s = _candidate(span)
                if s is None:
                    continue
                held.append(s)  # held until all n are picked: none repeats
                port = int(s.getsockname()[1])
                if port not in _given:  # the kernel's pick may repeat one handed out and closed since
                    _given.add(port)
                    out.append(port)
            if len(out) < n:
                raise OSError(f"found only {len(out)} of {n} free ports on 127.0.0.1")
            return out
    finally:
        for s in held:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]
