"""A bounded pool for long work (deploys take minutes) and the plans waiting for confirmation.

bolt's listener pool has 5 threads; a deploy holding one would starve the bot. Listeners only
parse, authorize, acknowledge and submit here.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Protocol

from bot.adapters.selfmetrics import count_job
from bot.app.commands import Command
from bot.errors import OperationError

log = logging.getLogger("specops.jobs")


class Busy(OperationError):
    pass


@dataclass
class Job:
    id: str
    command: Command
    requester: str
    cancel: threading.Event = field(default_factory=threading.Event)
    # set once the job's audit row has its outcome: a job that fails before that leaves it to `on_error`
    recorded: bool = False


JobError = Callable[[Job, Exception], None]
CANCEL_POLL = 1.0  # s: how soon a Cancel pressed on another replica reaches the job


class SharedJobs(Protocol):
    """The store's running jobs (bot.store.jobs.Jobs on PostgreSQL): what another replica's Cancel press reaches."""

    def started(self, job_id: str, command: str, requester: str) -> None: ...

    def finished(self, job_id: str) -> None: ...

    def cancels(self) -> list[str]: ...


class LostJob(Protocol):
    """A job whose replica stopped before it finished, as the store returns it (bot.store.jobs.LostJob)."""

    id: str
    replica: str
    command: str
    channel: str | None
    thread_ts: str | None
    message_ts: str | None


class JobPool:
    def __init__(self, workers: int, max_queue: int, shared: SharedJobs | None = None) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="specops-job")
        self._slots = threading.BoundedSemaphore(workers + max_queue)
        self.jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._futures: set[Future[None]] = set()
        self._shared = shared
        self._poller: threading.Thread | None = None

    def _track(self, future: Future[None]) -> Future[None]:
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(lambda f: self._futures.discard(f))
        return future

    def submit(self, fn: Callable[[Job], None], command: Command, requester: str,
               on_error: JobError | None = None, job_id: str | None = None) -> Job:
        """Run `fn` in the pool. Whatever it raises reaches `on_error` (close the audit row, tell the user):
        a job that dies with its thread leaves a row 'started' for good and a user waiting for an answer.
        `job_id`: a confirmed plan's id, so the shared row names the plan (a replica that dies with the job leaves
        the row, and another replica says in the plan's thread that it was lost)."""
        if not self._slots.acquire(blocking=False):
            raise Busy("too many jobs queued")
        job = Job(job_id or uuid.uuid4().hex[:12], command, requester)
        with self._lock:
            self.jobs[job.id] = job
        if self._shared is not None:
            try:
                self._shared.started(job.id, command.text(), requester)
            except Exception as exc:  # the job still runs; only a Cancel pressed on another replica misses it
                log.warning("job %s: not recorded for the other replicas: %s", job.id, exc)
            self._poll_cancels()

        def run() -> None:
            started, ok = time.monotonic(), False
            try:
                fn(job)
                ok = True
            except Exception as exc:  # a bug in a job must not vanish with its thread
                log.exception("job %s (%s) failed", job.id, job.command.text())
                if on_error is not None:
                    try:
                        on_error(job, exc)
                    except Exception:
                        log.exception("job %s: its failure could not be reported", job.id)
            finally:
                count_job(job.command.verb, time.monotonic() - started, ok)
                with self._lock:
                    self.jobs.pop(job.id, None)
                self._slots.release()
                self._finished(job)

        self._track(self._pool.submit(run))
        return job

    def _finished(self, job: Job) -> None:
        if self._shared is None:
            return
        try:
            self._shared.finished(job.id)
        except Exception as exc:  # the row outlives the job; the Cancel press that finds it says the job is over
            log.warning("job %s: its shared row could not be removed: %s", job.id, exc)

    def _poll_cancels(self) -> None:
        """While this pool runs jobs, it looks every CANCEL_POLL s for Cancel presses other replicas recorded."""
        with self._lock:
            if self._poller is not None and self._poller.is_alive():
                return
            self._poller = threading.Thread(target=self._cancel_loop, name="specops-cancels", daemon=True)
            self._poller.start()

    def _cancel_loop(self) -> None:
        assert self._shared is not None
        while True:
            time.sleep(CANCEL_POLL)
            with self._lock:
                if not self.jobs:
                    self._poller = None
                    return
            try:
                asked = self._shared.cancels()
            except Exception as exc:  # the store is away: local presses still work; try again
                log.warning("could not read the Cancel presses of other replicas: %s", exc)
                continue
            for job_id in asked:
                job = self.get(job_id)
                if job is not None and not job.cancel.is_set():
                    log.info("job %s: cancel requested on another replica", job_id)
                    job.cancel.set()

    def submit_task(self, fn: Callable[[], None]) -> Future[None]:
        """Short work that must not run on a listener thread (posting a plan). Raises Busy when full."""
        if not self._slots.acquire(blocking=False):
            raise Busy("too many jobs queued")

        def run() -> None:
            try:
                fn()
            except Exception:
                log.exception("task failed")
            finally:
                self._slots.release()

        return self._track(self._pool.submit(run))

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self.jobs.get(job_id)

    def shutdown(self, timeout: float = 30.0) -> None:
        """Cancel every job and give them `timeout` s to stop what they started on the hosts."""
        for job in list(self.jobs.values()):
            job.cancel.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            pending = list(self._futures)
        wait(pending, timeout=timeout)


