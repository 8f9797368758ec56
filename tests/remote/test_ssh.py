"""The SSH layer against a real OpenSSH sshd on 127.0.0.1 (tests/sshd.py): no mocks.

Since sshd runs on this machine as this user, a remote path is a local path and a remote PID is a
local PID: the tests check what the host really did with os.stat / os.kill.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import paramiko
import pytest

from bot.config import HostConfig, JumpHost
from bot.remote.ssh import (
    AuthFailed,
    ConnectFailed,
    HostKeyChanged,
    HostKeyUnknown,
    HostVanished,
    SSHError,
    SSHSession,
    fingerprint,
)
from tests.support.sshd import SSHD, Sshd, TcpRelay, free_port

if not (os.path.isfile(SSHD) and os.access(SSHD, os.X_OK)):
    pytest.skip(f"no OpenSSH sshd at {SSHD}: the SSH tests need a real sshd", allow_module_level=True)
if shutil.which("ssh-keygen") is None:
    pytest.skip("no ssh-keygen on PATH: the SSH tests need it to make host and client keys", allow_module_level=True)

NAME = "lab"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    server = Sshd(tmp_path_factory.mktemp("sshd")).start()
    try:
        yield server
    finally:
        server.stop()


def host_config(sshd: Sshd, **over: object) -> HostConfig:
    data: dict[str, object] = {
        "address": "127.0.0.1", "port": sshd.port, "user": sshd.user, "key": sshd.client_key,
        "known_hosts": sshd.known_hosts, "connect_timeout": 3.0,
    }
    data.update(over)
    return HostConfig.model_validate(data)


@pytest.fixture
def session(sshd: Sshd) -> Iterator[SSHSession]:
    with SSHSession(NAME, host_config(sshd)) as s:
        yield s


def wait_for(cond: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")

def connect_fails(sshd: Sshd, known: Path, error: type[Exception]) -> str:
    """Connect with this known_hosts file; it must fail with `error`: its message."""
    s = SSHSession(NAME, host_config(sshd, known_hosts=known))
    try:
        with pytest.raises(error) as info:
            s.connect()
    finally:
        s.close()
    return str(info.value)



def read_pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it is dead for our purposes
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def kill_quietly(pid: int | None) -> None:
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def host_key_line(sshd: Sshd, port: int) -> str:
    kind, blob = sshd.host_key.with_suffix(".pub").read_text().split()[:2]
    return f"[127.0.0.1]:{port} {kind} {blob}\n"


# --- commands ---------------------------------------------------------------------------------


def test_exit_codes(session: SSHSession) -> None:
    r = session.run(["sh", "-c", "exit 3"])
    assert r.exit_status == 3
    assert not r.ok
    assert not r.timed_out
    r = session.run(["true"])
    assert r.exit_status == 0
    assert r.ok


BLOCK = 1024
BLOCKS = 2048  # 2 MiB per stream
CHATTY = f"""
import sys
out, err = sys.stdout.buffer, sys.stderr.buffer
for i in range({BLOCKS}):
    out.write(b"O%07d" % i + b"o" * ({BLOCK} - 9) + b"\\n"); out.flush()
    err.write(b"E%07d" % i + b"e" * ({BLOCK} - 9) + b"\\n"); err.flush()
