"""Host locks as leases: one operation on a host at a time, across the processes and replicas on one store. A lock
whose holder is gone, or whose lease nobody renews, is taken over."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from bot.core.durations import spoken
from bot.errors import OperationError
from bot.store.database import Database
from bot.store.engine import DATABASE_ERRORS, reason, sql
from bot.store.holders import boot_id, holder_gone, process_start, this_boot

log = logging.getLogger("specops.store")


class LockHeld(OperationError):
    def __init__(self, host: str, owner: str, operation: str, started_at: float, lease: str = "") -> None:
        age = time.time() - started_at
        super().__init__(f"{host} is busy: {operation} by {owner}, started {spoken(age)} ago "
                         f"({time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(started_at))})"
                         + (f"; {lease}" if lease else ""))
        self.host, self.owner, self.operation, self.started_at = host, owner, operation, started_at


class Locks:
    def __init__(self, db: Database) -> None:
        self.db = db
        # the host locks this process holds: a thread renews their lease while there are any
        self._held: set[str] = set()
        self._renewer: threading.Thread | None = None
        self._nested: dict[str, tuple[str, int]] = {}  # host -> (owner, how many takes) of the locks held here
        self._renew_stop = threading.Event()
        self._mine = threading.Lock()  # guards what this process holds (_held, _nested, _renewer)

    def acquire(self, host: str, owner: str, operation: str) -> str | None:
        """Take HOST's lock, a lease this process renews while it holds it. A lock whose holder is gone (this
        machine: its process is not running) or whose lease expired (another machine: not renewed for
        `lease` s) is taken over; returns what was taken over, said in words. The owner that holds it through
        this store may take it again (a rollout holds its hosts while each deploy takes its own): the lock goes
        at the last release."""
        with self._mine:
            nested = self._nested.get(host)
            if nested is not None and nested[0] == owner:
                self._nested[host] = (owner, nested[1] + 1)
                return None
        with self.db.transaction() as db:
            row = db.execute(sql("SELECT owner, operation, started_at, pid, boot_id, pid_start, heartbeat, replica "
                                 "FROM locks WHERE host = :host"), {"host": host}).fetchone()
            taken_over = None
            now = time.time()
            if row is not None:
                taken_over = self._takeover(host, row, now)
                db.execute(sql("DELETE FROM locks WHERE host = :host"), {"host": host})
            me = os.getpid()
            db.execute(sql("INSERT INTO locks(host, owner, operation, started_at, pid, boot_id, heartbeat, pid_start, "
                           "replica) VALUES (:host, :owner, :operation, :now, :pid, :boot, :now, :start, :replica)"),
                       {"host": host, "owner": owner, "operation": operation, "now": now, "pid": me,
                        "boot": boot_id(), "start": process_start(me), "replica": self.db.replica})
        with self._mine:
            self._nested[host] = (owner, 1)
        self._hold(host)
        return taken_over

    def _takeover(self, host: str, row: Any, now: float) -> str:
        """Why the lock in `row` may be taken, or LockHeld."""
        owner, operation, started, pid, boot, pid_start, beat, replica = row
        if holder_gone(pid, boot, pid_start):
            return f"{operation} by {owner} (its process {pid} is gone)"
        whose = f"{operation} by {owner} (replica {replica})"
        if this_boot(boot) or not replica or beat is None:
            # this machine's live holder; or a lock of a release before leases, which nothing renews
            raise LockHeld(host, owner, operation, started)
        silent = now - float(beat)
        lease = self.db.lease
        if silent < lease:
            raise LockHeld(host, owner, operation, started,
                           lease=f"its lease was renewed {spoken(silent)} ago and expires in "
                                 f"{spoken(lease - silent)} unless renewed")
        return f"{whose}: its lease expired, not renewed for {spoken(silent)} (the lease is {spoken(lease)})"

    def _hold(self, host: str) -> None:
        with self._mine:
            self._held.add(host)
            if self._renewer is None or not self._renewer.is_alive():
                self._renewer = threading.Thread(target=self._renew, name="specops-lease", daemon=True)
                self._renewer.start()

    def _renew(self) -> None:
        """Every third of the lease: this process's locks are renewed; ends when it holds none."""
        while not self._renew_stop.wait(self.db.lease / 3):
            with self._mine:
                held = sorted(self._held)
            if not held:
                return
            try:
                self.renew()
            except DATABASE_ERRORS as error:  # the next beat tries again; the lease has two more beats
                log.warning("could not renew the lease of %s: %s", ", ".join(held), reason(error))

    def renew(self) -> None:
        with self.db.transaction() as db:
            db.execute(sql("UPDATE locks SET heartbeat = :now WHERE replica = :replica"),
                       {"now": time.time(), "replica": self.db.replica})

    def stale(self, host: str) -> bool:
        """The lock's holder process is gone (a SIGKILLed bot): nothing holds it any more."""
        with self.db.transaction() as db:
            row = db.execute(sql("SELECT pid, boot_id, pid_start FROM locks WHERE host = :host"),
                             {"host": host}).fetchone()
        return row is not None and holder_gone(row[0], row[1], row[2])

    def release(self, host: str, owner: str) -> None:
        with self._mine:
            nested = self._nested.get(host)
            if nested is not None and nested[0] == owner and nested[1] > 1:
                self._nested[host] = (owner, nested[1] - 1)
                return
            self._nested.pop(host, None)
        with self.db.transaction() as db:
            db.execute(sql("DELETE FROM locks WHERE host = :host AND owner = :owner"), {"host": host, "owner": owner})
        with self._mine:
            self._held.discard(host)

    def clear(self, host: str) -> bool:
        """Break HOST's lock, whoever holds it: True if there was one."""
        with self._mine:
            self._nested.pop(host, None)
        with self.db.transaction() as db:
            return db.execute(sql("DELETE FROM locks WHERE host = :host"), {"host": host}).rowcount > 0

    def holder(self, host: str) -> tuple[str, str, float] | None:
        """(owner, operation, started_at) of HOST's lock, if it has one."""
        with self.db.transaction() as db:
            row = db.execute(sql("SELECT owner, operation, started_at FROM locks WHERE host = :host"),
                             {"host": host}).fetchone()
        return (row[0], row[1], row[2]) if row else None

    def close(self) -> None:
        self._renew_stop.set()
