"""A real PostgreSQL (Debian's `postgresql` package, installed by .ci/run) for the tests: one server per session,
initialised in a temporary directory, listening on 127.0.0.1 at a free port and on a unix socket in that
directory, stopped by its PID.

PostgreSQL refuses to run as root. As root the server runs as the package's own `postgres` system user (or
`nobody` where that user is missing): the temporary directory is given to that user, and nothing else on the
machine changes — the package's cluster in /var/lib/postgresql is never started. As any other user it runs as
that user.

The superuser is `specops` with a SCRAM-SHA-256 password from SPECOPS_TEST_PG_PASSWORD (a random one when that
is unset); the database `specops` exists. Speed over durability: fsync is off (a test server's data dies with
the session anyway).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.support.sshd import free_port

PASSWORD_ENV = "SPECOPS_TEST_PG_PASSWORD"
USER = "specops"
DATABASE = "specops"
SERVER_USERS = ("postgres", "nobody")  # as root: the first of these that exists runs the server


def bin_dir() -> Path | None:
    """The newest installed PostgreSQL's bin directory (Debian keeps initdb/postgres off PATH)."""
    found = [Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/postgres")]
    found.sort(key=lambda b: int(b.parent.name) if b.parent.name.isdigit() else 0)
    if found:
        return found[-1]
    on_path = shutil.which("postgres")
    return Path(on_path).parent if on_path else None


def missing_reason() -> str | None:
    """Why no PostgreSQL can be started here, or None when one can."""
    bindir = bin_dir()
    if bindir is None or not (bindir / "initdb").exists():
        return "PostgreSQL is not installed (.ci/run installs Debian's postgresql package)"
    if os.geteuid() == 0 and _server_user() is None:
        return f"running as root and none of the users {', '.join(SERVER_USERS)} exists to run PostgreSQL"
    return None


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: ourselves unless root, since PostgreSQL will not run as root."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    for name in SERVER_USERS:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    return None


class Postgres:
    """One PostgreSQL server in `root`; `url` is the SQLAlchemy URL of its `specops` database."""

    def __init__(self, password: str | None = None) -> None:
        reason = missing_reason()
        assert reason is None, reason
        bindir, user = bin_dir(), _server_user()
        assert bindir is not None and user is not None
        self.bindir, self.user = bindir, user
        self.password = password or os.environ.get(PASSWORD_ENV) or secrets.token_urlsafe(18)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        # not under pytest's tmp_path: its 0700 parents keep the server's user out
        self.root = Path(tempfile.mkdtemp(prefix="specops-pg-"))
        os.chown(self.root, user.pw_uid, user.pw_gid)
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"

    @property
    def url(self) -> str:
        return self.url_for(DATABASE)

    def url_for(self, database: str, password: str | None = None) -> str:
        secret = self.password if password is None else password
        return f"postgresql+psycopg://{USER}:{quote(secret, safe='')}@127.0.0.1:{self.port}/{database}"

    def _run(self, *argv: str, stdout: Any = None, stderr: Any = None) -> subprocess.Popen[bytes]:
        """A PostgreSQL program as the server's user, in its own session (so a Ctrl-C of pytest reaches it only
        through stop())."""
        root = os.geteuid() == 0
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "HOME": str(self.root)}
        return subprocess.Popen([str(self.bindir / argv[0]), *argv[1:]], cwd=self.root, env=env,
                                start_new_session=True, stdin=subprocess.DEVNULL,
                                user=self.user.pw_uid if root else None, group=self.user.pw_gid if root else None,
                                extra_groups=[] if root else None, stdout=stdout, stderr=stderr)

    def _initdb(self) -> None:
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        os.chown(pwfile, self.user.pw_uid, self.user.pw_gid)
        os.chmod(pwfile, 0o600)
        try:
            proc = self._run("initdb", "-D", str(self.data), "-U", USER, f"--pwfile={pwfile}",
                             "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync",
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            out, _ = proc.communicate(timeout=120)
        finally:
            pwfile.unlink(missing_ok=True)
        if proc.returncode != 0:
            raise RuntimeError(f"initdb failed ({proc.returncode}): {out.decode(errors='replace')[-2000:]}")

    def start(self) -> Postgres:
        self._initdb()
        self.port = free_port()
        self._launch()
        try:
            self._wait_ready(time.monotonic() + 60)
            self._create_database(DATABASE)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = self._run(
                "postgres", "-D", str(self.data), "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
                "-c", f"unix_socket_directories={self.root}", "-c", "fsync=off", "-c", "synchronous_commit=off",
                "-c", "full_page_writes=off", "-c", "max_connections=200",
                stdout=log, stderr=subprocess.STDOUT)

    def halt(self) -> None:
        """A fast shutdown that keeps the data (a restart's first half): every session ends."""
        proc, self.proc = self.proc, None
        assert proc is not None and proc.poll() is None
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)

    def restart(self) -> None:
        """The same server, data and port again (the second half)."""
        assert self.proc is None
        self._launch()
        self._wait_ready(time.monotonic() + 60)

    def _wait_ready(self, deadline: float) -> None:
        """Ready when pg_isready says the server accepts connections (not just that the port is bound)."""
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited ({self.proc.returncode}): {self.log.read_text()[-2000:]}")
            probe = self._run("pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-d", "postgres",
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if probe.wait(timeout=10) == 0:
                return
            time.sleep(0.05)
        raise TimeoutError(f"PostgreSQL did not accept connections on 127.0.0.1:{self.port}: "
                           f"{self.log.read_text()[-2000:]}")

    def _create_database(self, name: str) -> None:
        import psycopg  # the driver the bot uses; imported late so a missing PostgreSQL skips before it matters

        with psycopg.connect(host="127.0.0.1", port=self.port, user=USER, password=self.password,
                             dbname="postgres", autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def create_database(self, name: str) -> str:
        """A fresh database on this server (a test that needs an empty store); its SQLAlchemy URL."""
        self._create_database(name)
        return self.url_for(name)

    def stop(self) -> None:
        """Fast shutdown (SIGINT to the postmaster by its PID: what `pg_ctl stop -m fast` sends), then the
        temporary directory goes."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the session this module started
                proc.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


def running_postgres() -> Iterator[Postgres]:
    """A started server for a fixture to yield, stopped after; skipped, with the reason, where PostgreSQL is not
    installed."""
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    server = Postgres().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Postgres]:
    """One PostgreSQL for the whole session (a start costs about a second)."""
    yield from running_postgres()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: Postgres) -> str:
    """`postgresql+psycopg://specops:PASSWORD@127.0.0.1:PORT/specops` of the session's server."""
    return postgres_server.url
