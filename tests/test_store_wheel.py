"""The store's migrations ship in the wheel: a store opened from the wheel's files alone (no checkout on the path)
creates its schema through Alembic and stamps it."""

from __future__ import annotations

import io
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

from bot.app.configuration.wheel import build_wheel


def test_the_wheel_carries_the_migrations_and_a_store_from_it_migrates(tmp_path: Path) -> None:
    _name, data = build_wheel()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = set(zf.namelist())
        for shipped in ("bot/migrations/env.py", "bot/migrations/versions/baseline.py"):
            assert shipped in names, shipped
        zf.extractall(tmp_path / "site")
    state = tmp_path / "state" / "specops.db"
    code = ("import sys, bot.store.facade; from bot.redact import Redactor; "
            "assert bot.store.facade.__file__.startswith(sys.argv[2]); "
            "s = bot.store.facade.Store(sys.argv[1], Redactor()); s.locks.acquire('h1', 'U1', 'deploy'); s.close()")
    done = subprocess.run([sys.executable, "-c", code, str(state), str(tmp_path / "site")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "site"), "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    db = sqlite3.connect(state)
    try:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [("rollouts",)]
        assert db.execute("SELECT host, owner FROM locks").fetchall() == [("h1", "U1")]
    finally:
        db.close()
