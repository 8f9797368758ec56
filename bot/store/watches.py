"""What the watches keep: each host's samples (up or not, and what was measured), and where each host's log watch
stopped reading, across restarts."""

from __future__ import annotations

import json
import time
from typing import Any

from bot.store.database import Database
from bot.store.engine import sql


class Samples:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, host: str, up: bool, data: dict[str, Any], at: float | None = None) -> None:
        with self.db.transaction() as db:
            db.execute(sql("INSERT INTO samples(host, at, up, data) VALUES (:host, :at, :up, :data)"),
                       {"host": host, "at": at or time.time(), "up": int(up),
                        "data": json.dumps(self.db.redactor.obj(data))})

    def for_host(self, host: str, since: float = 0.0, limit: int = 100_000) -> list[tuple[float, bool, dict[str, Any]]]:
        with self.db.transaction() as db:
            rows = db.execute(sql("SELECT at, up, data FROM samples WHERE host = :host AND at >= :since "
                                  "ORDER BY at DESC LIMIT :limit"),
                              {"host": host, "since": since, "limit": limit}).fetchall()
        return [(r[0], bool(r[1]), json.loads(r[2])) for r in reversed(rows)]

    def read_last_up(self) -> dict[str, float]:
        """Per host, when a watch last found the server up; waits for no write lock (the bot's own /metrics)."""
        with self.db.reader() as db:
            rows = db.execute(sql("SELECT host, MAX(at) FROM samples WHERE up = 1 GROUP BY host")).fetchall()
        return {r[0]: float(r[1]) for r in rows}

    def prune(self, older_than: float) -> None:
        with self.db.transaction() as db:
            db.execute(sql("DELETE FROM samples WHERE at < :at"), {"at": older_than})


class LogCursors:
    """Where each host's watch stopped reading its log: (path, head, offset)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, host: str) -> tuple[str, str, int] | None:
        """(path, head, offset): the file's first bytes identify it, so a rotated log starts again."""
        with self.db.transaction() as db:
            row = db.execute(sql('SELECT path, head, "offset" FROM log_cursors WHERE host = :host'),
                             {"host": host}).fetchone()
        return (row[0], row[1], int(row[2])) if row else None

    def put(self, host: str, path: str, head: str, offset: int) -> None:
        with self.db.transaction() as db:
            db.execute(sql('INSERT INTO log_cursors(host, path, head, "offset", at) VALUES (:host, :path, :head, '
                           ':offset, :at) ON CONFLICT(host) DO UPDATE SET path = excluded.path, head = excluded.head, '
                           '"offset" = excluded."offset", at = excluded.at'),
                       {"host": host, "path": path, "head": head, "offset": offset, "at": time.time()})
