"""The store's two engines for one test: a SQLite file in the test's directory, or a fresh database of its own on
the session's real PostgreSQL (tests/support/postgres.py). `state_on(kind, ...)` gives what `settings.state`
would hold."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

ENGINES = ("sqlite", "postgresql")
_names = itertools.count()


def state_on(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str | Path:
    """A new, empty state: a path for SQLite, a URL of a new database for PostgreSQL (skipped where the server
    cannot run, with the fixture's reason)."""
    if kind == "sqlite":
        return tmp_path / "specops.db"
    server = request.getfixturevalue("postgres_server")
    return str(server.create_database(f"store_{next(_names)}_{abs(hash(request.node.nodeid)) % 10**8}"))
