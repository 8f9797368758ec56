"""SQLite storage: host locks, deployments, and the record of what ran.

One file (settings.state). Each call opens a short transaction; WAL mode lets the bot, the
scheduler and a CLI read while another writes. Chat turns queue their audit rows for one writer
thread (`audit_queue`), which commits what is queued in one transaction; what a row is for waits
for `AuditRow.committed()`.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bot.core.startup import StartupHistory, StartupRun
from bot.errors import OperationError
from bot.redact import Redactor

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


log = logging.getLogger("specops.store")

READ_TIMEOUT = 0.25  # a read-only scrape waits this long at most (a checkpoint, a WAL reset)
STARTUP_KEEP = 20  # starts kept per host and profile
STARTUP_ESTIMATE_FROM = 3  # the newest starts the estimate is the median of
CLAIM_STALE = 600.0  # a report claimed this long ago and not posted: its claimant died or Slack failed
AUDIT_WAIT = 30.0  # what waits for an audit row waits this long at most (SQLite's own busy timeout is 10 s)
IncidentState = Literal["open", "acknowledged", "resolved"]
DeploymentStatus = Literal["running", "serving", "failed", "stopped"]


class LockHeld(OperationError):
    def __init__(self, host: str, owner: str, operation: str, started_at: float) -> None:
        age = time.time() - started_at
        super().__init__(f"{host} is busy: {operation} by {owner}, started {_ago(age)} ago "
                         f"({time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(started_at))})")
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


_INSERT = ("INSERT INTO audit(started_at, finished_at, source, team, user, channel, text, plan_id, result, detail) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def boot_id() -> str:
    """This machine's boot: a PID from another boot (or another machine) says nothing about this one."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


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
    if pid is None or not boot or boot != boot_id():
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


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


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


