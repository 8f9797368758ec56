"""Reaching a GPU host: the one way use cases open a session, and where specops keeps its files there.

Use cases never import `bot.remote`: they take a `HostPool` from the object graph (app/services.py) and
name the host; the pool knows the inventory. `RemoteLayout` is the one statement of the remote file layout
the playbooks write and everything else reads (the server's config, PID, log and metadata).
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.config import Config
from bot.remote.ssh import Forward, HostVanished, RunResult, SSHError, SSHSession

HostSession = SSHSession
HostError = SSHError

__all__ = ["Forward", "HostError", "HostPool", "HostSession", "HostVanished", "RemoteLayout", "RunResult"]


@dataclass(frozen=True)
class RemoteLayout:
    """The files a deployment keeps under the host's `workdir`."""

    workdir: str

    @property
    def config_file(self) -> str:
        return f"{self.workdir}/server.yaml"

    @property
    def pid_file(self) -> str:
        return f"{self.workdir}/server.pid"

    @property
    def log_file(self) -> str:
        return f"{self.workdir}/server.log"

    @property
    def meta_file(self) -> str:
        return f"{self.workdir}/server.json"


class HostPool:
    """Sessions to the inventory's hosts, opened on demand (a session is connected on first use, or on
    `with`). One per object graph: two graphs never share a session."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def session(self, name: str) -> HostSession:
        return SSHSession(name, self.config.host(name))

    def layout(self, name: str) -> RemoteLayout:
        return RemoteLayout(self.config.host(name).workdir)
