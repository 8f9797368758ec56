"""The schema: the Alembic revisions (bot/migrations) an open brings the database forward through, in one
transaction, and the script of the releases before migrations that the baseline brings such a file forward from."""

from __future__ import annotations

import logging
import re
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc

from bot.errors import MigrationFailed, StoreUnavailable
from bot.store.engine import reason, sql

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

# Alembic's script directory, shipped in the package (bot/migrations, beside this package)
MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
MIGRATE_WAIT = 120.0  # s: how long an open waits for another process opening (migrating) the same SQLite file
_MIGRATE_LOCK = zlib.crc32(b"specops.store.migrate")  # PostgreSQL: one replica brings the schema forward at a time


@contextmanager
def one_migrator(path: Path | None, wait: float = MIGRATE_WAIT) -> Iterator[None]:
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
                    db.execute(sql("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATE_LOCK})
                _say_if_legacy(db)
                _refuse_if_newer(db, config)
                config.attributes["connection"] = db
                command.upgrade(config, "head")
        except exc.OperationalError as error:
            if db.invalidated or _connecting(error):
                raise
            raise MigrationFailed(f"the schema migration failed and was rolled back: {reason(error)}") from None
        except MigrationFailed:
            raise
        except Exception as error:
            raise MigrationFailed(f"the schema migration failed and was rolled back, the schema is unchanged: "
                                  f"{type(error).__name__}: {reason(error)}") from None


def _refuse_if_newer(db: sa.Connection, config: Any) -> None:
    """A store a newer specops migrated (a revision this release does not ship): refused in words, untouched.
    Going back a release does not take the schema back; the newer specops, or another state, does."""
    from alembic.script import ScriptDirectory

    if "alembic_version" not in set(sa.inspect(db).get_table_names()):
        return
    found = [str(v) for v in db.execute(sql("SELECT version_num FROM alembic_version")).scalars()]
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
