"""The audit: a row per chat turn or command, queued for one writer thread that commits what is queued in one
transaction (a Slack acknowledgement waits on no commit); what a row is for waits for `AuditRow.committed()`."""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

from bot.core.results.records import AuditEntry
from bot.errors import OperationError
from bot.store.database import Database
from bot.store.engine import sql

log = logging.getLogger("specops.store")

AUDIT_WAIT = 30.0  # what waits for an audit row waits this long at most (SQLite's own busy timeout is 10 s)


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


class Audit:
    def __init__(self, db: Database) -> None:
        self.db = db
        # audit rows go through one writer thread (started on first use), so a chat turn queues its row and
        # answers at once; what the row is for waits for `AuditRow.committed()` before it starts
        self._queue: queue.SimpleQueue[_AuditOp | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def queue(self, *, source: str, text: str, team: str | None = None, user: str | None = None,
              channel: str | None = None, plan_id: str | None = None, result: str = "started",
              closed: bool = False, detail: str = "") -> AuditRow:
        """Queue an audit row and return at once (no SQLite call here: a Slack acknowledgement does not
        wait on a commit). `closed`: a turn that ran nothing (help, usage), its whole row in one write.
        Whatever the row is for starts only after `committed()` returned."""
        now = time.time()
        row = AuditRow()
        self._put(_AuditOp(row, (now, now if closed else None, source, team, user, channel, text[:2000], plan_id,
                                 result, detail[:4000])))
        return row

    def queue_end(self, row: AuditRow, result: str, detail: str = "") -> None:
        """Queue the row's outcome (written after the row itself: one queue, in order)."""
        self._put(_AuditOp(row, result=result, detail=detail[:4000], at=time.time()))

    def flush(self, timeout: float = AUDIT_WAIT) -> None:
        """Wait until every audit write queued so far is committed (readers in this process see them)."""
        with self._lock:
            if self._thread is None or self._closed:
                return
        done = threading.Event()
        self._put(_AuditOp(flushed=done))
        done.wait(timeout)

    def _put(self, op: _AuditOp) -> None:
        with self._lock:
            if self._closed:
                if op.row is not None and op.values is not None:
                    op.row._resolve("the store is closed")
                if op.flushed is not None:
                    op.flushed.set()
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._writer, name="specops-audit", daemon=True)
                self._thread.start()
            self._queue.put(op)

    def _writer(self) -> None:
        """Take all that is queued and write it in one transaction (a burst of slash commands: one commit)."""
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            ops = [op for op in batch if op is not None]
            try:
                self._write(ops)
            except Exception:  # one bad write does not sink the others: one transaction each
                for op in ops:
                    try:
                        self._write([op])
                    except Exception as exc:
                        log.warning("audit write failed: %s: %s", type(exc).__name__, exc)
                        if op.row is not None and op.values is not None:
                            op.row._resolve(f"{type(exc).__name__}: {exc}")
            for op in ops:
                if op.flushed is not None:
                    op.flushed.set()
            if len(ops) < len(batch):
                return  # close(): everything queued before it is written

    def _write(self, ops: list[_AuditOp]) -> None:
        def r(text: str) -> str:
            # PostgreSQL's text holds no NUL (SQLite's does): a pasted NUL must not make the row unwritable
            said = self.db.redactor.text(text)
            return said.replace("\x00", "\ufffd") if self.db.pg else said

        inserted: list[AuditRow] = []
        try:
            with self.db.transaction() as db:
                for op in ops:
                    if op.row is None:
                        continue
                    if op.values is not None:
                        v = op.values
                        op.row._id = self.db.insert(db, _INSERT, dict(zip(_AUDIT_COLUMNS, (
                            *v[:6], r(v[6]), v[7], v[8], r(v[9]) if v[9] else ""), strict=True)))
                        inserted.append(op.row)
                    elif op.result is not None and op.row._id is not None:
                        db.execute(sql("UPDATE audit SET finished_at = :at, result = :result, detail = :detail "
                                       "WHERE id = :id"),
                                   {"at": op.at, "result": op.result, "detail": r(op.detail), "id": op.row._id})
        except BaseException:
            for row in inserted:
                row._id = None  # rolled back
            raise
        for row in inserted:
            row._resolve(None)

    def recent(self, limit: int = 50) -> list[AuditEntry]:
        self.flush()  # what this process queued is there
        with self.db.transaction() as db:
            rows = db.execute(sql('SELECT id, started_at, finished_at, source, team, "user", channel, text, command, '
                                  "plan_id, result, detail FROM audit ORDER BY id DESC LIMIT :limit"),
                              {"limit": limit}).fetchall()
        return [AuditEntry(*row) for row in rows]

    def close(self) -> None:
        """Stop taking rows; what was queued before is written first."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._queue.put(None)  # after every queued row: they are written, then the writer stops
            thread.join(timeout=AUDIT_WAIT)