class Store:
    def __init__(self, path: str | os.PathLike[str], redactor: Redactor) -> None:
        self.redactor = redactor
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection per Store, writes serialized by a Python lock: threads of this process never meet
        # in SQLite's busy handler (which sleeps 1..100 ms and made acknowledgements slow under a burst).
        self._db = sqlite3.connect(self.path, timeout=10, isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        # audit rows go through one writer thread (started on first use), so a chat turn queues its row and
        # answers at once; what the row is for waits for `AuditRow.committed()` before it starts
        self._audit_queue: queue.SimpleQueue[_AuditOp | None] = queue.SimpleQueue()
        self._audit_thread: threading.Thread | None = None
        self._audit_lock = threading.Lock()
        self._closed = False
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: durable across a crash of the bot (not of the machine's power), no fsync per write
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)  # executescript commits on its own
            cols = {row[1] for row in self._db.execute("PRAGMA table_info(incidents)")}
            if "active" not in cols:  # a store from before alerts were tracked by fingerprint
                self._db.execute("ALTER TABLE incidents ADD COLUMN active TEXT NOT NULL DEFAULT '{}'")
            cols = {row[1] for row in self._db.execute("PRAGMA table_info(report_runs)")}
            if "posted_at" not in cols:  # claimed and posted are two steps: a claim that never posted is retried
                self._db.execute("ALTER TABLE report_runs ADD COLUMN posted_at REAL")
                self._db.execute("UPDATE report_runs SET posted_at = at")
            for col in ("channel", "ts"):
                if col not in cols:  # the period's message once posted: a retry continues it, never posts a copy
                    self._db.execute(f"ALTER TABLE report_runs ADD COLUMN {col} TEXT")
            cols = {row[1] for row in self._db.execute("PRAGMA table_info(locks)")}
            for col, kind in (("pid", "INTEGER"), ("boot_id", "TEXT"), ("heartbeat", "REAL"), ("pid_start", "INTEGER")):
                if col not in cols:  # who holds a lock, so a lock whose holder is gone is stale at once
                    self._db.execute(f"ALTER TABLE locks ADD COLUMN {col} {kind}")
            cols = {row[1] for row in self._db.execute("PRAGMA table_info(deployments)")}
            for col, kind in (("holder_pid", "INTEGER"), ("holder_boot", "TEXT"), ("holder_start", "INTEGER")):
                if col not in cols:  # the run that wrote a row (`pid` is the remote server's): a dead run's row ends
                    self._db.execute(f"ALTER TABLE deployments ADD COLUMN {col} {kind}")

    @contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        with self._audit_lock:
            self._closed = True
            thread = self._audit_thread
        if thread is not None:
            self._audit_queue.put(None)  # after every queued row: they are written, then the writer stops
            thread.join(timeout=AUDIT_WAIT)
        with self._lock:
            self._db.close()

    # --- locks -------------------------------------------------------------------------------

    def acquire(self, host: str, owner: str, operation: str) -> str | None:
        """Take HOST's lock; a lock whose holder process is gone is taken over at once (returns whose it was)."""
        with self._conn() as db:
            row = db.execute("SELECT owner, operation, started_at, pid, boot_id, pid_start FROM locks WHERE host = ?",
                             (host,)).fetchone()
            taken_over = None
            if row is not None:
                if not holder_gone(row[3], row[4], row[5]):
                    raise LockHeld(host, row[0], row[1], row[2])
                taken_over = f"{row[1]} by {row[0]} (its process {row[3]} is gone)"
                db.execute("DELETE FROM locks WHERE host = ?", (host,))
            now = time.time()
            me = os.getpid()
            db.execute("INSERT INTO locks(host, owner, operation, started_at, pid, boot_id, heartbeat, pid_start) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (host, owner, operation, now, me, boot_id(), now, process_start(me)))
            return taken_over

    def lock_stale(self, host: str) -> bool:
        """The lock's holder process is gone (a SIGKILLed bot): nothing holds it any more."""
        with self._conn() as db:
            row = db.execute("SELECT pid, boot_id, pid_start FROM locks WHERE host = ?", (host,)).fetchone()
        return row is not None and holder_gone(row[0], row[1], row[2])

    def release(self, host: str, owner: str) -> None:
        with self._conn() as db:
            db.execute("DELETE FROM locks WHERE host = ? AND owner = ?", (host, owner))

    def break_lock(self, host: str) -> bool:
        with self._conn() as db:
            return db.execute("DELETE FROM locks WHERE host = ?", (host,)).rowcount > 0

    def lock_of(self, host: str) -> tuple[str, str, float] | None:
        with self._conn() as db:
            row = db.execute("SELECT owner, operation, started_at FROM locks WHERE host = ?", (host,)).fetchone()
        return (row[0], row[1], row[2]) if row else None

    # --- deployments -------------------------------------------------------------------------

    def record_deployment(self, host: str, profile: str, fingerprint: str, status: DeploymentStatus,
                          pid: int | None = None, detail: dict[str, Any] | None = None) -> int:
        me = os.getpid()
        with self._conn() as db:
            cur = db.execute(
                "INSERT INTO deployments(host, profile, fingerprint, pid, status, started_at, detail, "
                "holder_pid, holder_boot, holder_start) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (host, profile, fingerprint, pid, status, time.time(), json.dumps(self.redactor.obj(detail or {})),
                 me, boot_id(), process_start(me)))
            return int(cur.lastrowid or 0)

    def update_deployment(self, dep_id: int, *, status: DeploymentStatus | None = None, pid: int | None = None,
                          detail: dict[str, Any] | None = None, finished: bool = False) -> None:
        with self._conn() as db:
            if status is not None:
                db.execute("UPDATE deployments SET status = ? WHERE id = ?", (status, dep_id))
            if status == "serving":
                # one server per host: what served (or was being deployed) there before this one is gone now
                # (in the same transaction, so no reader sees two serving rows)
                row = db.execute("SELECT host FROM deployments WHERE id = ?", (dep_id,)).fetchone()
                if row is not None:
                    self._end_rows(db, "host = ? AND id < ? AND status IN ('serving', 'running')", (row[0], dep_id),
                                   "stopped", f"superseded by deployment #{dep_id}")
            if pid is not None:
                db.execute("UPDATE deployments SET pid = ? WHERE id = ?", (pid, dep_id))
            if detail is not None:
                db.execute("UPDATE deployments SET detail = ? WHERE id = ?",
                           (json.dumps(self.redactor.obj(detail)), dep_id))
            if finished:
                db.execute("UPDATE deployments SET finished_at = ? WHERE id = ?", (time.time(), dep_id))

    def stop_deployments(self, host: str, why: str) -> int:
        """The host's server was stopped: its serving rows say so (how many there were)."""
        with self._conn() as db:
            return self._end_rows(db, "host = ? AND status = 'serving'", (host,), "stopped", why)

    def reconcile_deployments(self, host: str | None = None) -> int:
        """End the `running` rows whose run is gone (SIGKILLed, the machine restarted): they become `failed`,
        with why. How many rows changed."""
        with self._conn() as db:
            return self._reconcile(db, host)

    def _reconcile(self, db: sqlite3.Connection, host: str | None) -> int:
        where, args = ("status = 'running'", ()) if host is None else ("status = 'running' AND host = ?", (host,))
        rows = db.execute(f"SELECT id, host, holder_pid, holder_boot, holder_start FROM deployments WHERE {where}",
                          args).fetchall()
        changed = 0
        for dep_id, dep_host, pid, boot, started in rows:
            if pid is not None and boot and boot == boot_id():
                if not holder_gone(pid, boot, started):
                    continue  # its run is still going
                why = f"the run that wrote it (pid {pid}) is gone"
            else:
                # written before rows knew their run, or in another boot: a deploy holds the host's lock while it
                # runs, so a row whose host has no live lock has no run behind it
                lock = db.execute("SELECT pid, boot_id, pid_start FROM locks WHERE host = ?", (dep_host,)).fetchone()
                if lock is not None and not holder_gone(lock[0], lock[1], lock[2]):
                    continue
                why = (f"the run that wrote it (pid {pid}) is gone" if pid is not None
                       else f"the run that wrote it is gone ({dep_host} holds no lock)")
            changed += self._end_rows(db, "id = ?", (dep_id,), "failed", why)
        return changed

    def _end_rows(self, db: sqlite3.Connection, where: str, args: tuple[Any, ...], status: DeploymentStatus,
                  why: str) -> int:
        """Rows matching `where` take `status`, a finish time if they had none, and `why` as their message
        (what the row said before stays in its detail)."""
        now = time.time()
        rows = db.execute(f"SELECT id, detail FROM deployments WHERE {where}", args).fetchall()
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
            db.execute("UPDATE deployments SET status = ?, finished_at = COALESCE(finished_at, ?), detail = ? "
                       "WHERE id = ?", (status, now, json.dumps(self.redactor.obj(detail)), dep_id))
        return len(rows)

    def latest_deployment(self, host: str) -> Deployment | None:
        """The host's latest row, reconciled first: a row whose run is gone does not read as `running`."""
        with self._conn() as db:
            self._reconcile(db, host)
            row = db.execute("SELECT id, host, profile, fingerprint, pid, status, started_at, finished_at, detail "
                             "FROM deployments WHERE host = ? ORDER BY id DESC LIMIT 1", (host,)).fetchone()
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
        r = self.redactor.text
        inserted: list[AuditRow] = []
        try:
            with self._conn() as db:
                for op in ops:
                    if op.row is None:
                        continue
                    if op.values is not None:
                        v = op.values
                        cur = db.execute(_INSERT, (*v[:6], r(v[6]), v[7], v[8], r(v[9]) if v[9] else ""))
                        op.row._id = int(cur.lastrowid or 0)
                        inserted.append(op.row)
                    elif op.result is not None and op.row._id is not None:
                        db.execute("UPDATE audit SET finished_at = ?, result = ?, detail = ? WHERE id = ?",
                                   (op.at, op.result, r(op.detail), op.row._id))
        except BaseException:
            for row in inserted:
                row._id = None  # rolled back
            raise
        for row in inserted:
            row._resolve(None)

    def audit_list(self, limit: int = 50) -> list[AuditEntry]:
        self.audit_flush()  # what this process queued is there
        with self._conn() as db:
            rows = db.execute("SELECT id, started_at, finished_at, source, team, user, channel, text, command, "
                              "plan_id, result, detail FROM audit ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [AuditEntry(*row) for row in rows]

    # --- startup phases (the /health wait's estimate) --------------------------------------------

    def record_startup(self, host: str, profile: str, run: StartupRun, keep: int = STARTUP_KEEP) -> None:
        """One start of PROFILE on HOST that reached ready: its phases' times, for the next start's estimate
        (only the newest `keep` of each host and profile are kept)."""
        with self._conn() as db:
            db.execute("INSERT INTO startup_runs(host, profile, at, ready_seconds, phases) VALUES (?, ?, ?, ?, ?)",
                       (host, profile, time.time(), run.ready_seconds, json.dumps([list(p) for p in run.phases])))
            db.execute("DELETE FROM startup_runs WHERE host = ? AND profile = ? AND id NOT IN (SELECT id FROM "
                       "startup_runs WHERE host = ? AND profile = ? ORDER BY id DESC LIMIT ?)",
                       (host, profile, host, profile, keep))

    def startup_history(self, host: str, profile: str, limit: int = STARTUP_ESTIMATE_FROM) -> StartupHistory:
        """The newest starts of PROFILE on HOST, newest first (none yet: an empty history)."""
        with self._conn() as db:
            rows = db.execute("SELECT ready_seconds, phases FROM startup_runs WHERE host = ? AND profile = ? "
                              "ORDER BY id DESC LIMIT ?", (host, profile, limit)).fetchall()
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
            db.execute("INSERT INTO samples(host, at, up, data) VALUES (?, ?, ?, ?)",
                       (host, at or time.time(), int(up), json.dumps(self.redactor.obj(data))))

    def samples(self, host: str, since: float = 0.0, limit: int = 100_000) -> list[tuple[float, bool, dict[str, Any]]]:
        with self._conn() as db:
            rows = db.execute("SELECT at, up, data FROM samples WHERE host = ? AND at >= ? ORDER BY at DESC LIMIT ?",
                              (host, since, limit)).fetchall()
        return [(r[0], bool(r[1]), json.loads(r[2])) for r in reversed(rows)]

    @contextmanager
    def _reader(self, timeout: float = READ_TIMEOUT) -> Iterator[sqlite3.Connection]:
        """A read-only connection of its own: a plain SELECT takes no write lock and waits for no writer
        (WAL), neither another process's nor this process's Python lock, so /metrics never hangs on one."""
        db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=timeout,
                             isolation_level=None)
        try:
            yield db
        finally:
            db.close()

    def read_open_incident_count(self) -> int:
        """How many incidents are not resolved, read without waiting for the write lock."""
        with self._reader() as db:
            return int(db.execute("SELECT COUNT(*) FROM incidents WHERE state != 'resolved'").fetchone()[0])

    def read_last_up_watch(self) -> dict[str, float]:
        """Per host, when a watch last found the server up; waits for no write lock (the bot's own /metrics)."""
        with self._reader() as db:
            rows = db.execute("SELECT host, MAX(at) FROM samples WHERE up = 1 GROUP BY host").fetchall()
        return {r[0]: float(r[1]) for r in rows}

    def write_probe(self, timeout: float = 1.0) -> str | None:
        """None if a write to the database commits now; else why not. Its own short-lived connection,
        so a lock held elsewhere or a vanished file shows here instead of in the next deploy."""
        if not self.path.is_file():
            return f"{self.path} is gone"
        try:
            db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None)
            try:
                db.execute("BEGIN IMMEDIATE")
                db.execute("CREATE TABLE IF NOT EXISTS health (id INTEGER PRIMARY KEY CHECK (id = 1), at REAL)")
                db.execute("INSERT OR REPLACE INTO health(id, at) VALUES (1, ?)", (time.time(),))
                db.execute("COMMIT")
            finally:
                db.close()
        except sqlite3.Error as exc:
            return f"cannot write {self.path}: {exc}"
        return None

    def prune_samples(self, older_than: float) -> None:
        with self._conn() as db:
            db.execute("DELETE FROM samples WHERE at < ?", (older_than,))

    # --- incidents ------------------------------------------------------------------------------

    def open_incident(self, key: str, host: str, title: str, event: dict[str, Any]) -> tuple[Incident, bool]:
        """The open incident for `key`, creating it if there is none: (incident, created)."""
        with self._conn() as db:
            row = db.execute(_INCIDENT_SELECT + " WHERE key = ? AND state != 'resolved'", (key,)).fetchone()
            if row is not None:
                return _incident(row), False
            now = time.time()
            cur = db.execute("INSERT INTO incidents(key, host, state, opened_at, title, timeline) "
                             "VALUES (?, ?, 'open', ?, ?, ?)",
                             (key, host, now, self.redactor.text(title),
                              json.dumps([{"at": now, **self.redactor.obj(event)}])))
            row = db.execute(_INCIDENT_SELECT + " WHERE id = ?", (cur.lastrowid,)).fetchone()
            return _incident(row), True

    # --- log cursors (where each host's watch stopped reading, across restarts) ----------------

    def cursor(self, host: str) -> tuple[str, str, int] | None:
        """(path, head, offset): the file's first bytes identify it, so a rotated log starts again."""
        with self._conn() as db:
            row = db.execute("SELECT path, head, offset FROM log_cursors WHERE host = ?", (host,)).fetchone()
        return (row[0], row[1], int(row[2])) if row else None

    def set_cursor(self, host: str, path: str, head: str, offset: int) -> None:
        with self._conn() as db:
            db.execute("INSERT INTO log_cursors(host, path, head, offset, at) VALUES (?, ?, ?, ?, ?) "
                       "ON CONFLICT(host) DO UPDATE SET path = excluded.path, head = excluded.head, "
                       "offset = excluded.offset, at = excluded.at", (host, path, head, offset, time.time()))

    def incident(self, incident_id: int) -> Incident | None:
        with self._conn() as db:
            row = db.execute(_INCIDENT_SELECT + " WHERE id = ?", (incident_id,)).fetchone()
        return _incident(row) if row else None

    def open_incidents(self, host: str | None = None) -> list[Incident]:
        with self._conn() as db:
            if host is None:
                rows = db.execute(_INCIDENT_SELECT + " WHERE state != 'resolved' ORDER BY id").fetchall()
            else:
                rows = db.execute(_INCIDENT_SELECT + " WHERE state != 'resolved' AND host = ? ORDER BY id",
                                  (host,)).fetchall()
        return [_incident(r) for r in rows]

    def incidents(self, limit: int = 50) -> list[Incident]:
        with self._conn() as db:
            rows = db.execute(_INCIDENT_SELECT + " ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [_incident(r) for r in rows]

    def update_incident(self, incident_id: int, *, state: IncidentState | None = None, channel: str | None = None,
                        ts: str | None = None, event: dict[str, Any] | None = None,
                        active: dict[str, dict[str, Any]] | None = None) -> Incident | None:
        with self._conn() as db:
            row = db.execute(_INCIDENT_SELECT + " WHERE id = ?", (incident_id,)).fetchone()
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
            db.execute("UPDATE incidents SET state = ?, resolved_at = ?, channel = ?, ts = ?, timeline = ?, active = ? "
                       "WHERE id = ?", (inc.state, inc.resolved_at, inc.channel, inc.ts, json.dumps(inc.timeline),
                                        json.dumps(inc.active), incident_id))
            return inc

    # --- idempotent reports -----------------------------------------------------------------------

    def claim_report(self, report: str, period: str, stale_after: float = CLAIM_STALE) -> bool:
        """True for the one caller that should post (report, period): the first, or the next one after a
        claimant that never posted (killed, or Slack failed) once its claim is `stale_after` seconds old."""
        now = time.time()
        with self._conn() as db:
            cur = db.execute("INSERT OR IGNORE INTO report_runs(report, period, at) VALUES (?, ?, ?)",
                             (report, period, now))
            if cur.rowcount == 1:
                return True
            retaken = db.execute("UPDATE report_runs SET at = ? WHERE report = ? AND period = ? AND posted_at IS NULL "
                                 "AND at < ?", (now, report, period, now - stale_after))
            return retaken.rowcount == 1

    def mark_report_posted(self, report: str, period: str) -> None:
        with self._conn() as db:
            db.execute("UPDATE report_runs SET posted_at = ? WHERE report = ? AND period = ?",
                       (time.time(), report, period))

    def report_posted(self, report: str, period: str) -> bool:
        with self._conn() as db:
            row = db.execute("SELECT posted_at FROM report_runs WHERE report = ? AND period = ?",
                             (report, period)).fetchone()
        return row is not None and row[0] is not None

    def report_message(self, report: str, period: str) -> tuple[str, str] | None:
        """(channel, ts) of the period's message if one was posted, even if what follows it (the chart) failed."""
        with self._conn() as db:
            row = db.execute("SELECT channel, ts FROM report_runs WHERE report = ? AND period = ?",
                             (report, period)).fetchone()
        return (str(row[0]), str(row[1])) if row is not None and row[0] and row[1] else None

    def set_report_message(self, report: str, period: str, channel: str, ts: str) -> None:
        with self._conn() as db:
            db.execute("UPDATE report_runs SET channel = ?, ts = ? WHERE report = ? AND period = ?",
                       (channel, ts, report, period))

    def unposted_reports(self) -> list[tuple[str, str]]:
        """Claims that never became a post: what a restart retries."""
        with self._conn() as db:
            rows = db.execute("SELECT report, period FROM report_runs WHERE posted_at IS NULL ORDER BY at").fetchall()
        return [(r[0], r[1]) for r in rows]


_INCIDENT_SELECT = ("SELECT id, key, host, state, opened_at, resolved_at, channel, ts, title, timeline, active "
                    "FROM incidents")


def _incident(row: Any) -> Incident:
    return Incident(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], json.loads(row[9]),
                    json.loads(row[10] or "{}"))
