"""The state store: host locks, deployments, and the record of what ran, over SQLAlchemy Core.

`settings.state` is a path (one SQLite file, the embedded default) or a SQLAlchemy URL (PostgreSQL, for more
than one replica). Opening the store brings its schema to the newest Alembic revision (bot/migrations), in
one transaction: a revision that fails leaves the schema as it was and the store does not open.

Each call is one short transaction that writes as if alone: SQLite's BEGIN IMMEDIATE, a transaction-scoped
advisory lock on PostgreSQL (so a read-then-write, like taking a lock, is never raced by another replica).
On SQLite, WAL mode lets the bot, the scheduler and a CLI read while another writes. Chat turns queue
their audit rows for one writer thread (`audit_queue`), which commits what is queued in one transaction;
what a row is for waits for `AuditRow.committed()`.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import socket
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy import event, exc

from bot.config import is_state_url
from bot.core.durations import spoken
from bot.core.startup import StartupHistory, StartupRun
from bot.errors import MigrationFailed, OperationError, StoreRefused, StoreUnavailable
from bot.redact import Redactor

# The script the releases before migrations ran at every open (CREATE TABLE IF NOT EXISTS; their ALTER TABLEs
# added columns since): what the baseline revision brings such a file forward from. Not run any more; tests
# build an old state file from it.
SCHEMA = """
CREATE TABLE IF NOT EXISTS locks (
    host TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    operation TEXT NOT NULL,
    started_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS deployments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    profile TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    pid INTEGER,
    status TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    detail TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS deployments_host ON deployments(host, id);
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    at REAL NOT NULL,
    up INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS samples_host ON samples(host, at);
CREATE TABLE IF NOT EXISTS incidents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    host TEXT NOT NULL,
    state TEXT NOT NULL,
    opened_at REAL NOT NULL,
    resolved_at REAL,
    channel TEXT,
    ts TEXT,
    title TEXT NOT NULL,
    timeline TEXT NOT NULL DEFAULT '[]'
);
CREATE UNIQUE INDEX IF NOT EXISTS incidents_open_key ON incidents(key) WHERE state != 'resolved';
CREATE TABLE IF NOT EXISTS log_cursors (
    host TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    head TEXT NOT NULL,
    offset INTEGER NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS report_runs (
    report TEXT NOT NULL,
    period TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (report, period)
);
CREATE TABLE IF NOT EXISTS startup_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host TEXT NOT NULL,
    profile TEXT NOT NULL,
    at REAL NOT NULL,
    ready_seconds REAL NOT NULL,
    phases TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS startup_runs_key ON startup_runs(host, profile, id);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at REAL NOT NULL,
    finished_at REAL,
    source TEXT NOT NULL,
    team TEXT,
    user TEXT,
    channel TEXT,
    text TEXT NOT NULL,
    command TEXT,
    plan_id TEXT,
    result TEXT NOT NULL DEFAULT 'started',
    detail TEXT NOT NULL DEFAULT ''
);
"""


LEGACY_TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA))

log = logging.getLogger("specops.store")

READ_TIMEOUT = 0.25  # a read-only scrape waits this long at most (a checkpoint, a WAL reset)
STARTUP_KEEP = 20  # starts kept per host and profile
STARTUP_ESTIMATE_FROM = 3  # the newest starts the estimate is the median of
CLAIM_STALE = 600.0  # a report claimed this long ago and not posted: its claimant died or Slack failed
AUDIT_WAIT = 30.0  # what waits for an audit row waits this long at most (SQLite's own busy timeout is 10 s)
IncidentState = Literal["open", "acknowledged", "resolved"]
DeploymentStatus = Literal["running", "serving", "failed", "stopped"]


class LockHeld(OperationError):
    def __init__(self, host: str, owner: str, operation: str, started_at: float, lease: str = "") -> None:
        age = time.time() - started_at
        super().__init__(f"{host} is busy: {operation} by {owner}, started {spoken(age)} ago "
                         f"({time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(started_at))})"
                         + (f"; {lease}" if lease else ""))
        self.host, self.owner, self.operation, self.started_at = host, owner, operation, started_at


class AuditNotWritten(OperationError):
    """The audit row could not be committed: what it was for must not run."""


class AuditRow:
    """An audit row queued for the store's writer thread. `committed()` waits until it is in the
    database (committed, so a crash still leaves it) and returns its id."""

    __slots__ = ("_done", "_error", "_id")

    def __init__(self) -> None:
        self._done = threading.Event()
        self._id: int | None = None
        self._error: str | None = None

    def committed(self, timeout: float = AUDIT_WAIT) -> int:
        if not self._done.wait(timeout):
            raise AuditNotWritten(f"the audit record was not written within {timeout:.0f} s")
        if self._error is not None or self._id is None:
            raise AuditNotWritten(f"the audit record could not be written: {self._error}")
        return self._id

    def _resolve(self, error: str | None) -> None:
        if error is not None:
            self._id, self._error = None, error
        self._done.set()


@dataclass
class _AuditOp:
    """One queued audit write: a new row (`values`), the outcome of `row` (`result`), or a flush marker."""

    row: AuditRow | None = None
    values: tuple[Any, ...] | None = None  # the audit columns of _INSERT, text and detail not yet redacted
    result: str | None = None
    detail: str = ""
    at: float = 0.0
    flushed: threading.Event | None = None


_AUDIT_COLUMNS = ("started_at", "finished_at", "source", "team", "user", "channel", "text", "plan_id", "result",
                  "detail")
# "user" quoted: a reserved word on PostgreSQL
_INSERT = ('INSERT INTO audit(started_at, finished_at, source, team, "user", channel, text, plan_id, result, detail) '
           "VALUES (:started_at, :finished_at, :source, :team, :user, :channel, :text, :plan_id, :result, :detail)")


def boot_id() -> str:
    """This machine's boot and PID namespace: a PID from another boot, another machine or another container
    (which shares the host's boot but not its PIDs) says nothing about the processes here."""
    boot = _kernel_boot()
    try:
        space = os.readlink("/proc/self/ns/pid")
    except OSError:
        return boot
    return f"{boot}/{space.removeprefix('pid:[').rstrip(']')}" if boot else ""


def _kernel_boot() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def this_boot(boot: str | None) -> bool:
    """Was `boot` recorded by a process whose PIDs this one sees? A row of a release before namespaces
    holds the kernel's boot alone."""
    if not boot:
        return False
    return boot == boot_id() or ("/" not in boot and boot == _kernel_boot())


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat from field 3 on (state, ppid, …): the command name (field 2) may hold spaces and parens."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def process_start(pid: int) -> int | None:
    """When PID started, in clock ticks since boot (/proc/PID/stat field 22): with the boot id, it names one
    process for good, where a PID alone is reused (a restarted container's bot is PID 1 again)."""
    fields = _stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def holder_gone(pid: int | None, boot: str | None, started: int | None = None) -> bool:
    """Is the process that took a lock gone? Only knowable for a lock taken in this boot of this machine.
    `started`: the holder's start time (process_start); a live process with that PID but another start time
    is another process that reused the PID, this one's included."""
    if pid is None or not this_boot(boot):
        return False  # an old lock without a holder, or one from elsewhere: only its age or --force breaks it
    if started is not None:
        now = process_start(pid)
        if now is None or now != started:
            return True  # gone, or its PID is someone else's now
    elif pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    fields = _stat(pid)  # a zombie holds nothing
    return fields is not None and len(fields) > 0 and fields[0] == "Z"


@dataclass
class Deployment:
    id: int
    host: str
    profile: str
    fingerprint: str
    pid: int | None
    status: str
    started_at: float
    finished_at: float | None
    detail: dict[str, Any]


@dataclass
class AuditEntry:
    id: int
    started_at: float
    finished_at: float | None
    source: str
    team: str | None
    user: str | None
    channel: str | None
    text: str
    command: str | None
    plan_id: str | None
    result: str
    detail: str


@dataclass
class Incident:
    id: int
    key: str
    host: str
    state: IncidentState
    opened_at: float
    resolved_at: float | None
    channel: str | None
    ts: str | None
    title: str
    timeline: list[dict[str, Any]]
    # what still fires, by fingerprint: {"source": "alertmanager" | "watch", "kind", "title", "since"}
    active: dict[str, dict[str, Any]] = field(default_factory=dict)

    def active_from(self, source: str) -> list[str]:
        return sorted(fp for fp, a in self.active.items() if a.get("source") == source)


LEASE = 30.0  # a host lock, or a replica's lead, not renewed for this long is expired (settings.lease_seconds)
SEEN_KEEP = 3600.0  # Slack retries a delivery within minutes: its id is kept this long


def replica_id() -> str:
    """This process among the bots on one store: machine, PID and the PID's start (a reused PID is another)."""
    me = os.getpid()
    return f"{socket.gethostname()}/{me}/{process_start(me) or 0}"


@dataclass
class Replica:
    id: str
    machine: str
    pid: int
    started_at: float
    heartbeat: float
    leader: bool
    detail: str


@dataclass
class ReplicaView:
    """A replica as `specops replicas` shows it: alive while its heartbeat is younger than the lease."""

    id: str
    machine: str
    pid: int
    started_at: float
    heartbeat_age: float
    leader: bool
    alive: bool


@dataclass
class RolloutRecord:
    """A rollout as the store keeps it: its plan (hosts, batches, gate) and how far it got, per host."""

    id: str
    profile: str
    owner: str
    state: str  # running | passed | failed | cancelled | aborted | restored
    plan: dict[str, Any]
    progress: dict[str, Any]
    started_at: float
    updated_at: float
    holder_gone: bool  # its process is gone (a SIGKILL, a crash): --resume or --abort may act on it


@dataclass
class LostJob:
    """A job whose replica stopped before it finished (see Store.lost_jobs), with where its plan was posted."""

    id: str
    replica: str
    command: str
    requester: str
    channel: str | None
    thread_ts: str | None
    message_ts: str | None


@dataclass
class RunningJob:
    """A job some replica runs, as the shared store knows it."""

    id: str
    replica: str
    command: str
    requester: str
    cancel_by: str | None
    replica_silent: float | None  # seconds since its replica last beat
    replica_alive: bool


MIGRATIONS = Path(__file__).resolve().parent / "migrations"  # Alembic's script directory, shipped in the package
ACK_WAIT = 2.0  # s: Slack wants an acknowledgement within 3 s; what the store cannot say by then, it is away for
MIGRATE_WAIT = 120.0  # s: how long an open waits for another process opening (migrating) the same SQLite file
OPEN_TIMEOUT = 10.0  # how long a connection, or a write waiting for another writer, may take (SQLite's busy timeout)
_WRITE_LOCK = zlib.crc32(b"specops.store.write")  # PostgreSQL: the advisory lock every store transaction holds
_MIGRATE_LOCK = zlib.crc32(b"specops.store.migrate")  # PostgreSQL: one replica brings the schema forward at a time


def _dbapi_errors() -> tuple[type[Exception], ...]:
    """The DBAPI's own error base: a raw connection (`Engine.raw_connection()`, the leader's seat) raises the
    driver's errors unwrapped (psycopg.OperationalError when PostgreSQL restarts)."""
    try:
        import psycopg
    except ImportError:  # SQLite only: no server driver installed
        return ()
    return (psycopg.Error,)


# what a database's trouble raises through SQLAlchemy, a raw sqlite3 call or a raw psycopg connection: a caller that
# can wait catches these
DATABASE_ERRORS: tuple[type[Exception], ...] = (exc.SQLAlchemyError, sqlite3.Error, *_dbapi_errors())


@dataclass(frozen=True)
class StateTarget:
    """Where the state lives: a SQLAlchemy URL (password filled in), and the SQLite file if it is one."""

    url: sa.URL
    path: Path | None

    @property
    def shown(self) -> str:
        """What a message names: the file, or the URL with its password masked."""
        return str(self.path) if self.path is not None else self.url.render_as_string(hide_password=True)


def state_target(state: str | os.PathLike[str], password_env: str | None = None) -> StateTarget:
    """`settings.state` (a path or a SQLAlchemy URL) as the URL the store connects to. A URL without a password
    takes the one in the environment variable `password_env`."""
    if not is_state_url(state):
        path = Path(state).expanduser()
        return StateTarget(sa.URL.create("sqlite", database=str(path)), path)
    url = sa.make_url(str(state))
    if url.get_backend_name() == "sqlite":
        if not url.database or url.database == ":memory:":
            raise StoreRefused(f"{state}: a SQLite state is a file (sqlite:////path/specops.db, or the path)")
        return StateTarget(url, Path(url.database).expanduser())
    if not url.password and password_env:
        password = os.environ.get(password_env)
        if not password:
            raise StoreRefused(f"no password for the state store {url.render_as_string(hide_password=True)}: "
                                   f"settings.state_password_env names {password_env}, which is not set")
        url = url.set(password=password)
    return StateTarget(url, None)


@lru_cache(maxsize=256)
def _sql(statement: str) -> sa.TextClause:
    return sa.text(statement)


def _sqlite_engine(url: sa.URL, timeout: float, *, pool: bool) -> sa.Engine:
    """SQLite through pysqlite with the driver's own transaction handling off (isolation_level None), so BEGIN
    IMMEDIATE is issued by us on every begin: DDL is then transactional too (a failed migration rolls back)."""
    engine = sa.create_engine(url, connect_args={"timeout": timeout, "check_same_thread": False,
                                                 "isolation_level": None},
                              poolclass=sa.pool.StaticPool if pool else sa.pool.NullPool)
    if pool:  # the store's own connection (not a probe's)
        event.listen(engine, "connect", _pragmas)
    event.listen(engine, "begin", _begin_immediate)
    return engine


def _pragmas(dbapi: Any, _record: Any) -> None:
    dbapi.execute("PRAGMA journal_mode=WAL")
    # WAL + NORMAL: durable across a crash of the bot (not of the machine's power), no fsync per write
    dbapi.execute("PRAGMA synchronous=NORMAL")


def _begin_immediate(conn: sa.Connection) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def _pg_engine(url: sa.URL, timeout: float) -> sa.Engine:
    # lock_timeout: a write waiting for another replica's gives up like SQLite's busy timeout, never hangs;
    # keepalives and the TCP user timeout: a server gone from the network is noticed, not waited on for minutes
    secs = max(1, int(timeout))
    return sa.create_engine(url, pool_pre_ping=True, connect_args={
        "connect_timeout": secs, "options": f"-c lock_timeout={int(timeout * 1000)}",
        "application_name": "specops", "keepalives": 1, "keepalives_idle": secs, "keepalives_interval": 1,
        "keepalives_count": 3, "tcp_user_timeout": secs * 1000})


# PostgreSQL's words when the server answered and said no: waiting cannot help
_REFUSED = re.compile(r"password authentication failed|no password supplied|database \"[^\"]*\" does not exist|"
                      r"role \"[^\"]*\" does not exist|no pg_hba.conf entry", re.IGNORECASE)
class Store:
    def __init__(self, path: str | os.PathLike[str], redactor: Redactor, *, password_env: str | None = None,
                 migrations: Path | None = None, lease: float = LEASE) -> None:
        self.redactor = redactor
        self.lease = lease
        self.replica = replica_id()
        # the host locks this process holds: a thread renews their lease while there are any
        self._held: set[str] = set()
        self._renewer: threading.Thread | None = None
        self._nested: dict[str, tuple[str, int]] = {}  # host -> (owner, how many takes) of the locks held here
        self._ack_pool: ThreadPoolExecutor | None = None  # first_delivery's: an ack waits ACK_WAIT s at most
        self._renew_stop = threading.Event()
        if is_state_url(path):  # its password is said nowhere (the config's redactor may not have seen it)
            redactor.learn_url(str(path))
        self.target = state_target(path, password_env)
        redactor.add_secret(self.target.url.password if isinstance(self.target.url.password, str) else None)
        self.path = self.target.path  # the SQLite file (None on a database server)
        self._pg = self.target.url.get_backend_name() == "postgresql"
        # one connection per SQLite Store, writes serialized by a Python lock: threads of this process never meet
        # in SQLite's busy handler (which sleeps 1..100 ms and made acknowledgements slow under a burst)
        self._lock = threading.Lock()
        if self._pg:
            self._engine = _pg_engine(self.target.url, OPEN_TIMEOUT)
        else:
            assert self.path is not None  # state_target gives every SQLite state its file
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._engine = _sqlite_engine(self.target.url, OPEN_TIMEOUT, pool=True)
        # audit rows go through one writer thread (started on first use), so a chat turn queues its row and
        # answers at once; what the row is for waits for `AuditRow.committed()` before it starts
        self._audit_queue: queue.SimpleQueue[_AuditOp | None] = queue.SimpleQueue()
        self._audit_thread: threading.Thread | None = None
        self._audit_lock = threading.Lock()
        self._closed = False
        self._db: sa.Connection | None = None
        try:
            with self._lock:
                self._open(migrations or MIGRATIONS)
        except BaseException:
            self._engine.dispose()
            raise
        self._read_engine = self._make_reader()  # connects only when /metrics first reads

    def _open(self, migrations: Path) -> None:
        try:
            with _one_migrator(None if self._pg else self.path):
                migrate(self._engine, migrations, self._pg)
        except MigrationFailed as failed:
            raise MigrationFailed(self.redactor.text(f"{self.target.shown}: {failed}")) from None
        except exc.OperationalError as error:  # connecting: the server is down, the password refused
            reason = _reason(error)
            kind = StoreRefused if _REFUSED.search(reason) else StoreUnavailable
            raise kind(self.redactor.text(f"cannot open the state store {self.target.shown}: {reason}")) from None

    @contextmanager
    def _conn(self) -> Iterator[sa.Connection]:
        with self._lock:
            if self._pg:
                with self._engine.begin() as db:
                    # what BEGIN IMMEDIATE is to SQLite: one writing transaction at a time, across replicas
                    db.execute(_sql("SELECT pg_advisory_xact_lock(:key)"), {"key": _WRITE_LOCK})
                    yield db
                return
            if self._db is None:  # SQLite: the one connection, kept (a checkout per call cost more than the call)
                self._db = self._engine.connect()
            with self._db.begin():
                yield self._db

    def _insert(self, db: sa.Connection, statement: str, params: dict[str, Any]) -> int:
        """INSERT one row, its new id (RETURNING on PostgreSQL; SQLite's lastrowid, which needs no 3.35)."""
        if self._pg:
            return int(db.execute(_sql(statement + " RETURNING id"), params).scalar_one())
        return int(db.execute(_sql(statement), params).lastrowid or 0)

    def close(self) -> None:
        self._renew_stop.set()
        if self._ack_pool is not None:
            self._ack_pool.shutdown(wait=False, cancel_futures=True)
        with self._audit_lock:
            self._closed = True
            thread = self._audit_thread
        if thread is not None:
            self._audit_queue.put(None)  # after every queued row: they are written, then the writer stops
            thread.join(timeout=AUDIT_WAIT)
        with self._lock:
            if self._db is not None:
                self._db.close()
            self._engine.dispose()
            self._read_engine.dispose()

    # --- locks -------------------------------------------------------------------------------

    def acquire(self, host: str, owner: str, operation: str) -> str | None:
        """Take HOST's lock, a lease this process renews while it holds it. A lock whose holder is gone (this
        machine: its process is not running) or whose lease expired (another machine: not renewed for
        `lease` s) is taken over; returns what was taken over, said in words. The owner that holds it through
        this store may take it again (a rollout holds its hosts while each deploy takes its own): the lock goes
        at the last release."""
        with self._audit_lock:
            nested = self._nested.get(host)
            if nested is not None and nested[0] == owner:
                self._nested[host] = (owner, nested[1] + 1)
                return None
        with self._conn() as db:
            row = db.execute(_sql("SELECT owner, operation, started_at, pid, boot_id, pid_start, heartbeat, replica "
                                  "FROM locks WHERE host = :host"), {"host": host}).fetchone()
            taken_over = None
            now = time.time()
            if row is not None:
                taken_over = self._takeover(host, row, now)
                db.execute(_sql("DELETE FROM locks WHERE host = :host"), {"host": host})
            me = os.getpid()
            db.execute(_sql("INSERT INTO locks(host, owner, operation, started_at, pid, boot_id, heartbeat, pid_start, "
                            "replica) VALUES (:host, :owner, :operation, :now, :pid, :boot, :now, :start, :replica)"),
                       {"host": host, "owner": owner, "operation": operation, "now": now, "pid": me,
                        "boot": boot_id(), "start": process_start(me), "replica": self.replica})
        with self._audit_lock:
            self._nested[host] = (owner, 1)
        self._hold(host)
        return taken_over

    def _takeover(self, host: str, row: Any, now: float) -> str:
        """Why the lock in `row` may be taken, or LockHeld."""
        owner, operation, started, pid, boot, pid_start, beat, replica = row
        if holder_gone(pid, boot, pid_start):
            return f"{operation} by {owner} (its process {pid} is gone)"
        whose = f"{operation} by {owner} (replica {replica})"
        if this_boot(boot) or not replica or beat is None:
            # this machine's live holder; or a lock of a release before leases, which nothing renews
            raise LockHeld(host, owner, operation, started)
        silent = now - float(beat)
        if silent < self.lease:
            raise LockHeld(host, owner, operation, started,
                           lease=f"its lease was renewed {spoken(silent)} ago and expires in "
                                 f"{spoken(self.lease - silent)} unless renewed")
        return f"{whose}: its lease expired, not renewed for {spoken(silent)} (the lease is {spoken(self.lease)})"

    def _hold(self, host: str) -> None:
        with self._audit_lock:
            self._held.add(host)
            if self._renewer is None or not self._renewer.is_alive():
                self._renewer = threading.Thread(target=self._renew, name="specops-lease", daemon=True)
                self._renewer.start()

    def _renew(self) -> None:
        """Every third of the lease: this process's locks are renewed; ends when it holds none."""
        while not self._renew_stop.wait(self.lease / 3):
            with self._audit_lock:
                held = sorted(self._held)
            if not held:
                return
            try:
                self.renew_leases()
            except DATABASE_ERRORS as error:  # the next beat tries again; the lease has two more beats
                log.warning("could not renew the lease of %s: %s", ", ".join(held), _reason(error))

    def renew_leases(self) -> None:
        with self._conn() as db:
            db.execute(_sql("UPDATE locks SET heartbeat = :now WHERE replica = :replica"),
                       {"now": time.time(), "replica": self.replica})

    def lock_stale(self, host: str) -> bool:
        """The lock's holder process is gone (a SIGKILLed bot): nothing holds it any more."""
        with self._conn() as db:
            row = db.execute(_sql("SELECT pid, boot_id, pid_start FROM locks WHERE host = :host"),
                             {"host": host}).fetchone()
        return row is not None and holder_gone(row[0], row[1], row[2])

    def release(self, host: str, owner: str) -> None:
        with self._audit_lock:
            nested = self._nested.get(host)
            if nested is not None and nested[0] == owner and nested[1] > 1:
                self._nested[host] = (owner, nested[1] - 1)
                return
            self._nested.pop(host, None)
        with self._conn() as db:
            db.execute(_sql("DELETE FROM locks WHERE host = :host AND owner = :owner"), {"host": host, "owner": owner})
        with self._audit_lock:
            self._held.discard(host)

    def break_lock(self, host: str) -> bool:
        with self._audit_lock:
            self._nested.pop(host, None)
        with self._conn() as db:
            return db.execute(_sql("DELETE FROM locks WHERE host = :host"), {"host": host}).rowcount > 0

    def lock_of(self, host: str) -> tuple[str, str, float] | None:
        with self._conn() as db:
            row = db.execute(_sql("SELECT owner, operation, started_at FROM locks WHERE host = :host"),
                             {"host": host}).fetchone()
        return (row[0], row[1], row[2]) if row else None

    # --- deployments -------------------------------------------------------------------------

    def record_deployment(self, host: str, profile: str, fingerprint: str, status: DeploymentStatus,
                          pid: int | None = None, detail: dict[str, Any] | None = None) -> int:
        me = os.getpid()
        with self._conn() as db:
            return self._insert(db, "INSERT INTO deployments(host, profile, fingerprint, pid, status, started_at, "
                                "detail, holder_pid, holder_boot, holder_start) VALUES (:host, :profile, :fp, :pid, "
                                ":status, :at, :detail, :me, :boot, :start)",
                                {"host": host, "profile": profile, "fp": fingerprint, "pid": pid, "status": status,
                                 "at": time.time(), "detail": json.dumps(self.redactor.obj(detail or {})), "me": me,
                                 "boot": boot_id(), "start": process_start(me)})

    def update_deployment(self, dep_id: int, *, status: DeploymentStatus | None = None, pid: int | None = None,
                          detail: dict[str, Any] | None = None, finished: bool = False) -> None:
        with self._conn() as db:
            if status is not None:
                db.execute(_sql("UPDATE deployments SET status = :status WHERE id = :id"),
                           {"status": status, "id": dep_id})
            if status == "serving":
                # one server per host: what served (or was being deployed) there before this one is gone now
                # (in the same transaction, so no reader sees two serving rows)
                row = db.execute(_sql("SELECT host FROM deployments WHERE id = :id"), {"id": dep_id}).fetchone()
                if row is not None:
                    self._end_rows(db, "host = :host AND id < :id AND status IN ('serving', 'running')",
                                   {"host": row[0], "id": dep_id}, "stopped", f"superseded by deployment #{dep_id}")
            if pid is not None:
                db.execute(_sql("UPDATE deployments SET pid = :pid WHERE id = :id"), {"pid": pid, "id": dep_id})
            if detail is not None:
                db.execute(_sql("UPDATE deployments SET detail = :detail WHERE id = :id"),
                           {"detail": json.dumps(self.redactor.obj(detail)), "id": dep_id})
            if finished:
                db.execute(_sql("UPDATE deployments SET finished_at = :at WHERE id = :id"),
                           {"at": time.time(), "id": dep_id})

    def stop_deployments(self, host: str, why: str) -> int:
        """The host's server was stopped: its serving rows say so (how many there were)."""
        with self._conn() as db:
            return self._end_rows(db, "host = :host AND status = 'serving'", {"host": host}, "stopped", why)

    def reconcile_deployments(self, host: str | None = None) -> int:
        """End the `running` rows whose run is gone (SIGKILLed, the machine restarted): they become `failed`,
        with why. How many rows changed."""
        with self._conn() as db:
            return self._reconcile(db, host)

    def _reconcile(self, db: sa.Connection, host: str | None) -> int:
        where = "status = 'running'" if host is None else "status = 'running' AND host = :host"
        rows = db.execute(_sql(f"SELECT id, host, holder_pid, holder_boot, holder_start FROM deployments "
                               f"WHERE {where}"), {"host": host}).fetchall()
        changed = 0
        for dep_id, dep_host, pid, boot, started in rows:
            if pid is not None and this_boot(boot):
                if not holder_gone(pid, boot, started):
                    continue  # its run is still going
                why = f"the run that wrote it (pid {pid}) is gone"
            else:
                # written before rows knew their run, or in another boot: a deploy holds the host's lock while it
                # runs, so a row whose host has no live lock has no run behind it
                lock = db.execute(_sql("SELECT pid, boot_id, pid_start FROM locks WHERE host = :host"),
                                  {"host": dep_host}).fetchone()
                if lock is not None and not holder_gone(lock[0], lock[1], lock[2]):
                    continue
                why = (f"the run that wrote it (pid {pid}) is gone" if pid is not None
                       else f"the run that wrote it is gone ({dep_host} holds no lock)")
            changed += self._end_rows(db, "id = :id", {"id": dep_id}, "failed", why)
        return changed

    def _end_rows(self, db: sa.Connection, where: str, args: dict[str, Any], status: DeploymentStatus,
                  why: str) -> int:
        """Rows matching `where` take `status`, a finish time if they had none, and `why` as their message
        (what the row said before stays in its detail)."""
        now = time.time()
        rows = db.execute(_sql(f"SELECT id, detail FROM deployments WHERE {where}"), args).fetchall()
        for dep_id, raw in rows:
            try:
                detail = json.loads(raw or "{}")
            except ValueError:
                detail = {}
            if not isinstance(detail, dict):
                detail = {}
            if "message" in detail:
                detail["before"] = detail["message"]
            detail["message"] = why
            db.execute(_sql("UPDATE deployments SET status = :status, finished_at = COALESCE(finished_at, :now), "
                            "detail = :detail WHERE id = :id"),
                       {"status": status, "now": now, "detail": json.dumps(self.redactor.obj(detail)), "id": dep_id})
        return len(rows)

    def latest_deployment(self, host: str) -> Deployment | None:
        """The host's latest row, reconciled first: a row whose run is gone does not read as `running`."""
        with self._conn() as db:
            self._reconcile(db, host)
            row = db.execute(_sql("SELECT id, host, profile, fingerprint, pid, status, started_at, finished_at, "
                                  "detail FROM deployments WHERE host = :host ORDER BY id DESC LIMIT 1"),
                             {"host": host}).fetchone()
        if row is None:
            return None
        return Deployment(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], json.loads(row[8] or "{}"))

    # --- audit ---------------------------------------------------------------------------------

    def audit_queue(self, *, source: str, text: str, team: str | None = None, user: str | None = None,
                    channel: str | None = None, plan_id: str | None = None, result: str = "started",
                    closed: bool = False, detail: str = "") -> AuditRow:
        """Queue an audit row and return at once (no SQLite call here: a Slack acknowledgement does not
        wait on a commit). `closed`: a turn that ran nothing (help, usage), its whole row in one write.
        Whatever the row is for starts only after `committed()` returned."""
        now = time.time()
        row = AuditRow()
        self._audit_put(_AuditOp(row, (now, now if closed else None, source, team, user, channel, text[:2000], plan_id,
                                       result, detail[:4000])))
        return row

    def audit_queue_end(self, row: AuditRow, result: str, detail: str = "") -> None:
        """Queue the row's outcome (written after the row itself: one queue, in order)."""
        self._audit_put(_AuditOp(row, result=result, detail=detail[:4000], at=time.time()))

    def audit_flush(self, timeout: float = AUDIT_WAIT) -> None:
        """Wait until every audit write queued so far is committed (readers in this process see them)."""
        with self._audit_lock:
            if self._audit_thread is None or self._closed:
                return
        done = threading.Event()
        self._audit_put(_AuditOp(flushed=done))
        done.wait(timeout)

    def _audit_put(self, op: _AuditOp) -> None:
        with self._audit_lock:
            if self._closed:
                if op.row is not None and op.values is not None:
                    op.row._resolve("the store is closed")
                if op.flushed is not None:
                    op.flushed.set()
                return
            if self._audit_thread is None:
                self._audit_thread = threading.Thread(target=self._audit_writer, name="specops-audit", daemon=True)
                self._audit_thread.start()
            self._audit_queue.put(op)

    def _audit_writer(self) -> None:
        """Take all that is queued and write it in one transaction (a burst of slash commands: one commit)."""
        while True:
            batch = [self._audit_queue.get()]
            while True:
                try:
                    batch.append(self._audit_queue.get_nowait())
                except queue.Empty:
                    break
            ops = [op for op in batch if op is not None]
            try:
                self._audit_write(ops)
            except Exception:  # one bad write does not sink the others: one transaction each
                for op in ops:
                    try:
                        self._audit_write([op])
                    except Exception as exc:
                        log.warning("audit write failed: %s: %s", type(exc).__name__, exc)
                        if op.row is not None and op.values is not None:
                            op.row._resolve(f"{type(exc).__name__}: {exc}")
            for op in ops:
                if op.flushed is not None:
                    op.flushed.set()
            if len(ops) < len(batch):
                return  # close(): everything queued before it is written

    def _audit_write(self, ops: list[_AuditOp]) -> None:
        def r(text: str) -> str:
            # PostgreSQL's text holds no NUL (SQLite's does): a pasted NUL must not make the row unwritable
            said = self.redactor.text(text)
            return said.replace("\x00", "\ufffd") if self._pg else said

        inserted: list[AuditRow] = []
        try:
            with self._conn() as db:
                for op in ops:
                    if op.row is None:
                        continue
                    if op.values is not None:
                        v = op.values
                        op.row._id = self._insert(db, _INSERT, dict(zip(_AUDIT_COLUMNS, (
                            *v[:6], r(v[6]), v[7], v[8], r(v[9]) if v[9] else ""), strict=True)))
                        inserted.append(op.row)
                    elif op.result is not None and op.row._id is not None:
                        db.execute(_sql("UPDATE audit SET finished_at = :at, result = :result, detail = :detail "
                                        "WHERE id = :id"),
                                   {"at": op.at, "result": op.result, "detail": r(op.detail), "id": op.row._id})
        except BaseException:
            for row in inserted:
                row._id = None  # rolled back
            raise
        for row in inserted:
            row._resolve(None)

    def audit_list(self, limit: int = 50) -> list[AuditEntry]:
        self.audit_flush()  # what this process queued is there
        with self._conn() as db:
            rows = db.execute(_sql('SELECT id, started_at, finished_at, source, team, "user", channel, text, command, '
                                   "plan_id, result, detail FROM audit ORDER BY id DESC LIMIT :limit"),
                              {"limit": limit}).fetchall()
        return [AuditEntry(*row) for row in rows]

    # --- startup phases (the /health wait's estimate) --------------------------------------------

    def record_startup(self, host: str, profile: str, run: StartupRun, keep: int = STARTUP_KEEP) -> None:
        """One start of PROFILE on HOST that reached ready: its phases' times, for the next start's estimate
        (only the newest `keep` of each host and profile are kept)."""
        with self._conn() as db:
            db.execute(_sql("INSERT INTO startup_runs(host, profile, at, ready_seconds, phases) "
                            "VALUES (:host, :profile, :at, :ready, :phases)"),
                       {"host": host, "profile": profile, "at": time.time(), "ready": run.ready_seconds,
                        "phases": json.dumps([list(p) for p in run.phases])})
            db.execute(_sql("DELETE FROM startup_runs WHERE host = :host AND profile = :profile AND id NOT IN "
                            "(SELECT id FROM startup_runs WHERE host = :host AND profile = :profile "
                            "ORDER BY id DESC LIMIT :keep)"), {"host": host, "profile": profile, "keep": keep})

    def startup_history(self, host: str, profile: str, limit: int = STARTUP_ESTIMATE_FROM) -> StartupHistory:
        """The newest starts of PROFILE on HOST, newest first (none yet: an empty history)."""
        with self._conn() as db:
            rows = db.execute(_sql("SELECT ready_seconds, phases FROM startup_runs WHERE host = :host AND "
                                   "profile = :profile ORDER BY id DESC LIMIT :limit"),
                              {"host": host, "profile": profile, "limit": limit}).fetchall()
        runs = []
        for ready, phases in rows:
            try:
                pairs = tuple((str(k), float(v)) for k, v in json.loads(phases))
            except (ValueError, TypeError):
                continue  # a row written by hand or damaged: the others still make an estimate
            runs.append(StartupRun(float(ready), pairs))
        return StartupHistory(tuple(runs))

    # --- samples (watches) ----------------------------------------------------------------------

    def add_sample(self, host: str, up: bool, data: dict[str, Any], at: float | None = None) -> None:
        with self._conn() as db:
            db.execute(_sql("INSERT INTO samples(host, at, up, data) VALUES (:host, :at, :up, :data)"),
                       {"host": host, "at": at or time.time(), "up": int(up),
                        "data": json.dumps(self.redactor.obj(data))})

    def samples(self, host: str, since: float = 0.0, limit: int = 100_000) -> list[tuple[float, bool, dict[str, Any]]]:
        with self._conn() as db:
            rows = db.execute(_sql("SELECT at, up, data FROM samples WHERE host = :host AND at >= :since "
                                   "ORDER BY at DESC LIMIT :limit"),
                              {"host": host, "since": since, "limit": limit}).fetchall()
        return [(r[0], bool(r[1]), json.loads(r[2])) for r in reversed(rows)]

    @contextmanager
    def _reader(self) -> Iterator[sa.Connection]:
        """A read-only connection of its own: a plain SELECT takes no write lock and waits for no writer
        (WAL; PostgreSQL's MVCC), neither another process's nor this process's Python lock, so /metrics never
        hangs on one."""
        with self._read_engine.connect() as db:
            if self._pg:  # this transaction only: it ends (rolled back) when the connection goes back to the pool
                db.exec_driver_sql("SET TRANSACTION READ ONLY")
                db.exec_driver_sql(f"SET LOCAL statement_timeout = {int(READ_TIMEOUT * 1000)}")
            yield db

    def _make_reader(self) -> sa.Engine:
        if self._pg:
            return _pg_engine(self.target.url, READ_TIMEOUT * 4)
        assert self.path is not None
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        return sa.create_engine("sqlite://", poolclass=sa.pool.NullPool, creator=lambda: sqlite3.connect(
            uri, uri=True, timeout=READ_TIMEOUT, isolation_level=None, check_same_thread=False))

    def read_open_incident_count(self) -> int:
        """How many incidents are not resolved, read without waiting for the write lock."""
        with self._reader() as db:
            return int(db.execute(_sql("SELECT COUNT(*) FROM incidents WHERE state != 'resolved'")).scalar_one())

    def read_last_up_watch(self) -> dict[str, float]:
        """Per host, when a watch last found the server up; waits for no write lock (the bot's own /metrics)."""
        with self._reader() as db:
            rows = db.execute(_sql("SELECT host, MAX(at) FROM samples WHERE up = 1 GROUP BY host")).fetchall()
        return {r[0]: float(r[1]) for r in rows}

    def read_serving(self) -> dict[str, str]:
        """Per host, the profile its latest deployment row serves (hosts whose latest row is not serving are left
        out); waits for no write lock (the bot's own /metrics exports it for the alert rules and the dashboard)."""
        with self._reader() as db:
            rows = db.execute(_sql("SELECT d.host, d.profile FROM deployments d WHERE d.status = 'serving' AND "
                                   "d.id = (SELECT MAX(e.id) FROM deployments e WHERE e.host = d.host)")).fetchall()
        return {r[0]: r[1] for r in rows if r[1]}

    def write_probe(self, timeout: float = 1.0) -> str | None:
        """None if a write to the database commits now; else why not. Its own short-lived connection,
        so a lock held elsewhere or a vanished file shows here instead of in the next deploy."""
        if self.path is not None and not self.path.is_file():
            return f"{self.path} is gone"
        engine = (_pg_engine(self.target.url, timeout) if self._pg
                  else _sqlite_engine(self.target.url, timeout, pool=False))
        try:
            with engine.begin() as db:
                db.execute(_sql("INSERT INTO health(id, at) VALUES (1, :at) ON CONFLICT(id) DO UPDATE SET at = "
                                "excluded.at"), {"at": time.time()})
        except DATABASE_ERRORS as error:
            return self.redactor.text(f"cannot write {self.target.shown}: {_reason(error)}")
        finally:
            engine.dispose()
        return None

    def prune_samples(self, older_than: float) -> None:
        with self._conn() as db:
            db.execute(_sql("DELETE FROM samples WHERE at < :at"), {"at": older_than})

    # --- replicas (more than one bot on one store) ------------------------------------------------

    def beat(self, leader: bool, detail: str = "", started_at: float | None = None) -> None:
        """This replica is alive (and leads, or not): its row, and the lease of every lock it holds."""
        now = time.time()
        with self._conn() as db:
            db.execute(_sql("INSERT INTO replicas(id, machine, pid, started_at, heartbeat, leader, detail) VALUES "
                            "(:id, :machine, :pid, :started, :now, :leader, :detail) ON CONFLICT(id) DO UPDATE SET "
                            "heartbeat = excluded.heartbeat, leader = excluded.leader, detail = excluded.detail"),
                       {"id": self.replica, "machine": socket.gethostname(), "pid": os.getpid(),
                        "started": started_at or now, "now": now, "leader": int(leader), "detail": detail})
            if leader:  # one row says it leads: a dead leader's row does not say so any more
                db.execute(_sql("UPDATE replicas SET leader = 0 WHERE id != :id AND leader = 1"), {"id": self.replica})
            db.execute(_sql("UPDATE locks SET heartbeat = :now WHERE replica = :id"), {"now": now, "id": self.replica})
            db.execute(_sql("DELETE FROM replicas WHERE heartbeat < :old"), {"old": now - 86400.0})
            db.execute(_sql("DELETE FROM slack_seen WHERE at < :old"), {"old": now - SEEN_KEEP})

    def leave(self) -> None:
        """A replica that stops says so: its row goes."""
        with self._conn() as db:
            db.execute(_sql("DELETE FROM replicas WHERE id = :id"), {"id": self.replica})

    def replicas(self) -> list[Replica]:
        with self._conn() as db:
            rows = db.execute(_sql("SELECT id, machine, pid, started_at, heartbeat, leader, detail FROM replicas "
                                   "ORDER BY started_at")).fetchall()
        return [Replica(r[0], r[1], int(r[2]), float(r[3]), float(r[4]), bool(r[5]), r[6]) for r in rows]

    def first_delivery(self, key: str, what: str = "") -> str | None:
        """None for the first replica that takes Slack's delivery `key` (an event id, a command's trigger id);
        for a later one, which replica took it. Across replicas: the row is in the shared store (PostgreSQL).
        SQLite is one replica's store, and the bot's own memory of deliveries suffices: nothing is written, so
        an acknowledgement never waits for the file's write lock. On PostgreSQL the one INSERT is atomic by
        itself: it takes neither the store's write lock nor this process's (a chat ack waits for no other call)."""
        if not self._pg:
            return None
        with self._audit_lock:
            if self._ack_pool is None:
                self._ack_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="specops-ack")
            pool = self._ack_pool
        future = pool.submit(self._first_delivery, key, what)
        try:
            return future.result(timeout=ACK_WAIT)
        except FutureTimeout:
            future.add_done_callback(lambda done: self._late_delivery(done, key))
            raise StoreUnavailable(f"the state store did not answer within {spoken(ACK_WAIT)}") from None

    def _late_delivery(self, done: Future[str | None], key: str) -> None:
        """An INSERT that went through after its acknowledgement said the store was away: nothing ran, so
        Slack's retry must not find the delivery taken."""
        if done.exception() is None and done.result() is None:
            try:
                self.forget_delivery(key)
            except DATABASE_ERRORS as error:
                log.warning("could not forget delivery %s: %s", key, _reason(error))

    def _first_delivery(self, key: str, what: str) -> str | None:
        with self._engine.begin() as db:
            cur = db.execute(_sql("INSERT INTO slack_seen(key, at, replica, what) VALUES (:key, :at, :replica, :what) "
                                  "ON CONFLICT DO NOTHING"),
                             {"key": key, "at": time.time(), "replica": self.replica,
                              "what": self.redactor.text(what)[:200]})
            if cur.rowcount == 1:
                return None
            row = db.execute(_sql("SELECT replica FROM slack_seen WHERE key = :key"), {"key": key}).fetchone()
        return str(row[0]) if row else "another replica"

    def forget_delivery(self, key: str) -> None:
        """The delivery did not go through: Slack's retry may run it."""
        if not self._pg:
            return
        with self._engine.begin() as db:
            db.execute(_sql("DELETE FROM slack_seen WHERE key = :key"), {"key": key})

    # --- plans awaiting their confirm button (shared: the press may reach any replica) ------------

    def save_plan(self, plan_id: str, command: str, team: str | None, user: str, channel: str,
                  thread_ts: str | None, expires_at: float) -> None:
        with self._conn() as db:
            db.execute(_sql('INSERT INTO plans(id, command, team, "user", channel, thread_ts, expires_at, state) '
                            "VALUES (:id, :command, :team, :user, :channel, :thread, :expires, 'pending')"),
                       {"id": plan_id, "command": self.redactor.text(command), "team": team, "user": user,
                        "channel": channel, "thread": thread_ts, "expires": expires_at})
            db.execute(_sql("DELETE FROM plans WHERE expires_at < :old"), {"old": time.time() - 3600.0})

    def plan_message(self, plan_id: str, message_ts: str | None) -> None:
        with self._conn() as db:
            db.execute(_sql("UPDATE plans SET message_ts = :ts WHERE id = :id"), {"ts": message_ts, "id": plan_id})

    def plan_row(self, plan_id: str) -> tuple[str, str | None, str, str, str | None, float, str | None, str] | None:
        """(command, team, user, channel, thread_ts, expires_at, message_ts, state)."""
        with self._conn() as db:
            row = db.execute(_sql('SELECT command, team, "user", channel, thread_ts, expires_at, message_ts, state '
                                  "FROM plans WHERE id = :id"), {"id": plan_id}).fetchone()
        return (row[0], row[1], row[2], row[3], row[4], float(row[5]), row[6], row[7]) if row else None

    def settle_plan(self, plan_id: str, state: str) -> str | None:
        """Move a pending plan to `state` once across replicas: None if this call did, else its state now."""
        with self._conn() as db:
            done = db.execute(_sql("UPDATE plans SET state = :state WHERE id = :id AND state = 'pending' "
                                   "AND expires_at >= :now"), {"state": state, "id": plan_id, "now": time.time()})
            if done.rowcount == 1:
                return None
            db.execute(_sql("UPDATE plans SET state = 'expired' WHERE id = :id AND state = 'pending'"),
                       {"id": plan_id})
            row = db.execute(_sql("SELECT state FROM plans WHERE id = :id"), {"id": plan_id}).fetchone()
        return str(row[0]) if row else "unknown"

    @property
    def shared(self) -> bool:
        """More than one replica may use this store (PostgreSQL): what a replica holds in memory, it shares."""
        return self._pg

    # --- running jobs (shared: a Cancel press may reach a replica other than the one running the job) ---

    def job_started(self, job_id: str, command: str, requester: str) -> None:
        with self._conn() as db:
            db.execute(_sql("INSERT INTO jobs(id, replica, command, requester, started_at) "
                            "VALUES (:id, :replica, :command, :requester, :now)"),
                       {"id": job_id, "replica": self.replica, "command": self.redactor.text(command),
                        "requester": requester, "now": time.time()})

    def job_finished(self, job_id: str) -> None:
        with self._conn() as db:
            db.execute(_sql("DELETE FROM jobs WHERE id = :id"), {"id": job_id})

    def running_job(self, job_id: str) -> RunningJob | None:
        """The job as its replica recorded it, with how long ago that replica last beat (None: never)."""
        with self._conn() as db:
            row = db.execute(_sql("SELECT j.replica, j.command, j.requester, j.cancel_by, r.heartbeat FROM jobs j "
                                  "LEFT JOIN replicas r ON r.id = j.replica WHERE j.id = :id"),
                             {"id": job_id}).fetchone()
        if row is None:
            return None
        silent = None if row[4] is None else max(0.0, time.time() - float(row[4]))
        return RunningJob(job_id, row[0], row[1], row[2], row[3], silent, silent is not None and silent < self.lease)

    def lost_jobs(self, silent_for: float) -> list[LostJob]:
        """Jobs whose replica has not beaten for `silent_for` s (or has no row any more): that replica is gone and
        the job with it. Each is claimed by deleting its row (so one replica reports it), its plan becomes `lost`
        and the plan's audit rows still open are closed."""
        now = time.time()
        out: list[LostJob] = []
        with self._conn() as db:
            rows = db.execute(_sql("SELECT j.id, j.replica, j.command, j.requester FROM jobs j LEFT JOIN replicas r "
                                   "ON r.id = j.replica WHERE (r.id IS NULL OR r.heartbeat < :old) "
                                   "AND j.started_at < :old AND j.replica != :me"),
                             {"old": now - silent_for, "me": self.replica}).fetchall()
            for job_id, replica, command, requester in rows:
                if db.execute(_sql("DELETE FROM jobs WHERE id = :id AND replica = :replica"),
                              {"id": job_id, "replica": replica}).rowcount != 1:
                    continue  # another replica claimed it
                plan = db.execute(_sql("SELECT channel, thread_ts, message_ts FROM plans WHERE id = :id"),
                                  {"id": job_id}).fetchone()
                db.execute(_sql("UPDATE plans SET state = 'lost' WHERE id = :id"), {"id": job_id})
                db.execute(_sql("UPDATE audit SET result = 'lost', finished_at = :now, detail = :detail "
                                "WHERE plan_id = :id AND finished_at IS NULL"),
                           {"now": now, "id": job_id, "detail": f"replica {replica} stopped before the job finished"})
                out.append(LostJob(str(job_id), str(replica), str(command), str(requester),
                                   *(plan if plan is not None else (None, None, None))))
        return out

    def request_cancel(self, job_id: str, by: str) -> bool:
        """Ask the job's replica to cancel it; False if the job is over (its row is gone)."""
        with self._conn() as db:
            return db.execute(_sql("UPDATE jobs SET cancel_by = :by, cancel_at = :now WHERE id = :id"),
                              {"by": by, "now": time.time(), "id": job_id}).rowcount == 1

    def cancels(self) -> list[str]:
        """This replica's jobs that someone asked (on any replica) to cancel."""
        with self._reader() as db:
            rows = db.execute(_sql("SELECT id FROM jobs WHERE replica = :replica AND cancel_at IS NOT NULL"),
                              {"replica": self.replica}).fetchall()
        return [str(r[0]) for r in rows]

    # --- rollouts (a record that `rollout --resume` / `--abort` act on after a crash) ----------------

    def rollout_begin(self, rollout_id: str, profile: str, owner: str, plan: dict[str, Any],
                      progress: dict[str, Any]) -> None:
        me = os.getpid()
        with self._conn() as db:
            db.execute(_sql("INSERT INTO rollouts(id, profile, owner, state, plan, progress, started_at, updated_at, "
                            "pid, boot_id, pid_start, replica) VALUES (:id, :profile, :owner, 'running', :plan, "
                            ":progress, :now, :now, :pid, :boot, :start, :replica)"),
                       {"id": rollout_id, "profile": profile, "owner": owner, "plan": json.dumps(plan),
                        "progress": json.dumps(self.redactor.obj(progress)), "now": time.time(), "pid": me,
                        "boot": boot_id(), "start": process_start(me), "replica": self.replica})

    def rollout_update(self, rollout_id: str, *, progress: dict[str, Any] | None = None, state: str | None = None,
                       resumed: bool = False) -> None:
        """Save where the rollout is; `resumed`: this process carries it on (its holder is this one now)."""
        sets = ["updated_at = :now"]
        args: dict[str, Any] = {"id": rollout_id, "now": time.time()}
        if progress is not None:
            sets.append("progress = :progress")
            args["progress"] = json.dumps(self.redactor.obj(progress))
        if state is not None:
            sets.append("state = :state")
            args["state"] = state
        if resumed:
            me = os.getpid()
            sets += ["pid = :pid", "boot_id = :boot", "pid_start = :start", "replica = :replica"]
            args.update(pid=me, boot=boot_id(), start=process_start(me), replica=self.replica)
        with self._conn() as db:
            db.execute(_sql(f"UPDATE rollouts SET {', '.join(sets)} WHERE id = :id"), args)

    def rollouts(self, state: str | None = None, limit: int = 20) -> list[RolloutRecord]:
        """The latest rollouts first; `state`: only those in it ('running': begun and not ended)."""
        where = "WHERE state = :state " if state else ""
        with self._conn() as db:
            rows = db.execute(_sql("SELECT id, profile, owner, state, plan, progress, started_at, updated_at, pid, "
                                   f"boot_id, pid_start FROM rollouts {where}ORDER BY started_at DESC LIMIT :limit"),
                              {"state": state, "limit": limit}).fetchall()
        return [RolloutRecord(r[0], r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]), float(r[6]), float(r[7]),
                              holder_gone(r[8], r[9], r[10])) for r in rows]

    # --- incidents ------------------------------------------------------------------------------

    def open_incident(self, key: str, host: str, title: str, event: dict[str, Any]) -> tuple[Incident, bool]:
        """The open incident for `key`, creating it if there is none: (incident, created)."""
        with self._conn() as db:
            row = db.execute(_sql(_INCIDENT_SELECT + " WHERE key = :key AND state != 'resolved'"),
                             {"key": key}).fetchone()
            if row is not None:
                return _incident(row), False
            now = time.time()
            new_id = self._insert(db, "INSERT INTO incidents(key, host, state, opened_at, title, timeline) "
                                  "VALUES (:key, :host, 'open', :now, :title, :timeline)",
                                  {"key": key, "host": host, "now": now, "title": self.redactor.text(title),
                                   "timeline": json.dumps([{"at": now, **self.redactor.obj(event)}])})
            row = db.execute(_sql(_INCIDENT_SELECT + " WHERE id = :id"), {"id": new_id}).fetchone()
            return _incident(row), True

    def add_alerts(self, incident_id: int, active: dict[str, dict[str, Any]], alerts: list[dict[str, Any]],
                   source: str) -> tuple[Incident | None, list[dict[str, Any]]]:
        """In one transaction: `active` (fingerprint -> what fires) joins the incident's active alerts, and the
        `alerts` whose kind its timeline has not seen come back, added to it as one event. Two replicas given
        the same alert note it once."""
        with self._conn() as db:
            row = db.execute(_sql(_INCIDENT_SELECT + " WHERE id = :id"), {"id": incident_id}).fetchone()
            if row is None:
                return None, []
            inc = _incident(row)
            seen = {a.get("kind") for e in inc.timeline for a in e.get("alerts", [])}
            fresh = [a for a in alerts if a.get("kind") not in seen]
            for fp, what in active.items():
                inc.active.setdefault(fp, self.redactor.obj(what))
            if fresh:
                inc.timeline.append({"at": time.time(), **self.redactor.obj(
                    {"event": "alert", "source": source, "alerts": fresh})})
            db.execute(_sql("UPDATE incidents SET timeline = :timeline, active = :active WHERE id = :id"),
                       {"timeline": json.dumps(inc.timeline), "active": json.dumps(inc.active), "id": incident_id})
            return inc, fresh

    # --- log cursors (where each host's watch stopped reading, across restarts) ----------------

    def cursor(self, host: str) -> tuple[str, str, int] | None:
        """(path, head, offset): the file's first bytes identify it, so a rotated log starts again."""
        with self._conn() as db:
            row = db.execute(_sql('SELECT path, head, "offset" FROM log_cursors WHERE host = :host'),
                             {"host": host}).fetchone()
        return (row[0], row[1], int(row[2])) if row else None

    def set_cursor(self, host: str, path: str, head: str, offset: int) -> None:
        with self._conn() as db:
            db.execute(_sql('INSERT INTO log_cursors(host, path, head, "offset", at) VALUES (:host, :path, :head, '
                            ':offset, :at) ON CONFLICT(host) DO UPDATE SET path = excluded.path, head = excluded.head, '
                            '"offset" = excluded."offset", at = excluded.at'),
                       {"host": host, "path": path, "head": head, "offset": offset, "at": time.time()})

    def incident(self, incident_id: int) -> Incident | None:
        with self._conn() as db:
            row = db.execute(_sql(_INCIDENT_SELECT + " WHERE id = :id"), {"id": incident_id}).fetchone()
        return _incident(row) if row else None

    def open_incidents(self, host: str | None = None) -> list[Incident]:
        with self._conn() as db:
            if host is None:
                rows = db.execute(_sql(_INCIDENT_SELECT + " WHERE state != 'resolved' ORDER BY id")).fetchall()
            else:
                rows = db.execute(_sql(_INCIDENT_SELECT + " WHERE state != 'resolved' AND host = :host ORDER BY id"),
                                  {"host": host}).fetchall()
        return [_incident(r) for r in rows]

    def incidents(self, limit: int = 50) -> list[Incident]:
        with self._conn() as db:
            rows = db.execute(_sql(_INCIDENT_SELECT + " ORDER BY id DESC LIMIT :limit"), {"limit": limit}).fetchall()
        return [_incident(r) for r in rows]

    def update_incident(self, incident_id: int, *, state: IncidentState | None = None, channel: str | None = None,
                        ts: str | None = None, event: dict[str, Any] | None = None,
                        active: dict[str, dict[str, Any]] | None = None) -> Incident | None:
        with self._conn() as db:
            row = db.execute(_sql(_INCIDENT_SELECT + " WHERE id = :id"), {"id": incident_id}).fetchone()
            if row is None:
                return None
            inc = _incident(row)
            if event is not None:
                inc.timeline.append({"at": time.time(), **self.redactor.obj(event)})
            if state is not None:
                inc.state = state
                if state == "resolved":
                    inc.resolved_at = time.time()
            inc.channel = channel or inc.channel
            inc.ts = ts or inc.ts
            if active is not None:
                inc.active = self.redactor.obj(active)
            db.execute(_sql("UPDATE incidents SET state = :state, resolved_at = :resolved, channel = :channel, "
                            "ts = :ts, timeline = :timeline, active = :active WHERE id = :id"),
                       {"state": inc.state, "resolved": inc.resolved_at, "channel": inc.channel, "ts": inc.ts,
                        "timeline": json.dumps(inc.timeline), "active": json.dumps(inc.active), "id": incident_id})
            return inc

    # --- idempotent reports -----------------------------------------------------------------------

    def claim_report(self, report: str, period: str, stale_after: float = CLAIM_STALE) -> float | None:
        """The claim's time — its token (`holds_report_claim`) — for the one caller that should post (report,
        period): the first, or the next one after a claimant that never posted (killed, or Slack failed) once its
        claim is `stale_after` seconds old; None for every other caller."""
        now = time.time()
        key = {"report": report, "period": period, "now": now}
        with self._conn() as db:
            cur = db.execute(_sql("INSERT INTO report_runs(report, period, at) VALUES (:report, :period, :now) "
                                  "ON CONFLICT DO NOTHING"), key)
            if cur.rowcount == 1:
                return now
            retaken = db.execute(_sql("UPDATE report_runs SET at = :now WHERE report = :report AND period = :period "
                                      "AND posted_at IS NULL AND at < :stale"), {**key, "stale": now - stale_after})
            return now if retaken.rowcount == 1 else None

    def holds_report_claim(self, report: str, period: str, at: float) -> bool:
        """Is the claim made at `at` still the period's, and unposted? A replica stopped between its claim and its
        post (SIGSTOP, a stalled host) may find that another took the claim over and posted meanwhile."""
        with self._conn() as db:
            row = db.execute(_sql("SELECT at, posted_at FROM report_runs WHERE report = :report AND period = :period"),
                             {"report": report, "period": period}).fetchone()
        return row is not None and row[1] is None and float(row[0]) == at

    def mark_report_posted(self, report: str, period: str) -> None:
        with self._conn() as db:
            db.execute(_sql("UPDATE report_runs SET posted_at = :at WHERE report = :report AND period = :period"),
                       {"at": time.time(), "report": report, "period": period})

    def report_posted(self, report: str, period: str) -> bool:
        with self._conn() as db:
            row = db.execute(_sql("SELECT posted_at FROM report_runs WHERE report = :report AND period = :period"),
                             {"report": report, "period": period}).fetchone()
        return row is not None and row[0] is not None

    def report_message(self, report: str, period: str) -> tuple[str, str] | None:
        """(channel, ts) of the period's message if one was posted, even if what follows it (the chart) failed."""
        with self._conn() as db:
            row = db.execute(_sql("SELECT channel, ts FROM report_runs WHERE report = :report AND period = :period"),
                             {"report": report, "period": period}).fetchone()
        return (str(row[0]), str(row[1])) if row is not None and row[0] and row[1] else None

    def set_report_message(self, report: str, period: str, channel: str, ts: str) -> None:
        with self._conn() as db:
            db.execute(_sql("UPDATE report_runs SET channel = :channel, ts = :ts WHERE report = :report AND "
                            "period = :period"), {"channel": channel, "ts": ts, "report": report, "period": period})

    def unposted_reports(self) -> list[tuple[str, str]]:
        """Claims that never became a post: what a restart retries."""
        with self._conn() as db:
            rows = db.execute(_sql("SELECT report, period FROM report_runs WHERE posted_at IS NULL "
                                   "ORDER BY at")).fetchall()
        return [(r[0], r[1]) for r in rows]


