"""An in-process SSH server (paramiko server mode): exec, SFTP and direct-tcpip, on 127.0.0.1.

Commands run through the real `/bin/sh` with the simulated host's PATH (fake `vllm`,
`nvidia-smi`) and working directory; SFTP and port forwards are confined to the host's root
directory and to loopback.
"""

from __future__ import annotations

import io
import logging
import os
import select
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from paramiko.common import (
    AUTH_FAILED,
    AUTH_SUCCESSFUL,
    MSG_CHANNEL_REQUEST,
    OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED,
    OPEN_SUCCEEDED,
)
from paramiko.sftp import SFTP_OK

from bot.remote.pump import pump, quiet_close

# paramiko logs a reset connection at ERROR; a client going away is normal for the sim
_LOG = logging.getLogger("specops.sim.ssh")
_LOG.addHandler(logging.NullHandler())
_LOG.propagate = False


def new_ed25519(path: Path) -> paramiko.Ed25519Key:
    """A fresh ed25519 key in OpenSSH format at `path` (paramiko cannot generate ed25519 itself)."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                            serialization.NoEncryption())
    path.write_bytes(pem)
    path.chmod(0o600)
    pk = paramiko.Ed25519Key.from_private_key(io.StringIO(pem.decode()))
    path.with_suffix(".pub").write_text(f"{pk.get_name()} {pk.get_base64()} specops-sim\n")
    return pk


class _Server(paramiko.ServerInterface):
    def __init__(self, sim: SimSSHServer) -> None:
        self.sim = sim
        self.direct: dict[int, tuple[str, int]] = {}
        self.execs: dict[int, str] = {}  # channel id -> its command, accepted but not yet acknowledged

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        if key.asbytes() in self.sim.authorized:
            return int(AUTH_SUCCESSFUL)
        return int(AUTH_FAILED)

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return int(OPEN_SUCCEEDED)
        return int(OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED)

    def check_channel_direct_tcpip_request(self, chanid: int, origin: tuple[str, int],
                                           destination: tuple[str, int]) -> int:
        if destination[0] not in ("127.0.0.1", "localhost"):
            return int(OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED)  # the sim only reaches its own loopback
        self.direct[chanid] = ("127.0.0.1", int(destination[1]))
        return int(OPEN_SUCCEEDED)

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        # started by _Transport once the request is acknowledged: a command that ends at once would otherwise
        # close its channel before the reply, and the client's exec sees "Channel closed." (the command ran)
        self.execs[channel.get_id()] = command.decode("utf-8", "replace")
        return True

    def start_exec(self, channel: paramiko.Channel) -> None:
        command = self.execs.pop(channel.get_id(), None)
        if command is None:
            return
        try:
            threading.Thread(target=self.sim.run_exec, args=(channel, command), daemon=True).start()
        except RuntimeError as exc:  # no thread to run it (the machine is out of them): the client hears why
            self.sim.commands.append(command)
            try:
                channel.sendall_stderr(f"sh: cannot run the command: {exc}\n".encode())
                channel.send_exit_status(126)
            except (OSError, EOFError, paramiko.SSHException):
                pass
            quiet_close(channel)

    def check_channel_subsystem_request(self, channel: paramiko.Channel, name: str) -> bool:
        return bool(super().check_channel_subsystem_request(channel, name))


class _Transport(paramiko.Transport):
    """paramiko's server transport, but an exec's command starts only after the request's reply is sent, as
    OpenSSH's sshd orders it: paramiko sends the reply after `check_channel_exec_request` returns, so a command
    started there races it, and a short one (a `cat`) could send its exit status and close the channel first.
    The client's exec then fails with "Channel closed." (seen under load, several execs on one connection)."""

    def _request_then_start(self, chan: paramiko.Channel, m: paramiko.Message) -> None:
        paramiko.Channel._handle_request(chan, m)  # type: ignore[attr-defined]  # check_*_request, then the reply
        server = self.server_object
        if isinstance(server, _Server):
            server.start_exec(chan)

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock)
        table = dict(paramiko.Transport._channel_handler_table)  # type: ignore[attr-defined]
        table[MSG_CHANNEL_REQUEST] = self._request_then_start
        self._channel_handler_table = table


