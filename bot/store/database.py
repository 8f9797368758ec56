"""The connection holder every table group of the store writes through: the database opened (and migrated), one
writing transaction at a time, and a read-only reader that waits for no writer."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc

from bot.config import is_state_url
from bot.errors import MigrationFailed, StoreRefused, StoreUnavailable
from bot.redact import Redactor
from bot.store.engine import (
    DATABASE_ERRORS,
    OPEN_TIMEOUT,
    READ_TIMEOUT,
    REFUSED,
    pg_engine,
    reason,
    sql,
    sqlite_engine,
    state_target,
)
from bot.store.holders import replica_id
from bot.store.schema import MIGRATIONS, migrate, one_migrator

LEASE = 30.0  # a host lock, or a replica's lead, not renewed for this long is expired (settings.lease_seconds)
_WRITE_LOCK = zlib.crc32(b"specops.store.write")  # PostgreSQL: the advisory lock every store transaction holds


class Database:
    """The database of one store: what each table group's calls run in (`transaction`, `insert`, `reader`), and
    what they share (the redactor, this replica's id, the lease)."""

    def __init__(self, path: str | os.PathLike[str], redactor: Redactor, *, password_env: str | None = None,
                 migrations: Path | None = None, lease: float = LEASE) -> None:
        self.redactor = redactor
        self.lease = lease
        self.replica = replica_id()
        if is_state_url(path):  # its password is said nowhere (the config's redactor may not have seen it)
            redactor.learn_url(str(path))
        self.target = state_target(path, password_env)
        redactor.add_secret(self.target.url.password if isinstance(self.target.url.password, str) else None)
        self.path = self.target.path  # the SQLite file (None on a database server)
        self.pg = self.target.url.get_backend_name() == "postgresql"
        # one connection per SQLite Store, writes serialized by a Python lock: threads of this process never meet
        # in SQLite's busy handler (which sleeps 1..100 ms and made acknowledgements slow under a burst)
        self._lock = threading.Lock()
        if self.pg:
            self.engine = pg_engine(self.target.url, OPEN_TIMEOUT)
        else:
            assert self.path is not None  # state_target gives every SQLite state its file
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.engine = sqlite_engine(self.target.url, OPEN_TIMEOUT, pool=True)
        self._db: sa.Connection | None = None
        try:
            with self._lock:
                self._open(migrations or MIGRATIONS)
        except BaseException:
            self.engine.dispose()
            raise
        self._read_engine = self._make_reader()  # connects only when /metrics first reads

    def _open(self, migrations: Path) -> None:
        try:
            with one_migrator(None if self.pg else self.path):
                migrate(self.engine, migrations, self.pg)
        except MigrationFailed as failed:
            raise MigrationFailed(self.redactor.text(f"{self.target.shown}: {failed}")) from None
        except exc.OperationalError as error:  # connecting: the server is down, the password refused
            why = reason(error)
            kind = StoreRefused if REFUSED.search(why) else StoreUnavailable
            raise kind(self.redactor.text(f"cannot open the state store {self.target.shown}: {why}")) from None

    @contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        with self._lock:
            if self.pg:
                with self.engine.begin() as db:
                    # what BEGIN IMMEDIATE is to SQLite: one writing transaction at a time, across replicas
                    db.execute(sql("SELECT pg_advisory_xact_lock(:key)"), {"key": _WRITE_LOCK})
                    yield db
                return
            if self._db is None:  # SQLite: the one connection, kept (a checkout per call cost more than the call)
                self._db = self.engine.connect()
            with self._db.begin():
                yield self._db

    def insert(self, db: sa.Connection, statement: str, params: dict[str, Any]) -> int:
        """INSERT one row, its new id (RETURNING on PostgreSQL; SQLite's lastrowid, which needs no 3.35)."""
        if self.pg:
            return int(db.execute(sql(statement + " RETURNING id"), params).scalar_one())
        return int(db.execute(sql(statement), params).lastrowid or 0)

    @contextmanager
    def reader(self) -> Iterator[sa.Connection]:
        """A read-only connection of its own: a plain SELECT takes no write lock and waits for no writer
        (WAL; PostgreSQL's MVCC), neither another process's nor this process's Python lock, so /metrics never
        hangs on one."""
        with self._read_engine.connect() as db:
            if self.pg:  # this transaction only: it ends (rolled back) when the connection goes back to the pool
                db.exec_driver_sql("SET TRANSACTION READ ONLY")
                db.exec_driver_sql(f"SET LOCAL statement_timeout = {int(READ_TIMEOUT * 1000)}")
            yield db

    def _make_reader(self) -> sa.Engine:
        if self.pg:
            return pg_engine(self.target.url, READ_TIMEOUT * 4)
        assert self.path is not None
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        return sa.create_engine("sqlite://", poolclass=sa.pool.NullPool, creator=lambda: sqlite3.connect(
            uri, uri=True, timeout=READ_TIMEOUT, isolation_level=None, check_same_thread=False))

    def write_probe(self, timeout: float = 1.0) -> str | None:
        """None if a write to the database commits now; else why not. Its own short-lived connection,
        so a lock held elsewhere or a vanished file shows here instead of in the next deploy."""
        if self.path is not None and not self.path.is_file():
            return f"{self.path} is gone"
        engine = (pg_engine(self.target.url, timeout) if self.pg
                  else sqlite_engine(self.target.url, timeout, pool=False))
        try:
            with engine.begin() as db:
                db.execute(sql("INSERT INTO health(id, at) VALUES (1, :at) ON CONFLICT(id) DO UPDATE SET at = "
                               "excluded.at"), {"at": time.time()})
        except DATABASE_ERRORS as error:
            return self.redactor.text(f"cannot write {self.target.shown}: {reason(error)}")
        finally:
            engine.dispose()
        return None

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
            self.engine.dispose()
            self._read_engine.dispose()
