"""Where the state lives and how it is reached: the URL of `settings.state`, the SQLite and PostgreSQL engines,
and what a database's trouble raises."""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, exc

from bot.config import is_state_url
from bot.errors import StoreRefused

READ_TIMEOUT = 0.25  # a read-only scrape waits this long at most (a checkpoint, a WAL reset)
OPEN_TIMEOUT = 10.0  # how long a connection, or a write waiting for another writer, may take (SQLite's busy timeout)


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
def sql(statement: str) -> sa.TextClause:
    return sa.text(statement)


def sqlite_engine(url: sa.URL, timeout: float, *, pool: bool) -> sa.Engine:
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


def pg_engine(url: sa.URL, timeout: float) -> sa.Engine:
    # lock_timeout: a write waiting for another replica's gives up like SQLite's busy timeout, never hangs;
    # keepalives and the TCP user timeout: a server gone from the network is noticed, not waited on for minutes
    secs = max(1, int(timeout))
    return sa.create_engine(url, pool_pre_ping=True, connect_args={
        "connect_timeout": secs, "options": f"-c lock_timeout={int(timeout * 1000)}",
        "application_name": "specops", "keepalives": 1, "keepalives_idle": secs, "keepalives_interval": 1,
        "keepalives_count": 3, "tcp_user_timeout": secs * 1000})


# PostgreSQL's words when the server answered and said no: waiting cannot help
REFUSED = re.compile(r"password authentication failed|no password supplied|database \"[^\"]*\" does not exist|"
                     r"role \"[^\"]*\" does not exist|no pg_hba.conf entry", re.IGNORECASE)


def reason(error: BaseException) -> str:
    """The database's own words for ERROR (the driver's message, first line), not SQLAlchemy's wrapping."""
    orig = getattr(error, "orig", None)
    text = str(orig if orig is not None else error).strip()
    return text.splitlines()[0] if text else type(error).__name__
