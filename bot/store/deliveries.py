"""Slack's delivery ids (an event id, a command's trigger id): one replica takes each, so a retry Slack sends to
another replica runs nothing twice."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from bot.core.durations import spoken
from bot.errors import StoreUnavailable
from bot.store.database import Database
from bot.store.engine import DATABASE_ERRORS, reason, sql

log = logging.getLogger("specops.store")

ACK_WAIT = 2.0  # s: Slack wants an acknowledgement within 3 s; what the store cannot say by then, it is away for
SEEN_KEEP = 3600.0  # Slack retries a delivery within minutes: its id is kept this long


class Deliveries:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._pool: ThreadPoolExecutor | None = None  # first's: an ack waits ACK_WAIT s at most
        self._lock = threading.Lock()

    def first(self, key: str, what: str = "") -> str | None:
        """None for the first replica that takes Slack's delivery `key` (an event id, a command's trigger id);
        for a later one, which replica took it. Across replicas: the row is in the shared store (PostgreSQL).
        SQLite is one replica's store, and the bot's own memory of deliveries suffices: nothing is written, so
        an acknowledgement never waits for the file's write lock. On PostgreSQL the one INSERT is atomic by
        itself: it takes neither the store's write lock nor this process's (a chat ack waits for no other call)."""
        if not self.db.pg:
            return None
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="specops-ack")
            pool = self._pool
        future = pool.submit(self._first, key, what)
        try:
            return future.result(timeout=ACK_WAIT)
        except FutureTimeout:
            future.add_done_callback(lambda done: self._late(done, key))
            raise StoreUnavailable(f"the state store did not answer within {spoken(ACK_WAIT)}") from None

    def _late(self, done: Future[str | None], key: str) -> None:
        """An INSERT that went through after its acknowledgement said the store was away: nothing ran, so
        Slack's retry must not find the delivery taken."""
        if done.exception() is None and done.result() is None:
            try:
                self.forget(key)
            except DATABASE_ERRORS as error:
                log.warning("could not forget delivery %s: %s", key, reason(error))

    def _first(self, key: str, what: str) -> str | None:
        with self.db.engine.begin() as db:
            cur = db.execute(sql("INSERT INTO slack_seen(key, at, replica, what) VALUES (:key, :at, :replica, :what) "
                                 "ON CONFLICT DO NOTHING"),
                             {"key": key, "at": time.time(), "replica": self.db.replica,
                              "what": self.db.redactor.text(what)[:200]})
            if cur.rowcount == 1:
                return None
            row = db.execute(sql("SELECT replica FROM slack_seen WHERE key = :key"), {"key": key}).fetchone()
        return str(row[0]) if row else "another replica"

    def forget(self, key: str) -> None:
        """The delivery did not go through: Slack's retry may run it."""
        if not self.db.pg:
            return
        with self.db.engine.begin() as db:
            db.execute(sql("DELETE FROM slack_seen WHERE key = :key"), {"key": key})

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