class _Handle(paramiko.SFTPHandle):
    def __init__(self, f: Any, flags: int) -> None:
        super().__init__(flags)
        self.readfile = f
        self.writefile = f
        self._f = f

    def stat(self) -> Any:
        try:
            return paramiko.SFTPAttributes.from_stat(os.fstat(self._f.fileno()))
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno or 13)

    def chattr(self, attr: paramiko.SFTPAttributes) -> int:
        return int(SFTP_OK)


def _done(fn: Callable[..., object], *args: str) -> int:
    fn(*args)
    return int(SFTP_OK)


class _SFTP(paramiko.SFTPServerInterface):
    """Real files, confined to the simulated host's root."""

    def __init__(self, server: _Server, *args: Any, **kwargs: Any) -> None:
        super().__init__(server, *args, **kwargs)
        self.root = server.sim.root.resolve()

    def _real(self, path: str) -> str:
        real = os.path.realpath(path if path.startswith("/") else os.path.join(self.root, path))
        if real != str(self.root) and not real.startswith(str(self.root) + os.sep):
            raise PermissionError(13, "outside the simulated host's root", path)
        return real

    def _call(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno or 13)

    def canonicalize(self, path: str) -> str:
        return path if path.startswith("/") else os.path.join(self.root, path)

    def open(self, path: str, flags: int, attr: paramiko.SFTPAttributes) -> Any:
        def go() -> Any:
            real = self._real(path)
            mode = getattr(attr, "st_mode", None) or 0o644
            fd = os.open(real, flags | getattr(os, "O_BINARY", 0), mode & 0o7777)
            if flags & os.O_WRONLY:
                fm = "ab" if flags & os.O_APPEND else "wb"
            elif flags & os.O_RDWR:
                fm = "a+b" if flags & os.O_APPEND else "r+b"
            else:
                fm = "rb"
            return _Handle(os.fdopen(fd, fm), flags)
        return self._call(go)

    def list_folder(self, path: str) -> Any:
        def go() -> Any:
            real = self._real(path)
            out = []
            for name in os.listdir(real):
                attr = paramiko.SFTPAttributes.from_stat(os.lstat(os.path.join(real, name)))
                attr.filename = name
                out.append(attr)
            return out
        return self._call(go)

    def stat(self, path: str) -> Any:
        return self._call(lambda: paramiko.SFTPAttributes.from_stat(os.stat(self._real(path))))

    def lstat(self, path: str) -> Any:
        return self._call(lambda: paramiko.SFTPAttributes.from_stat(os.lstat(self._real(path))))

    def remove(self, path: str) -> Any:
        return self._call(lambda: _done(os.remove, self._real(path)))

    def rename(self, oldpath: str, newpath: str) -> Any:
        return self._call(lambda: _done(os.rename, self._real(oldpath), self._real(newpath)))

    def posix_rename(self, oldpath: str, newpath: str) -> Any:
        return self._call(lambda: _done(os.replace, self._real(oldpath), self._real(newpath)))

    def mkdir(self, path: str, attr: paramiko.SFTPAttributes) -> Any:
        return self._call(lambda: _done(os.mkdir, self._real(path)))

    def rmdir(self, path: str) -> Any:
        return self._call(lambda: _done(os.rmdir, self._real(path)))

    def chattr(self, path: str, attr: paramiko.SFTPAttributes) -> Any:
        def go() -> Any:
            real = self._real(path)
            if attr.st_mode is not None:
                os.chmod(real, attr.st_mode & 0o7777)
            return int(SFTP_OK)
        return self._call(go)


