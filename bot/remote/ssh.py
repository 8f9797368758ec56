"""One paramiko session per host: run argv lists, upload atomically, read remote files, forward ports.

Host keys are verified against a managed known_hosts (a RejectPolicy that names the fingerprint);
every command is an argv list joined with `shlex.join`; long commands run under `timeout(1)` on the
host so a lost session cannot orphan them; output is read from both streams together into a
bounded tail, so a chatty command can neither hang the channel nor fill our memory.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import select
import shlex
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import paramiko

from bot.config import HostConfig
from bot.errors import OperationError
from bot.remote import known_hosts
from bot.remote.known_hosts import KnownHosts
from bot.remote.pump import pump, quiet_close

DEFAULT_CAPTURE = 64 * 1024
EOF_AFTER_EXIT = 1.0  # seconds to wait, once the exit status is in, for the EOF that ends the output


class _QuietRefusedChannels(logging.Filter):
    """paramiko logs every refused forward channel at ERROR; waiting for /health makes many on purpose,
    and the step reports what matters."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "open FAILED" not in str(record.msg)


logging.getLogger("paramiko.transport").addFilter(_QuietRefusedChannels())


class SSHError(OperationError):
    """A clear, one-line problem with a host; `host` names it."""

    def __init__(self, host: str, message: str) -> None:
        super().__init__(f"{host}: {message}")
        self.host = host


class HostKeyUnknown(SSHError):
    pass


class HostKeyChanged(SSHError):
    pass


class AuthFailed(SSHError):
    pass


class ConnectFailed(SSHError):
    pass


class HostVanished(SSHError):
    """The host stopped answering in the middle of something."""


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


class _RejectNamingFingerprint(paramiko.RejectPolicy):
    """paramiko's RejectPolicy, but the error names the host and the key it offered (and a revoked one)."""

    def __init__(self, name: str, known_hosts: Path, revoked: KnownHosts | None = None) -> None:
        self.name = name
        self.known_hosts = known_hosts
        self.revoked = revoked

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> NoReturn:
        if self.revoked is not None and self.revoked.is_revoked(key):
            raise HostKeyChanged(self.name, f"host key {key.get_name()} {fingerprint(key)} of {hostname} is REVOKED "
                                            f"in {self.known_hosts} (@revoked): refusing to connect")
        raise HostKeyUnknown(
            self.name,
            f"unknown host key for {hostname} ({key.get_name()} {fingerprint(key)}); not in {self.known_hosts}. "
            f"If that fingerprint is right, add the host's key to that file (e.g. from `ssh-keyscan`).",
        )