_INCIDENT_SELECT = ("SELECT id, key, host, state, opened_at, resolved_at, channel, ts, title, timeline, active "
                    "FROM incidents")


def _incident(row: Any) -> Incident:
    return Incident(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], json.loads(row[9]),
                    json.loads(row[10] or "{}"))


def _reason(error: BaseException) -> str:
    """The database's own words for ERROR (the driver's message, first line), not SQLAlchemy's wrapping."""
    orig = getattr(error, "orig", None)
    text = str(orig if orig is not None else error).strip()
    return text.splitlines()[0] if text else type(error).__name__


@contextmanager
def _one_migrator(path: Path | None, wait: float = MIGRATE_WAIT) -> Iterator[None]:
    """SQLite: one process at a time opens and migrates a state file, as PostgreSQL's advisory lock does for
    replicas. The others wait here, not in SQLite's busy timeout, which a long first migration on a loaded
    machine outlasts ("database is locked" for the second of two processes opening a new file at once). A folder
    this process cannot write (a reader of another user's state) takes no lock: it cannot migrate either."""
    if path is None:
        yield
        return
    import fcntl

    try:
        handle = open(path.with_name(path.name + ".lock"), "a")  # noqa: SIM115 - closed below
    except OSError:
        yield
        return
    with handle:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    raise StoreUnavailable(f"cannot open the state store {path}: another process has been opening "
                                           f"it for {wait:.0f} s (its schema migration?)") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def migrate(engine: sa.Engine, script_location: Path, pg: bool) -> None:
    """Bring the database to the newest revision of `script_location`, every pending revision in one
    transaction: one that fails rolls all back (the schema stays as it was) and raises MigrationFailed with
    why. A database of a release before migrations (no alembic_version) is brought up to the baseline and
    then stamped with it, its rows kept."""
    from alembic import command
    from alembic.config import Config as AlembicConfig

    config = AlembicConfig()
    config.set_main_option("script_location", str(script_location))
    with engine.connect() as db:
        try:
            with db.begin():
                if pg:  # two replicas starting together: the second waits, then finds nothing to do
                    db.execute(_sql("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATE_LOCK})
                _say_if_legacy(db)
                _refuse_if_newer(db, config)
                config.attributes["connection"] = db
                command.upgrade(config, "head")
        except exc.OperationalError as error:
            if db.invalidated or _connecting(error):
                raise
            raise MigrationFailed(f"the schema migration failed and was rolled back: {_reason(error)}") from None
        except MigrationFailed:
            raise
        except Exception as error:
            raise MigrationFailed(f"the schema migration failed and was rolled back, the schema is unchanged: "
                                  f"{type(error).__name__}: {_reason(error)}") from None


def _refuse_if_newer(db: sa.Connection, config: Any) -> None:
    """A store a newer specops migrated (a revision this release does not ship): refused in words, untouched.
    Going back a release does not take the schema back; the newer specops, or another state, does."""
    from alembic.script import ScriptDirectory

    if "alembic_version" not in set(sa.inspect(db).get_table_names()):
        return
    found = [str(v) for v in db.execute(_sql("SELECT version_num FROM alembic_version")).scalars()]
    scripts = ScriptDirectory.from_config(config)
    unknown = [v for v in found if v not in {r.revision for r in scripts.walk_revisions()}]
    if unknown:
        raise MigrationFailed(f"its schema ({', '.join(unknown)}) was written by a newer specops; this one knows up "
                              f"to {scripts.get_current_head()}. Run the newer specops, or point settings.state "
                              "at another state; nothing was changed")


def _say_if_legacy(db: sa.Connection) -> None:
    """A state file of a release before migrations (its tables, no alembic_version): said in the log, since
    its schema is about to change (brought up to the baseline, then stamped)."""
    present = set(sa.inspect(db).get_table_names())
    if "alembic_version" not in present and present & LEGACY_TABLES:
        log.info("the state store predates migrations (it has %s): bringing it to the baseline schema",
                 ", ".join(sorted(present & LEGACY_TABLES)))


def _connecting(error: exc.OperationalError) -> bool:
    """The connection itself failed (refused, timed out, the password rejected), not a statement."""
    return bool(error.connection_invalidated) or error.statement is None
