"""The leader's seat: the one seat among the replicas on a store (bot/app/watching/replicas.py takes it, beats,
gives it up).

PostgreSQL: a session advisory lock on a connection of the seat's own; SQLite (one machine): an exclusive flock on
a file beside the state file. Split out of the store (bot/store/), whose tables it does not touch.
"""

from __future__ import annotations

import logging
import threading
import zlib
from typing import Any

import sqlalchemy as sa

from bot.store.engine import DATABASE_ERRORS
from bot.store.facade import Store

log = logging.getLogger("specops.store")

_LEAD_LOCK = zlib.crc32(b"specops.leader")  # PostgreSQL: the session advisory lock the leading replica holds


def _close_quietly(db: Any) -> None:
    try:
        db.close()
    except Exception as error:
        log.debug("closing a connection: %s", error)


class LeaderSeat:
    """The one seat among the replicas on a store. PostgreSQL: a session advisory lock on a connection of its
    own (a pooled one would keep the lock after it is given back), dropped by the server with the connection,
    so a SIGKILLed or cut-off leader frees it; keepalives and a TCP user timeout bound how long a silent one
    keeps it. SQLite (one machine): an exclusive flock on a file beside the state file."""

    def __init__(self, store: Store, timeout: float = 5.0) -> None:
        self.store = store
        self.timeout = timeout
        self._db: Any = None  # the seat's own DBAPI connection (psycopg) or lock file
        self._engine: sa.Engine | None = None

    def take(self) -> bool:
        """Take the seat if it is free; True if this process holds it now."""
        if self._db is not None:
            return True
        if not self.store.shared:
            return self._take_file()
        secs = max(1, int(self.timeout))
        if self._engine is None:
            # autocommit, never in a transaction: nothing to roll back when a connection is given up (a rollback
            # on a connection the server dropped is logged by SQLAlchemy as an error with a traceback)
            self._engine = sa.create_engine(self.store.target.url, poolclass=sa.pool.NullPool,
                                            pool_reset_on_return=None, connect_args={
                "connect_timeout": secs, "application_name": "specops-leader", "keepalives": 1,
                "keepalives_idle": secs, "keepalives_interval": 1, "keepalives_count": 3,
                "tcp_user_timeout": secs * 1000,
                "options": f"-c statement_timeout={secs * 1000} -c tcp_keepalives_idle={secs} "
                           "-c tcp_keepalives_interval=1 -c tcp_keepalives_count=3"})
        try:
            conn = self._engine.raw_connection()
        except DATABASE_ERRORS:
            return False
        try:
            conn.autocommit = True  # type: ignore[attr-defined]  # psycopg's: the session lock outlives statements
            cur = conn.cursor()
            cur.execute("SELECT pg_try_advisory_lock(%s)", (_LEAD_LOCK,))
            row = cur.fetchone()
            if row and row[0]:
                self._db = conn
                return True
        except Exception:
            pass
        conn.close()
        return False

    def _take_file(self) -> bool:
        import fcntl

        assert self.store.path is not None
        handle = open(self.store.path.with_name(self.store.path.name + ".leader"), "a")  # noqa: SIM115 - kept
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        self._db = handle
        return True

    def held(self) -> bool:
        """Does this process still hold the seat? PostgreSQL: its connection answers within the seat's timeout (a
        dropped connection dropped the lock; one that does not answer — a network that stopped relaying while the
        kernel still acknowledges — is given up: the standbys evict its session and take the seat)."""
        if self._db is None:
            return False
        if not self.store.shared:
            return True
        db = self._db
        answered: list[bool] = []
        done = threading.Event()

        def probe() -> None:
            try:
                cur = db.cursor()
                cur.execute("SELECT 1")
                cur.fetchone()
                answered.append(True)
            except Exception:
                answered.append(False)
            finally:
                done.set()

        # PostgreSQL's statement_timeout is the server's: a stalled network needs a deadline on this side
        threading.Thread(target=probe, name="specops-seat-check", daemon=True).start()
        if done.wait(self.timeout) and answered and answered[0]:
            return True
        self._abandon()
        return False

    def _abandon(self) -> None:
        """Drop the seat's connection without waiting on it (closing over a stalled network may block)."""
        db, self._db = self._db, None
        if db is not None:
            threading.Thread(target=_close_quietly, args=(db,), name="specops-seat-close", daemon=True).start()

    def evict_stale(self, older_than: float) -> int:
        """PostgreSQL: end the session that holds the seat when it is older than `older_than` seconds and not this
        process's — the leader whose heartbeat stopped (stopped, hung, or cut off behind a network that still
        acknowledges) keeps its session, and so the lock, for as long as TCP does. Returns how many were ended.
        A young session is a leader that just took the seat and has not beaten yet: left alone."""
        if not self.store.shared or self._engine is None:
            return 0
        try:
            conn = self._engine.raw_connection()
        except DATABASE_ERRORS:
            return 0
        try:
            conn.autocommit = True  # type: ignore[attr-defined]
            cur = conn.cursor()
            cur.execute("SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                        "WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objid = %s::oid "
                        "AND l.objsubid = 1 AND l.pid <> pg_backend_pid() "
                        "AND a.backend_start < now() - make_interval(secs => %s)", (_LEAD_LOCK, older_than))
            ended = sum(1 for row in cur.fetchall() if row and row[0])
        except Exception as error:
            log.warning("could not end the stale leader's session: %s", self.store.redactor.text(str(error)))
            ended = 0
        finally:
            _close_quietly(conn)
        if ended:
            log.warning("ended the session of a leader whose heartbeat stopped (older than %.0f s)", older_than)
        return ended

    def release(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()  # PostgreSQL: the server ends the session, and its lock; a file: the flock goes
            except Exception as error:
                log.debug("closing the leader's seat: %s", error)

    def close(self) -> None:
        self.release()
        if self._engine is not None:
            self._engine.dispose()