@dataclass
class Plan:
    id: str
    command: Command
    team: str | None
    user: str
    channel: str
    thread_ts: str | None
    expires_at: float
    message_ts: str | None = None
    state: str = "pending"  # pending | confirmed | cancelled | expired


class SharedPlans(Protocol):
    """Where plans live when replicas share a store (app.services' store): its plan rows (bot.store.plans.Plans)."""

    def save(self, plan_id: str, command: str, team: str | None, user: str, channel: str,
             thread_ts: str | None, expires_at: float) -> None: ...

    def set_message(self, plan_id: str, message_ts: str | None) -> None: ...

    def row(self, plan_id: str) -> tuple[str, str | None, str, str, str | None, float, str | None, str] | None: ...

    def settle(self, plan_id: str, state: str) -> str | None: ...


class Plans:
    """Plans awaiting their confirm button: in memory for one replica; in the shared store (`shared`) when
    several replicas answer, since Slack delivers the press to any of them. `parse` turns a stored command's
    text back into the command (the chat grammar's own parser)."""

    def __init__(self, ttl: float, shared: SharedPlans | None = None,
                 parse: Callable[[str], Command] | None = None) -> None:
        self.ttl = ttl
        self.shared = shared if parse is not None else None
        self._parse = parse
        self._plans: dict[str, Plan] = {}
        self._lock = threading.Lock()

    def new(self, command: Command, team: str | None, user: str, channel: str, thread_ts: str | None) -> Plan:
        plan = Plan(uuid.uuid4().hex[:12], command, team, user, channel, thread_ts, time.time() + self.ttl)
        if self.shared is not None:
            self.shared.save(plan.id, command.text(), team, user, channel, thread_ts, plan.expires_at)
        with self._lock:
            self._sweep()
            self._plans[plan.id] = plan
        return plan

    def posted(self, plan: Plan) -> None:
        """The plan's message is in the channel: another replica updates it when it settles the plan."""
        if self.shared is not None:
            self.shared.set_message(plan.id, plan.message_ts)

    def get(self, plan_id: str) -> Plan | None:
        with self._lock:
            mine = self._plans.get(plan_id)
        if mine is not None or self.shared is None or self._parse is None:
            return mine
        row = self.shared.row(plan_id)
        if row is None:
            return None
        command, team, user, channel, thread_ts, expires_at, message_ts, state = row
        try:
            parsed = self._parse(command)
        except Exception:  # a plan of another release's grammar: unknown here rather than run as something else
            return None
        return Plan(plan_id, parsed, team, user, channel, thread_ts, expires_at, message_ts, state)

    def settle(self, plan_id: str, state: str) -> tuple[Plan | None, str]:
        """Move a pending plan to `state` exactly once (across replicas when shared); (plan, why not) otherwise."""
        if self.shared is not None:
            plan = self.get(plan_id)
            if plan is None:
                return None, "this plan is unknown (it was settled long ago)"
            now = self.shared.settle(plan_id, state)
            if now is not None:
                return None, {"expired": "this plan expired: ask again",
                              "lost": "this plan was confirmed, but the replica running it stopped before it "
                                      "finished (its thread says so): nothing runs it now — ask again for a new "
                                      "plan"}.get(now, f"this plan was already {now}")
            plan.state = state
            with self._lock:
                if plan_id in self._plans:
                    self._plans[plan_id].state = state
            return plan, ""
        with self._lock:
            plan = self._plans.get(plan_id)
            if plan is None:
                return None, "this plan is unknown (the bot restarted, or it was settled long ago)"
            if plan.state != "pending":
                return None, f"this plan was already {plan.state}"
            if time.time() > plan.expires_at:
                plan.state = "expired"
                return None, "this plan expired: ask again"
            plan.state = state
            return plan, ""

    def _sweep(self) -> None:
        cutoff = time.time() - 3600
        for pid in [p.id for p in self._plans.values() if p.expires_at < cutoff]:
            del self._plans[pid]
