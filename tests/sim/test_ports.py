"""Ports handed out to be bound later lie outside the kernel's ephemeral range: no socket bound to port 0 and no
outgoing connection meanwhile can take one (a simulated sshd once listened on a fleet's vLLM port)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bot.sim import ports


def test_ports_handed_out_are_never_what_port_0_gives() -> None:
    given = set(ports.free_ports(20))
    assert len(given) == 20
    span = ports._outside_ephemeral()
    assert span is not None and all(p in span for p in given)  # this machine has room below its range
    socks = []
    try:
        for _ in range(300):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        assert not given & {s.getsockname()[1] for s in socks}
    finally:
        for s in socks:
            s.close()


def test_one_process_never_hands_out_a_port_twice_and_each_is_free() -> None:
    seen = [p for _ in range(50) for p in ports.free_ports(2)]
    assert len(seen) == len(set(seen))
    with socket.socket() as s:
        s.bind(("127.0.0.1", seen[-1]))  # free when handed out, and nothing here took it since


def test_a_narrow_ephemeral_range_falls_back_to_port_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wide = tmp_path / "range"
    wide.write_text("1024\t65000\n")
    monkeypatch.setattr(ports, "RANGE_FILE", wide)
    assert ports._outside_ephemeral() is None
    assert len(set(ports.free_ports(3))) == 3
