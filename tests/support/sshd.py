"""A real OpenSSH sshd on 127.0.0.1 for tests, and a TCP relay that can stop relaying.

Lessons from this kind of machine: `/run/sshd` must exist; `StrictModes no`, `UsePAM no`,
`LoginGraceTime 10`; sshd logs to a file, not a pipe; the port is checked free first; clients are
closed in teardown (stopping sshd leaves open sessions alive); known_hosts uses `[127.0.0.1]:PORT`.
"""

from __future__ import annotations

import getpass
import os
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bot.sim import ports

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port() -> int:
    """A port to bind later: outside the ephemeral range that port 0 and outgoing connections draw from."""
    return ports.free_port()


def wait_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


def keygen(path: Path, kind: str = "ed25519") -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)
    return path


@dataclass
class Sshd:
    root: Path
    port: int = 0
    user: str = field(default_factory=getpass.getuser)
    extra_config: list[str] = field(default_factory=list)  # e.g. SetEnv lines for a simulated host
    proc: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.host_key = keygen(self.root / "host_ed25519")
        self.client_key = keygen(self.root / "client_ed25519")
        self.other_key = keygen(self.root / "other_ed25519")
        (self.root / "authorized_keys").write_text(self.client_key.with_suffix(".pub").read_text())
        os.chmod(self.root / "authorized_keys", 0o600)
        self.log = self.root / "sshd.log"

    @property
    def known_hosts(self) -> Path:
        path = self.root / "known_hosts"
        if not path.exists():
            pub = self.host_key.with_suffix(".pub").read_text().split()
            path.write_text(f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n")
        return path

    def start(self) -> Sshd:
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        config = self.root / "sshd_config"
        # sshd keeps only the first SetEnv line it reads: every variable goes on one line
        env = [line.split(None, 1)[1] for line in self.extra_config if line.startswith("SetEnv ")]
        extra = [line for line in self.extra_config if not line.startswith("SetEnv ")]
        if env:
            extra.append("SetEnv " + " ".join(env))
        config.write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {self.host_key}",
            f"AuthorizedKeysFile {self.root / 'authorized_keys'}", f"PidFile {self.root / 'sshd.pid'}",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "PubkeyAuthentication yes",
            "PermitRootLogin prohibit-password", "StrictModes no", "UsePAM no", "LoginGraceTime 10",
            "MaxStartups 100:30:200", "MaxSessions 100", "ClientAliveInterval 0", "UseDNS no",
            "AllowTcpForwarding yes", "Subsystem sftp internal-sftp", "LogLevel ERROR", *extra, "",
        ]))
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config), "-E", str(self.log)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        try:
            wait_port(self.port, time.monotonic() + 10)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"sshd did not start: {self.log.read_text() if self.log.exists() else ''}") from None
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the process group we created
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.proc = None


class TcpRelay:
    """127.0.0.1:<port> -> 127.0.0.1:<target>; `pause()` stops relaying without closing anything,
    which looks to both ends like a host that vanished from the network."""

    def __init__(self, target: int) -> None:
        self.target = target
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = int(self._listener.getsockname()[1])
        self._paused = threading.Event()
        self._closed = threading.Event()
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:  # the host behind it is gone (stopped by the test): the client sees a closed connection
                client.close()
                continue
            self._socks += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while not self._closed.is_set():
                if self._paused.is_set():
                    time.sleep(0.05)
                    continue
                readable, _, _ = select.select([a, b], [], [], 0.1)
                for src in readable:
                    if self._paused.is_set():
                        break
                    data = src.recv(65536)
                    if not data:
                        return
                    (b if src is a else a).sendall(data)
        except OSError:
            return

    def pause(self) -> None:
        self._paused.set()

    def resume(self) -> None:
        """Relay again: the network is back, the bytes held on both sides flow."""
        self._paused.clear()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for s in self._socks:
            try:
                s.close()
            except OSError:
                pass