"""


def _expected(tag: bytes, fill: bytes) -> bytes:
    return b"".join(tag + b"%07d" % i + fill * (BLOCK - 9) + b"\n" for i in range(BLOCKS))


def test_large_output_on_both_streams(session: SSHSession) -> None:
    start = time.monotonic()
    r = session.run(["python3", "-c", CHATTY], timeout=30, capture=64 * 1024)
    assert time.monotonic() - start < 15
    assert r.ok, r.err()[-500:]
    assert r.truncated
    assert r.stdout == _expected(b"O", b"o")[-64 * 1024:]
    assert r.stderr == _expected(b"E", b"e")[-64 * 1024:]
    assert r.stdout.endswith(b"O%07d" % (BLOCKS - 1) + b"o" * (BLOCK - 9) + b"\n")

    # a small output is whole and not marked truncated
    small = session.run(["sh", "-c", "echo out; echo err >&2"])
    assert (small.stdout, small.stderr, small.truncated) == (b"out\n", b"err\n", False)


def test_argv_is_never_reparsed_by_a_shell(session: SSHSession) -> None:
    arg = "a b  'single' \"double\" $(touch /tmp/specops-pwned) `id` ; echo injected * ~ $HOME \\ \nsecond line\t!"
    r = session.run(["printf", "%s", arg])
    assert r.ok, r.err()
    assert r.stdout == arg.encode()
    # exactly one argument arrives
    r = session.run(["sh", "-c", 'printf "%s|" "$#"', "sh", arg, ""])
    assert r.stdout == b"2|"
    assert not Path("/tmp/specops-pwned").exists()


def test_stdin_is_delivered(session: SSHSession) -> None:
    r = session.run(["cat"], stdin=b"hello\x00world")
    assert r.stdout == b"hello\x00world"


# --- files ------------------------------------------------------------------------------------


def test_put_is_atomic_with_mode(session: SSHSession, tmp_path: Path) -> None:
    target = tmp_path / "up" / "config.yaml"
    target.parent.mkdir()
    session.put(b"first: 1\n", str(target), 0o640)
    assert target.read_bytes() == b"first: 1\n"
    assert target.stat().st_mode & 0o7777 == 0o640
    inode = target.stat().st_ino

    session.put(b"second: 2\n" * 1000, str(target), 0o600)
    assert target.read_bytes() == b"second: 2\n" * 1000
    assert target.stat().st_mode & 0o7777 == 0o600
    assert target.stat().st_ino != inode  # renamed over, not rewritten in place
    assert sorted(p.name for p in target.parent.iterdir()) == ["config.yaml"]  # no .tmp leftovers
    assert session.read_file(str(target)) == b"second: 2\n" * 1000

    missing = tmp_path / "nope" / "x.yaml"
    with pytest.raises(SSHError) as info:
        session.put(b"x", str(missing))
    assert type(info.value) is SSHError
    msg = str(info.value)
    assert msg.startswith(f"{NAME}: cannot upload {missing}")
    assert "Traceback" not in msg and "\n" not in msg
    assert not missing.parent.exists()
    # the session survives a failed upload
    assert session.run(["true"]).ok


def test_read_file_and_read_from(session: SSHSession, tmp_path: Path) -> None:
    assert session.read_file(str(tmp_path / "missing.log")) is None
    assert session.read_from(str(tmp_path / "missing.log"), 0) == (b"", 0)

    log = tmp_path / "grow.log"
    log.write_bytes(b"line 1\nline 2\n")
    data, off = session.read_from(str(log), 0)
    assert (data, off) == (b"line 1\nline 2\n", 14)
    assert session.read_from(str(log), off) == (b"", 14)

    with log.open("ab") as f:
        f.write(b"line 3\n")
    data, off = session.read_from(str(log), off)
    assert (data, off) == (b"line 3\n", 21)

    assert session.read_from(str(log), -7) == (b"line 3\n", 21)
    assert session.read_from(str(log), -1000) == (b"line 1\nline 2\nline 3\n", 21)
    assert session.read_from(str(log), 0, max_bytes=4) == (b"line", 4)

    log.write_bytes(b"new\n")  # truncated under us: start again
    assert session.read_from(str(log), 21) == (b"new\n", 4)
    assert session.read_file(str(log)) == b"new\n"


def test_random_reader_reads_ranges_and_the_tail_over_sftp(session: SSHSession, tmp_path: Path) -> None:
    from bot.core.logread import read_tail
    from bot.remote.ssh import SSHError

    log = tmp_path / "big.log"
    spec = ("(APIServer pid=1) INFO 05-08 16:26:29 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
            "2.00, Accepted: 100 tokens, Drafted: 200 tokens, Per-position acceptance rate: 0.600, 0.400, "
            "Avg Draft acceptance rate: 50.0%\n")
    log.write_bytes(b"x" * 100 + b"\n" + b"filler line\n" * 400_000 + spec.encode() * 40)
    local = log.read_bytes()
    with session.random_reader(str(log)) as (size, read_at):
        assert size == len(local)
        assert read_at(3, 5) == local[3:8]
        assert read_at(size - 1000, 1000) == local[-1000:]  # many SFTP requests, pipelined
        tail = read_tail(read_at, size, samples=30)
    assert tail.stopped_by == "window" and len(tail.parsed.samples) == 30
    with pytest.raises(SSHError, match="No such file"), session.random_reader(str(tmp_path / "missing.log")):
        pass


# --- processes --------------------------------------------------------------------------------


def test_background_process_outlives_the_session(sshd: Sshd, tmp_path: Path) -> None:
    pidfile = tmp_path / "sleep.pid"
    pid: int | None = None
    try:
        with SSHSession(NAME, host_config(sshd)) as s:
            start = time.monotonic()
            r = s.run(["setsid", "-f", "sh", "-c", 'echo $$ > "$1"; exec sleep 30', "x", str(pidfile)],
                      background=True, timeout=10)
            assert r.ok, r.err()
            assert time.monotonic() - start < 5  # did not wait for the sleep
            wait_for(lambda: read_pid(pidfile) is not None, 5, "the pid file")
            pid = read_pid(pidfile)
            assert pid is not None
        # session closed: the process lives on
        time.sleep(0.3)
        assert alive(pid)
        assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"30"]
    finally:
        kill_quietly(pid)
    assert pid is not None
    wait_for(lambda: not alive(pid), 5, f"pid {pid} to exit after SIGTERM")


def test_command_timeout_kills_the_remote_command(session: SSHSession) -> None:
    transport = session.client.get_transport() if session.client else None
    start = time.monotonic()
    r = session.run(["sleep", "30"], timeout=1)
    elapsed = time.monotonic() - start
    assert elapsed < 4, elapsed
    assert r.timed_out
    assert r.exit_status == 124
    assert not r.ok
    # still usable, on the same connection
    assert session.run(["echo", "still here"]).stdout == b"still here\n"
    assert session.client is not None and session.client.get_transport() is transport


def test_connection_is_reused(session: SSHSession) -> None:
    assert session.client is not None
    transport = session.client.get_transport()
    assert transport is not None
    local = transport.sock.getsockname()  # type: ignore[union-attr]
    for _ in range(20):
        assert session.run(["true"]).ok
    assert session.client.get_transport() is transport
    assert transport.is_active()
    assert transport.sock.getsockname() == local  # type: ignore[union-attr]
    assert session.connect() is session and session.client.get_transport() is transport


# --- host keys, authentication, connection failures -------------------------------------------


def test_unknown_host_key(sshd: Sshd, tmp_path: Path) -> None:
    other = tmp_path / "known_hosts"
    other.write_text(host_key_line(sshd, sshd.port).replace(f"]:{sshd.port} ", "]:1 "))  # lists another host
    s = SSHSession(NAME, host_config(sshd, known_hosts=other))
    try:
        with pytest.raises(HostKeyUnknown) as info:
            s.connect()
    finally:
        s.close()
    msg = str(info.value)
    assert msg.startswith(f"{NAME}: ")
    assert info.value.host == NAME
    server_key = paramiko.Ed25519Key.from_private_key_file(str(sshd.host_key))
    assert fingerprint(server_key) in msg and "SHA256:" in msg
    assert str(other) in msg
    assert s.client is None

    missing = tmp_path / "no_such_known_hosts"
    s = SSHSession(NAME, host_config(sshd, known_hosts=missing))
    try:
        with pytest.raises(HostKeyUnknown) as info:
            s.connect()
    finally:
        s.close()
    assert str(missing) in str(info.value)
    assert "does not exist" in str(info.value)


def test_changed_host_key(sshd: Sshd, tmp_path: Path) -> None:
    kind, blob = sshd.other_key.with_suffix(".pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {kind} {blob}\n")
    msg = connect_fails(sshd, known, HostKeyChanged)
    offered = fingerprint(paramiko.Ed25519Key.from_private_key_file(str(sshd.host_key)))
    expected = fingerprint(paramiko.Ed25519Key.from_private_key_file(str(sshd.other_key)))
    assert offered != expected
    assert offered in msg and expected in msg
    assert "CHANGED" in msg
    assert msg.startswith(f"{NAME}: ")


def test_wrong_client_key(sshd: Sshd) -> None:
    s = SSHSession(NAME, host_config(sshd, key=sshd.other_key))
    try:
        with pytest.raises(AuthFailed) as info:
            s.connect()
    finally:
        s.close()
    msg = str(info.value)
    assert f"{sshd.user}@127.0.0.1:{sshd.port}" in msg
    assert "authentication refused" in msg
    assert str(sshd.other_key) in msg
    assert "Traceback" not in msg and "\n" not in msg
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_missing_client_key_file(sshd: Sshd, tmp_path: Path) -> None:
    s = SSHSession(NAME, host_config(sshd, key=tmp_path / "no_such_key"))
    try:
        with pytest.raises(AuthFailed) as info:
            s.connect()
    finally:
        s.close()
    assert "no_such_key" in str(info.value)


def test_nothing_listening(sshd: Sshd) -> None:
    port = free_port()
    s = SSHSession(NAME, host_config(sshd, port=port, connect_timeout=3.0))
    start = time.monotonic()
    try:
        with pytest.raises(ConnectFailed) as info:
            s.connect()
    finally:
        s.close()
    assert time.monotonic() - start < 3.5
    assert f"127.0.0.1:{port}" in str(info.value)
    assert str(info.value).startswith(f"{NAME}: ")


def test_host_vanishes_mid_command(sshd: Sshd, tmp_path: Path) -> None:
    relay = TcpRelay(sshd.port)
    known = tmp_path / "known_hosts"
    known.write_text(host_key_line(sshd, relay.port))
    s = SSHSession(NAME, host_config(sshd, port=relay.port, known_hosts=known))
    timer = threading.Timer(0.5, relay.pause)
    try:
        s.connect()
        assert s.run(["echo", "hi"]).stdout == b"hi\n"  # the relay works before it vanishes
        timer.start()
        start = time.monotonic()
        with pytest.raises(HostVanished) as info:
            s.run(["sleep", "20"], timeout=3)
        elapsed = time.monotonic() - start
        assert elapsed < 3 + 5, elapsed
        assert elapsed > 0.5
        msg = str(info.value)
        assert msg.startswith(f"{NAME}: ")
        assert info.value.host == NAME
        assert "sleep 20" in msg
        assert s.client is None  # the dead connection was dropped
    finally:
        timer.cancel()
        s.close()
        relay.close()


# --- port forwarding and jump hosts -----------------------------------------------------------


def test_port_forward(session: SSHSession, tmp_path: Path) -> None:
    port = free_port()
    pidfile = tmp_path / "http.pid"
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "hello.txt").write_text("hello through ssh\n")
    pid: int | None = None
    try:
        r = session.run(["setsid", "-f", "sh", "-c", 'echo $$ > "$1"; shift; exec "$@"', "x", str(pidfile),
                         "python3", "-m", "http.server", str(port), "--bind", "127.0.0.1",
                         "--directory", str(tmp_path / "www")], background=True, timeout=10)
        assert r.ok, r.err()
        wait_for(lambda: read_pid(pidfile) is not None, 5, "the http server's pid file")
        pid = read_pid(pidfile)
        with session.forward(port) as fwd, httpx.Client(trust_env=False, timeout=2) as http:
            assert fwd.url == f"http://127.0.0.1:{fwd.local_port}"

            def answers() -> bool:
                try:
                    return http.get(fwd.url + "/").status_code == 200
                except httpx.HTTPError:
                    return False

            wait_for(answers, 10, "the http server through the forward")
            got = http.get(fwd.url + "/hello.txt")
            assert got.status_code == 200 and got.text == "hello through ssh\n"

            # bound on 127.0.0.1 only: another loopback address (or any other interface) is refused
            assert fwd._listener.getsockname() == ("127.0.0.1", fwd.local_port)
            with pytest.raises(OSError), socket.create_connection(("127.0.0.2", fwd.local_port), timeout=1):
                pass
        assert fwd not in session._forwards

        def refused() -> bool:
            try:
                socket.create_connection(("127.0.0.1", fwd.local_port), timeout=1).close()
            except OSError:
                return True
            return False

        # closed with the forward (the accept thread, polling every 0.5 s, holds the socket until it wakes)
        wait_for(refused, 3, "the forward's local port to close")
    finally:
        kill_quietly(pid)


def test_jump_host(sshd: Sshd) -> None:
    jump = JumpHost(address="127.0.0.1", port=sshd.port, user=sshd.user, key=sshd.client_key)
    with SSHSession(NAME, host_config(sshd, jump=jump)) as s:
        assert s._jump is not None
        r = s.run(["echo", "via jump"])
        assert r.stdout == b"via jump\n"
        # the target connection runs inside a channel of the jump connection, not over its own TCP socket
        assert s.client is not None
        target = s.client.get_transport()
        assert target is not None and isinstance(target.sock, paramiko.Channel)
        assert s.read_file("/nonexistent/specops") is None
    assert s.client is None and s._jump is None


def test_jump_host_cannot_reach_target(sshd: Sshd) -> None:
    jump = JumpHost(address="127.0.0.1", port=sshd.port, user=sshd.user, key=sshd.client_key)
    port = free_port()
    s = SSHSession(NAME, host_config(sshd, port=port, jump=jump))
    try:
        with pytest.raises(ConnectFailed) as info:
            s.connect()
    finally:
        s.close()
    assert f"127.0.0.1:{port}" in str(info.value)
    assert s._jump is None


def _server_key_line(sshd: Sshd) -> tuple[str, str]:
    kind, blob = sshd.host_key.with_suffix(".pub").read_text().split()[:2]
    return kind, blob


def test_a_revoked_host_key_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    kind, blob = _server_key_line(sshd)
    known = tmp_path / "known_hosts"
    known.write_text(f"@revoked [127.0.0.1]:{sshd.port} {kind} {blob}\n[127.0.0.1]:{sshd.port} {kind} {blob}\n")
    msg = connect_fails(sshd, known, HostKeyChanged)
    assert "REVOKED" in msg and "@revoked" in msg


def test_junk_lines_are_skipped_with_a_warning(sshd: Sshd, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    kind, blob = _server_key_line(sshd)
    known = tmp_path / "known_hosts"
    known.write_text(f"# managed by specops\nthis is not a key line\n[127.0.0.1]:{sshd.port} ssh-ed25519 !!notbase64\n"
                     f"@cert-authority *.example.com {kind} {blob}\n[127.0.0.1]:{sshd.port} {kind} {blob}\n")
    with SSHSession(NAME, host_config(sshd, known_hosts=known)) as s:
        assert s.run(["true"]).exit_status == 0
    assert any("skipped line(s) 2, 3, 4" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("content", [b"\x00\x01\x02binary\xff\xfe", "ünïcode\n".encode("latin-1")])
def test_a_known_hosts_that_is_not_text_is_a_clear_error(sshd: Sshd, tmp_path: Path, content: bytes) -> None:
    known = tmp_path / "known_hosts"
    known.write_bytes(content)
    msg = connect_fails(sshd, known, HostKeyUnknown)
    assert "not a" in msg and str(known) in msg
