"""The session's real PostgreSQL (tests/support/postgres.py), through what the store will use: SQLAlchemy Core on
psycopg 3. The primitives issue 23 builds on — transactional DDL, the driver's auth error and its redaction, a
session-level advisory lock as the leader's — are checked here against the server itself."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from bot.redact import Redactor, redactor_for
from tests.support.postgres import Postgres
from tests.support.served import wait_for

LEADER_KEY = 0x5BEC0B5  # any bigint: the key the replicas agree on


@pytest.fixture
def engine(postgres_url: str) -> Iterator[sa.Engine]:
    eng = sa.create_engine(postgres_url, poolclass=NullPool)  # a closed connection really closes
    try:
        yield eng
    finally:
        eng.dispose()


def test_the_url_is_psycopg_on_loopback(postgres_url: str, engine: sa.Engine) -> None:
    url = sa.make_url(postgres_url)
    assert (url.drivername, url.host, url.username, url.database) == (
        "postgresql+psycopg", "127.0.0.1", "specops", "specops")
    assert engine.dialect.driver == "psycopg"
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT current_user, current_database()")).one() == ("specops", "specops")
        assert conn.execute(sa.text("SHOW listen_addresses")).scalar_one() == "127.0.0.1"
        assert conn.execute(sa.text("SHOW password_encryption")).scalar_one() == "scram-sha-256"


def test_core_creates_a_table_and_a_failed_transaction_leaves_nothing(engine: sa.Engine) -> None:
    meta = sa.MetaData()
    table = sa.Table("fixture_rows", meta, sa.Column("id", sa.Integer, primary_key=True),
                     sa.Column("name", sa.String(40), nullable=False))
    meta.create_all(engine)
    try:
        with engine.begin() as conn:
            conn.execute(table.insert(), [{"name": "kept"}])
        with pytest.raises(RuntimeError), engine.begin() as conn:
            conn.execute(table.insert(), [{"name": "rolled back"}])
            raise RuntimeError("half-way")
        with engine.connect() as conn:
            assert conn.execute(sa.select(table.c.name)).scalars().all() == ["kept"]
        # DDL is transactional on PostgreSQL: a migration that fails half-way leaves the old schema
        with pytest.raises(sa.exc.ProgrammingError), engine.begin() as conn:
            conn.execute(sa.text("ALTER TABLE fixture_rows ADD COLUMN extra integer"))
            conn.execute(sa.text("ALTER TABLE no_such_table ADD COLUMN extra integer"))
        with engine.connect() as conn:
            assert [c["name"] for c in sa.inspect(conn).get_columns("fixture_rows")] == ["id", "name"]
    finally:
        meta.drop_all(engine)


def test_a_wrong_password_is_psycopgs_auth_error_and_redacted(postgres_server: Postgres) -> None:
    wrong = postgres_server.url_for("specops", password="not-the-password-9f2c")
    eng = sa.create_engine(wrong, poolclass=NullPool)
    with pytest.raises(sa.exc.OperationalError) as caught:
        eng.connect()
    assert isinstance(caught.value.orig, psycopg.OperationalError)
    assert 'password authentication failed for user "specops"' in str(caught.value)
    # what the store will say: the URL with the driver's reason; the password never shows
    line = f"state store {wrong} unreachable: {caught.value.orig}"
    for redactor in (redactor_for(None), _learned(wrong)):
        said = redactor.text(line)
        assert "not-the-password-9f2c" not in said
        assert "password authentication failed" in said and "127.0.0.1" in said


def test_a_percent_encoded_password_is_learned_decoded() -> None:
    secret = "p@ss/w:rd%Zz9"
    url = f"postgresql+psycopg://specops:{quote(secret, safe='')}@db:5432/specops"
    assert sa.make_url(url).password == secret
    assert secret not in _learned(url).text(f"connecting with {secret}")


def _learned(url: str) -> Redactor:
    redactor = Redactor()
    redactor.learn_url(url)
    return redactor


def _try_lock(conn: sa.Connection) -> bool:
    return bool(conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": LEADER_KEY}).scalar_one())


def test_an_advisory_lock_is_held_by_one_connection_until_it_closes(engine: sa.Engine) -> None:
    leader, other = engine.connect(), engine.connect()
    try:
        assert _try_lock(leader)
        assert not _try_lock(other)  # the standby's try fails at once, it does not wait
        other.rollback()
        assert not _try_lock(other)  # a session lock outlives transactions
        leader.close()  # the leader's connection goes: PostgreSQL releases its session locks
        # once its backend has exited, which follows the client's close by a moment: wait, with a deadline
        wait_for("the lock released by the closed connection", lambda: _try_lock(other), 10)
    finally:
        leader.close()
        other.close()


def test_a_pooled_connection_keeps_its_advisory_lock(postgres_url: str) -> None:
    """SQLAlchemy's pool only rolls back a returned connection: a lock taken on it stays with the pooled session,
    so the leader must hold its lock on a connection of its own, never one it hands back to a pool."""
    pooled = sa.create_engine(postgres_url, pool_size=1, max_overflow=0)
    try:
        with pooled.connect() as conn:
            # a lock the test before held is released when its backend exits, a moment after its close: under load
            # that moment can still be running here, so the first take waits for it, with a deadline
            wait_for("the leader key free to take", lambda: _try_lock(conn), 10)
        with pooled.connect() as conn:  # the same session back from the pool
            locks = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
            assert conn.execute(sa.text(locks)).scalar_one() == 1
            conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": LEADER_KEY})
    finally:
        pooled.dispose()


def test_a_dropped_leader_connection_frees_the_lock(engine: sa.Engine) -> None:
    """The failover case: the leader's backend is gone (a killed replica's socket closes the same way)."""
    leader, other = engine.connect(), engine.connect()
    try:
        assert _try_lock(leader)
        pid = leader.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        assert not _try_lock(other)
        assert other.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar_one()
        other.commit()
        deadline = 50
        while not _try_lock(other) and deadline:  # the backend's exit is asynchronous to terminate's return
            other.execute(sa.text("SELECT pg_sleep(0.05)"))
            deadline -= 1
        assert deadline, "the lock was not released after its connection was terminated"
    finally:
        leader.invalidate()
        other.close()
