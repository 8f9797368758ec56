"""More than one bot on one store: which replica leads (runs the schedules), and each replica's heartbeat.

Every replica answers chat; one leads. The leader holds the store's `LeaderSeat` (a PostgreSQL advisory lock
on its own connection, a flock beside a SQLite file) and runs the scheduler; the others try the seat every
third of the lease and take over when the leader's connection drops (a SIGKILL frees it at once, a silent
network within the lease) or when its heartbeat is older than the lease whatever its session says (a stopped or
hung leader, a network that stopped relaying but still acknowledges: its session is ended). Each beat writes the
replica's row (`specops status --bot` lists them) and renews the lease of the host locks it holds. Nothing the
database does stops the loop: every failure is logged and tried again, sooner first.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from bot.core.results.records import ReplicaView
from bot.leader_seat import LeaderSeat
from bot.store.engine import DATABASE_ERRORS
from bot.store.facade import Store
from bot.store.replicas import Replica

log = logging.getLogger("specops.replicas")


class Leadership:
    """This replica's part: a thread that beats and takes (or loses) the lead, calling `on_lead` / `on_lose`
    from that thread."""

    def __init__(self, store: Store, on_lead: Callable[[], None], on_lose: Callable[[], None],
                 *, lease: float | None = None, detail: str = "") -> None:
        self.store = store
        self.lease = lease if lease is not None else store.lease
        self.on_lead, self.on_lose = on_lead, on_lose
        self.detail = detail
        self.seat = LeaderSeat(store, timeout=max(1.0, self.lease / 6))
        self.started_at = time.time()
        self.leader_since: float | None = None
        self._failures = 0  # ticks failed in a row: the next try comes sooner than a third of the lease
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="specops-leadership", daemon=True)

    @property
    def leader(self) -> bool:
        return self.leader_since is not None

    @property
    def replica(self) -> str:
        return self.store.replica

    def start(self) -> Leadership:
        self.tick()  # the first replica leads from its first second, not a third of a lease later
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.pause):
            self.tick()

    @property
    def pause(self) -> float:
        """A third of the lease; after a failed tick 0.5 s, then doubling up to that third (a database back from a
        restart is found within a second or two, a lasting outage is not hammered)."""
        every = self.lease / 3
        return every if not self._failures else min(every, 0.5 * 2 ** (self._failures - 1))

    def tick(self) -> None:
        """One beat; never raises (an exception here would end the thread, and with it leadership for good)."""
        try:
            self._tick()
        except Exception as error:
            self._failures += 1
            log.warning("leadership check failed (%s: %s); trying again in %.1f s", type(error).__name__,
                        self.store.redactor.text(str(error).splitlines()[0] if str(error) else ""), self.pause)
        else:
            self._failures = 0

    def _tick(self) -> None:
        if self.leader and not self.seat.held():
            log.warning("lost the lead (the store's connection dropped): the schedules stop on this replica")
            self.leader_since = None
            self._call(self.on_lose)
        if not self.leader and not self._stop.is_set() and (self.seat.take() or self._take_from_stale()):
            self.leader_since = time.time()
            log.warning("replica %s leads: the schedules run here", self.replica)  # the line operators watch for
            self._call(self.on_lead)
        try:
            self.store.replicas.beat(self.leader, self.detail, started_at=self.started_at)
        except DATABASE_ERRORS as error:
            log.warning("heartbeat not written: %s", self.store.redactor.text(str(error).splitlines()[0]))

    def _take_from_stale(self) -> bool:
        """The seat is held, yet no replica's row says it leads with a heartbeat younger than the lease: its holder
        stopped beating. End that session (only if it is older than the lease) and take the seat."""
        now = time.time()
        rows = self.store.replicas.all()
        if any(r.leader and r.id != self.replica and now - r.heartbeat < self.lease for r in rows):
            return False
        return self.seat.evict_stale(self.lease) > 0 and self.seat.take()

    def _call(self, what: Callable[[], None]) -> None:
        try:
            what()
        except Exception:
            log.exception("leadership change failed")

    def stop(self) -> None:
        """A clean stop: the lead is given up at once (the next replica takes it at its next try)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.lease)
        if self.leader:
            self.leader_since = None
            self._call(self.on_lose)
        self.seat.close()
        try:
            self.store.replicas.leave()
        except DATABASE_ERRORS as error:
            log.warning("could not remove this replica's row: %s", error)


def _gone_here(r: Replica) -> bool:
    """A replica of this machine whose process is gone (SIGKILLed, crashed): known at once, not a lease later."""
    if r.machine != socket.gethostname() or r.pid == os.getpid():
        return False
    try:
        os.kill(r.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def replica_views(store: Store, now: float | None = None) -> list[ReplicaView]:
    """The replicas on the store, the leader first; one whose heartbeat is older than the lease is not alive, nor
    one of this machine whose process is gone."""
    now = now or time.time()
    rows: list[Replica] = store.replicas.all()
    out = [ReplicaView(r.id, r.machine, r.pid, r.started_at, max(0.0, now - r.heartbeat), r.leader,
                       now - r.heartbeat < store.lease and not _gone_here(r)) for r in rows]
    return sorted(out, key=lambda v: (not (v.leader and v.alive), not v.alive, v.started_at))