class SimSSHServer:
    """Listens on 127.0.0.1:<port>; one thread per connection."""

    def __init__(self, root: Path, host_key: paramiko.PKey, authorized: list[paramiko.PKey], env: dict[str, str],
                 port: int = 0) -> None:
        self.root = root
        self.host_key = host_key
        self.authorized = {k.asbytes() for k in authorized}
        self.env = env
        self.commands: list[str] = []  # every command run, in order: tests check what ran (and what did not)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(32)
        self.port: int = self._sock.getsockname()[1]
        self._sock.settimeout(0.5)  # here, not in the accept thread: a server closed at once has no socket left
        self._closed = threading.Event()
        self._transports: list[paramiko.Transport] = []
        self._thread = threading.Thread(target=self._accept_loop, name="sim-sshd", daemon=True)

    def start(self) -> SimSSHServer:
        self._thread.start()
        return self

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport = _Transport(conn)
        transport.set_log_channel("specops.sim.ssh")
        transport.add_server_key(self.host_key)
        transport.set_subsystem_handler("sftp", paramiko.SFTPServer, _SFTP)
        server = _Server(self)
        self._transports.append(transport)
        try:
            transport.start_server(server=server)
        except (paramiko.SSHException, EOFError, OSError):
            return
        # paramiko's transport holds its channels weakly and a dropped Channel closes itself (__del__): a session
        # must be held here until it closes, or it closes as soon as `chan` names the next channel (or None after
        # a quiet half second) and an exec request that comes later finds it gone ("Channel closed." under load)
        sessions: list[paramiko.Channel] = []
        try:
            while transport.is_active() and not self._closed.is_set():
                sessions[:] = [c for c in sessions if not c.closed]
                chan = transport.accept(timeout=0.5)
                if chan is None:
                    continue
                dest = server.direct.pop(chan.get_id(), None)
                if dest is not None:
                    threading.Thread(target=self._pump_tcp, args=(chan, dest), daemon=True).start()
                else:
                    sessions.append(chan)
        finally:
            if transport in self._transports:
                self._transports.remove(transport)

    def run_exec(self, chan: paramiko.Channel, command: str) -> None:
        self.commands.append(command)
        try:
            proc = subprocess.Popen(["/bin/sh", "-c", command], cwd=self.root, env=self.env,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            chan.sendall_stderr(f"sh: {exc}\n".encode())
            chan.send_exit_status(127)
            quiet_close(chan)
            return
        assert proc.stdin and proc.stdout and proc.stderr

        def feed_stdin() -> None:
            assert proc.stdin is not None
            try:
                while True:
                    data = chan.recv(65536)
                    if not data:
                        break
                    proc.stdin.write(data)
                    proc.stdin.flush()
            except (OSError, EOFError, paramiko.SSHException):
                pass
            finally:
                try:
                    proc.stdin.close()
                except OSError:
                    pass

        threading.Thread(target=feed_stdin, daemon=True).start()
        streams = {proc.stdout.fileno(): chan.sendall, proc.stderr.fileno(): chan.sendall_stderr}
        try:
            while streams:
                readable, _, _ = select.select(list(streams), [], [], 1.0)
                for fd in readable:
                    data = os.read(fd, 65536)
                    if not data:
                        del streams[fd]
                    else:
                        streams[fd](data)
            rc = proc.wait()
            # the exit status must be sent before the channel closes, or clients see -1
            chan.send_exit_status(rc)
        except (OSError, EOFError, paramiko.SSHException):
            proc.kill()
            proc.wait()
        finally:
            proc.stdout.close()
            proc.stderr.close()
            quiet_close(chan)

    def _pump_tcp(self, chan: paramiko.Channel, dest: tuple[str, int]) -> None:
        try:
            sock = socket.create_connection(dest, timeout=5)
        except OSError:
            quiet_close(chan)
            return
        try:
            pump(sock, chan, self._closed)
        finally:
            sock.close()
            quiet_close(chan)

    def close(self) -> None:
        self._closed.set()
        try:
            self._sock.close()
        except OSError:
            pass
        for t in self._transports:
            t.close()