@dataclass
class RunResult:
    argv: list[str]
    command: str
    exit_status: int
    stdout: bytes
    stderr: bytes
    duration: float
    timed_out: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out

    def out(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    def err(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")

    def tail(self, lines: int = 20) -> list[str]:
        text = (self.out() + ("\n" if self.stdout and self.stderr else "") + self.err()).strip("\n")
        return text.splitlines()[-lines:] if text else []


class _Tail:
    """Keeps the last `limit` bytes written to it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.truncated = False

    def add(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) > self.limit:
            del self.buf[: len(self.buf) - self.limit]
            self.truncated = True


@dataclass
class SSHSession:
    name: str
    host: HostConfig
    client: paramiko.SSHClient | None = None
    _jump: paramiko.SSHClient | None = None
    _sftp: paramiko.SFTPClient | None = None
    _forwards: list[Forward] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- connection -------------------------------------------------------------------------

    def connect(self) -> SSHSession:
        # the forward's accept thread and the job thread may both find a dead transport: one reconnects
        with self._lock:
            if self.client is not None and self.transport_alive():
                return self
            if self.client is not None or self._jump is not None:
                self._close_locked()  # a dead connection: drop its SFTP channel and jump host with it
            return self._connect_locked()

    def _connect_locked(self) -> SSHSession:
        known = self.host.known_hosts.expanduser()
        sock: paramiko.Channel | None = None  # through the jump host
        if self.host.jump is not None:
            self._jump = self._client_for(self.host.jump.address, self.host.jump.port, self.host.jump.user,
                                          self.host.jump.key, known, f"{self.name} (jump host)", None)
            transport = self._jump.get_transport()
            assert transport is not None
            try:
                sock = transport.open_channel("direct-tcpip", (self.host.address, self.host.port), ("127.0.0.1", 0),
                                              timeout=self.host.connect_timeout)
            except (paramiko.SSHException, OSError) as exc:
                self._close_locked()
                raise ConnectFailed(self.name, f"jump host cannot reach {self.host.address}:{self.host.port}: "
                                    f"{exc}") from None
        try:
            self.client = self._client_for(self.host.address, self.host.port, self.host.user, self.host.key, known,
                                           self.name, sock)
        except SSHError:
            self._close_locked()
            raise
        return self

    def _client_for(self, address: str, port: int, user: str, key: Path | None, known: Path, label: str,
                    sock: paramiko.Channel | None) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        if not known.exists():
            raise HostKeyUnknown(label, f"known_hosts file {known} does not exist; specops only connects to hosts "
                                        "whose key is listed there")
        try:
            listed = known_hosts.load(known)
        except known_hosts.KnownHostsError as exc:
            raise HostKeyUnknown(label, str(exc)) from None
        for host, keytype, host_key in listed.entries:
            client.get_host_keys().add(host, keytype, host_key)
        client.set_missing_host_key_policy(_RejectNamingFingerprint(label, known, listed))
        t = self.host.connect_timeout
        try:
            client.connect(
                hostname=address, port=port, username=user,
                key_filename=str(key.expanduser()) if key else None,
                timeout=t, banner_timeout=t, auth_timeout=t, channel_timeout=t,
                allow_agent=key is None, look_for_keys=key is None, sock=sock,
            )
        except SSHError:
            client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyChanged(label, f"host key for {address} CHANGED: it offered {exc.key.get_name()} "
                                        f"{fingerprint(exc.key)}, known_hosts has {fingerprint(exc.expected_key)}. "
                                        "Refusing to connect (possible man-in-the-middle, or a reinstalled host)."
                                 ) from None
        except paramiko.AuthenticationException:
            client.close()
            raise AuthFailed(label, f"authentication refused for {user}@{address}:{port}"
                                    + (f" with key {key}" if key else "")) from None
        except FileNotFoundError as exc:
            client.close()
            raise AuthFailed(label, f"key file not found: {exc.filename}") from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            client.close()
            reason = str(exc) or type(exc).__name__
            if isinstance(exc, socket.timeout | TimeoutError):
                reason = f"timed out after {t:.0f} s"
            raise ConnectFailed(label, f"cannot connect to {address}:{port}: {reason}") from None
        transport = client.get_transport()
        if transport is not None:
            if self.host.keepalive:
                transport.set_keepalive(int(max(1, self.host.keepalive)))
            try:
                # small SSH packets + Nagle + delayed ACK cost ~40 ms per channel open
                transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # type: ignore[union-attr]
            except (OSError, AttributeError):
                pass  # a jump channel is not a TCP socket
        return client

    def transport_alive(self) -> bool:
        t = self.client.get_transport() if self.client else None
        return bool(t and t.is_active())

    def _transport(self) -> paramiko.Transport:
        self.connect()
        assert self.client is not None
        t = self.client.get_transport()
        if t is None or not t.is_active():
            raise HostVanished(self.name, "the SSH connection is closed")
        return t

    def close(self) -> None:
        for fwd in list(self._forwards):
            fwd.close()
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._sftp is not None:
            try:
                self._sftp.close()
            except (OSError, EOFError, paramiko.SSHException):
                pass
            self._sftp = None
        for c in (self.client, self._jump):
            if c is not None:
                c.close()
        self.client = None
        self._jump = None

    def __enter__(self) -> SSHSession:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- commands ---------------------------------------------------------------------------

    @staticmethod
    def command_line(argv: Sequence[str], timeout: float | None = None, background: bool = False) -> str:
        words = [str(a) for a in argv]
        if timeout is not None and not background:
            # the host kills a command we stopped waiting for: nothing is orphaned by a lost session
            words = ["timeout", "-k", "2", f"{max(1, int(timeout + 0.999))}", *words]
        line = shlex.join(words)
        if background:
            # a process outlives the session only with all three standard streams redirected
            line += " </dev/null >/dev/null 2>&1"
        return line

    def run(self, argv: Sequence[str], *, timeout: float = 60.0, stdin: bytes | None = None,
            capture: int = DEFAULT_CAPTURE, background: bool = False) -> RunResult:
        """Run argv on the host; HostVanished if it stops answering past the timeout."""
        command = self.command_line(argv, timeout, background)
        transport = self._transport()
        start = time.monotonic()
        grace = min(3.0, 0.2 * timeout + 0.5)
        deadline = start + timeout + grace
        try:
            chan = transport.open_session(timeout=min(timeout, self.host.connect_timeout))
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self._drop()
            raise HostVanished(self.name, f"cannot open a channel: {exc or type(exc).__name__}") from None
        out, err = _Tail(capture), _Tail(capture)
        try:
            chan.settimeout(0.0)
            chan.exec_command(command)
            if stdin:
                chan.sendall(stdin)
            chan.shutdown_write()
            exited_at: float | None = None
            while True:
                got = False
                while chan.recv_ready():
                    out.add(chan.recv(65536))
                    got = True
                while chan.recv_stderr_ready():
                    err.add(chan.recv_stderr(65536))
                    got = True
                now = time.monotonic()
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    # sshd may send the exit status before the last of the output: only the channel's EOF says all
                    # of it arrived — or, past a short wait, that a child left in the background holds the pipes
                    exited_at = exited_at if exited_at is not None else now
                    if chan.eof_received or now - exited_at > EOF_AFTER_EXIT:
                        break
                if now > deadline:
                    self._drop()
                    raise HostVanished(self.name, f"no answer for {now - start:.0f} s while running "
                                                  f"`{_short(command)}` (timeout {timeout:.0f} s); the host or the "
                                                  "network is gone, the connection is closed")
                if not got:
                    wait = min(0.2, max(0.005, deadline - now))
                    if chan.eof_received:
                        # after EOF the channel's pipe stays readable: wait for the exit status instead
                        chan.status_event.wait(wait)
                    else:
                        select.select([chan], [], [], wait)
            status = chan.recv_exit_status()
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self._drop()
            raise HostVanished(self.name, f"connection lost while running `{_short(command)}`: "
                                          f"{exc or type(exc).__name__}") from None
        finally:
            quiet_close(chan)
        # timeout(1) exits 124 after TERM, 137 when it had to KILL (-k 2)
        timed_out = not background and (status == 124 or (status == 137 and time.monotonic() - start >= timeout))
        return RunResult(argv=[str(a) for a in argv], command=command, exit_status=status, stdout=bytes(out.buf),
                         stderr=bytes(err.buf), duration=time.monotonic() - start, timed_out=timed_out,
                         truncated=out.truncated or err.truncated)

    def _drop(self) -> None:
        """Forget a connection that stopped answering; the next call reconnects."""
        self.close()

    # --- files ------------------------------------------------------------------------------

    def sftp(self) -> paramiko.SFTPClient:
        self._transport()
        if self._sftp is None:
            assert self.client is not None
            try:
                self._sftp = self.client.open_sftp()
                channel = self._sftp.get_channel()
                if channel is not None:
                    channel.settimeout(self.host.connect_timeout)
            except (paramiko.SSHException, OSError, EOFError) as exc:
                self._drop()
                raise HostVanished(self.name, f"cannot open SFTP: {exc or type(exc).__name__}") from None
        return self._sftp

    def put(self, content: bytes, path: str, mode: int = 0o644) -> None:
        """Atomic upload: a temporary name, chmod, then rename over the target."""
        sftp = self.sftp()
        tmp = f"{path}.specops-{uuid.uuid4().hex[:8]}.tmp"
        try:
            with sftp.open(tmp, "wb") as f:
                f.write(content)
            sftp.chmod(tmp, mode)
            sftp.posix_rename(tmp, path)
        except OSError as exc:
            try:
                sftp.remove(tmp)
            except OSError:
                pass
            raise self._sftp_error(exc, f"cannot upload {path}") from None
        except (EOFError, paramiko.SSHException) as exc:
            self._drop()
            raise HostVanished(self.name, f"connection lost uploading {path}: {exc}") from None

    def read_file(self, path: str, max_bytes: int = 1 << 20) -> bytes | None:
        """A small remote file, or None when it does not exist."""
        try:
            with self.sftp().open(path, "rb") as f:
                return bytes(f.read(max_bytes))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._sftp_error(exc, f"cannot read {path}") from None
        except (EOFError, paramiko.SSHException) as exc:
            self._drop()
            raise HostVanished(self.name, f"connection lost reading {path}: {exc}") from None

    def _sftp_error(self, exc: OSError, what: str) -> SSHError:
        """An OSError from SFTP is a file problem, unless the connection under it is gone."""
        if isinstance(exc, TimeoutError | socket.timeout):
            self._drop()
            return HostVanished(self.name, f"{what}: no answer for {self.host.connect_timeout:.0f} s; the host or the "
                                           "network is gone, the connection is closed")
        if not self.transport_alive() or str(exc) == "Socket is closed":
            self._drop()
            return HostVanished(self.name, f"{what}: the connection is gone ({exc})")
        return SSHError(self.name, f"{what}: {exc.strerror or exc}")

    @contextlib.contextmanager
    def random_reader(self, path: str) -> Iterator[tuple[int, Callable[[int, int], bytes]]]:
        """(size, read_at) of a remote file: `read_at(offset, n)` pipelines its SFTP requests (readv), so a
        backwards tail read costs bandwidth, not one round trip per 32 KiB."""
        what = f"cannot read {path}"
        try:
            f = self.sftp().open(path, "rb")
            size = f.stat().st_size or 0
        except OSError as exc:
            raise self._sftp_error(exc, what) from None
        except (EOFError, paramiko.SSHException) as exc:
            self._drop()
            raise HostVanished(self.name, f"connection lost reading {path}: {exc}") from None

        def read_at(offset: int, n: int) -> bytes:
            try:
                return b"".join(f.readv([(offset, n)]))
            except OSError as exc:
                raise self._sftp_error(exc, what) from None
            except (EOFError, paramiko.SSHException) as exc:
                self._drop()
                raise HostVanished(self.name, f"connection lost reading {path}: {exc}") from None

        try:
            yield size, read_at
        finally:
            with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
                f.close()

    def read_from(self, path: str, offset: int, max_bytes: int = 1 << 20) -> tuple[bytes, int]:
        """Bytes of a growing remote file from `offset` (negative: from the end); returns (data, new offset)."""
        try:
            sftp = self.sftp()
            size = sftp.stat(path).st_size or 0
            if offset < 0:
                offset = max(0, size + offset)
            if offset > size:  # the file was truncated or replaced: start again
                offset = 0
            with sftp.open(path, "rb") as f:
                f.seek(offset)
                data = bytes(f.read(min(max_bytes, max(0, size - offset))))
            return data, offset + len(data)
        except FileNotFoundError:
            return b"", 0
        except OSError as exc:
            raise self._sftp_error(exc, f"cannot read {path}") from None
        except (EOFError, paramiko.SSHException) as exc:
            self._drop()
            raise HostVanished(self.name, f"connection lost reading {path}: {exc}") from None

    # --- port forwarding --------------------------------------------------------------------

    def forward(self, remote_port: int, remote_host: str = "127.0.0.1") -> Forward:
        fwd = Forward(self, remote_host, remote_port)
        self._forwards.append(fwd)
        return fwd


def _short(command: str, limit: int = 120) -> str:
    return command if len(command) <= limit else command[: limit - 1] + "…"


class Forward:
    """127.0.0.1:<local_port> on the bot -> remote_host:remote_port as seen from the host.

    The vLLM port stays bound to the host's loopback; only this SSH channel reaches it.
    """

    def __init__(self, session: SSHSession, remote_host: str, remote_port: int) -> None:
        self.session = session
        self.remote = (remote_host, remote_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.local_port: int = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._conns: list[tuple[socket.socket, paramiko.Channel]] = []
        self._thread = threading.Thread(target=self._accept, name=f"forward-{remote_port}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                self._listener.settimeout(0.5)
                conn, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                chan = self.session._transport().open_channel("direct-tcpip", self.remote, peer, timeout=10)
            except (SSHError, paramiko.SSHException, OSError, EOFError):
                conn.close()
                continue
            self._conns.append((conn, chan))
            threading.Thread(target=self._pump, args=(conn, chan), daemon=True).start()

    def _pump(self, conn: socket.socket, chan: paramiko.Channel) -> None:
        try:
            pump(conn, chan, self._closed)
        finally:
            quiet_close(chan)
            conn.close()
            try:
                self._conns.remove((conn, chan))
            except ValueError:
                pass

    def close(self) -> None:
        self._closed.set()
        try:
            # shutdown wakes the accept() of the other thread; close alone leaves the port open until it polls
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._listener.close()
        except OSError:
            pass
        for conn, chan in list(self._conns):
            quiet_close(chan)
            conn.close()
        if self in self.session._forwards:
            self.session._forwards.remove(self)

    def __enter__(self) -> Forward:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = [
    "AuthFailed", "ConnectFailed", "Forward", "HostKeyChanged", "HostKeyUnknown", "HostVanished", "RunResult",
    "SSHError", "SSHSession", "fingerprint"
]
