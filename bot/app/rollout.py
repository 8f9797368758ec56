"""`specops rollout PROFILE --hosts …|--group G`: a profile rolled over hosts batch by batch, each host gated on
what speculative decoding achieves there.

For each host of a batch (the canary first): what it serves now is measured on the shipped workload (the one
`tune` drives: bot/app/tuning/workload.py), the profile is deployed through the normal deploy path, the same workload
is driven for the soak time, the triage reads the new server's own window, and the gate (bot/core/gate.py)
compares after with before. Every host of the batch through the gate: the next batch. One not through (its
deploy failed, its measurement failed, or the gate said no): that batch is rolled back to what it served and the
rollout stops. Cancel (chat) or Ctrl-C restores every host the rollout changed.

The rollout holds every host's lock from start to end (a second rollout over one of them is refused), and
records its plan and each step in the store: after a crash, `--resume` carries on where it stopped and
`--abort` restores what it changed.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from bot.app.operations import ops
from bot.app.tuning.workload import Workload, load_prompts, serving_before, soak
from bot.config import Config
from bot.core.durations import spoken
from bot.core.gate import DEFAULT_GATE, Gate, compare, parse_gate
from bot.core.results.rollout import (
    GateClause,
    HostOutcome,
    HostState,
    RolloutPlan,
    RolloutResult,
    RolloutState,
    measurements_of,
)
from bot.core.results.tune import Measurement
from bot.engine.hosts import HostPool
from bot.engine.playbook import Progress, ProgressFn
from bot.errors import InputError, OperationError, SpecopsError
from bot.identity import default_owner
from bot.store.facade import Store
from bot.store.locks import LockHeld
from bot.store.rollouts import RolloutRecord

DEFAULT_SOAK = 300.0
DEFAULT_CONCURRENCY = (1, 8)
DEFAULT_REQUESTS = 4


class RolloutRefused(OperationError):
    """The rollout cannot start (a host is locked, nothing to resume): nothing was changed."""


def parse_duration(text: str) -> float:
    """'5m', '90s', '1h', '300' (seconds) -> seconds; a clear error otherwise."""
    raw = text.strip().lower()
    scale = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(raw[-1:])
    number = raw[:-1] if scale is not None else raw
    try:
        seconds = float(number) * (scale or 1.0)
    except ValueError:
        raise InputError(f"--soak {text!r}: give a duration such as 90s, 5m or 1h") from None
    if not 0 <= seconds <= 6 * 3600:
        raise InputError(f"--soak {text!r}: from 0 s to 6 h")
    return seconds


@dataclass
class RolloutRequest:
    config: Config
    profile: str
    hosts: Sequence[str]
    canary: int = 1
    batch: int = 1
    gate: Gate = field(default_factory=lambda: parse_gate(DEFAULT_GATE))
    soak: float = DEFAULT_SOAK
    concurrency: Sequence[int] = DEFAULT_CONCURRENCY
    requests: int = DEFAULT_REQUESTS
    workload: Workload | None = None
    force: bool = False  # deploy past a refusing check before launch (each host's deploy says what it went past)
    owner: str = field(default_factory=default_owner)
    progress: ProgressFn | None = None  # one line per host and step
    step_progress: ProgressFn | None = None  # the deploys' own steps
    cancel: threading.Event = field(default_factory=threading.Event)
    store: Store = field(kw_only=True)
    pool: HostPool = field(kw_only=True)


def batches_of(hosts: Sequence[str], canary: int, batch: int) -> tuple[tuple[str, ...], ...]:
    """The canary hosts first, then batches of `batch`: the order the rollout goes in."""
    if not hosts:
        raise InputError("rollout needs at least one host")
    if canary < 1 or batch < 1:
        raise InputError("--canary and --batch are at least 1")
    first = tuple(hosts[:canary])
    rest = list(hosts[canary:])
    return (first, *(tuple(rest[i:i + batch]) for i in range(0, len(rest), batch)))


def _check(req: RolloutRequest) -> None:
    req.config.profile(req.profile)
    for host in req.hosts:
        req.config.profile_for(req.profile, host)  # a host's overrides that do not fit the profile: said now
    if len(set(req.hosts)) != len(req.hosts):
        raise InputError("a host is named twice")


def plan(req: RolloutRequest, rollout_id: str | None = None) -> RolloutPlan:
    _check(req)
    serving = []
    for host in req.hosts:
        dep = req.store.deployments.latest(host)
        serving.append((host, dep.profile if dep is not None and dep.status == "serving" else None))
    return RolloutPlan(rollout_id, req.profile, batches_of(req.hosts, req.canary, req.batch), req.gate.text,
                       req.soak, tuple(serving), tuple(req.concurrency))


@dataclass
class _Host:
    """One host's progress, as the record keeps it (plain data: it goes to the store as JSON)."""

    host: str
    batch: int
    state: HostState = "pending"
    step: str = ""  # the step it is in, or reached: measure-before | deploy | soak | gate | restore
    before_profile: str | None = None
    before_known: bool = False  # what it served before was looked up (a resumed rollout keeps it)
    before: tuple[Measurement, ...] = ()
    after: tuple[Measurement, ...] = ()
    gate_passed: bool | None = None
    clauses: tuple[GateClause, ...] = ()
    why: str = ""
    bugs: tuple[str, ...] = ()
    diagnosis: str = ""
    restored: str = ""
    changed: bool = False  # the rollout deployed on it: a cancel or an abort restores it

    def record(self) -> dict[str, Any]:
        out = HostOutcome(self.host, self.batch, self.state, self.before_profile, self.before, self.after,
                          self.gate_passed, self.clauses, self.why, self.bugs, self.diagnosis, self.restored).as_json()
        out.update(step=self.step, before_known=self.before_known, changed=self.changed)
        return out

    @classmethod
    def from_record(cls, raw: dict[str, Any]) -> _Host:
        return cls(host=raw["host"], batch=int(raw["batch"]), state=raw["state"], step=raw.get("step", ""),
                   before_profile=raw.get("before_profile"), before_known=bool(raw.get("before_known")),
                   before=measurements_of(raw.get("before")), after=measurements_of(raw.get("after")),
                   gate_passed=raw.get("gate_passed"),
                   clauses=tuple(GateClause(c["clause"], c["passed"], c["said"]) for c in raw.get("clauses", [])),
                   why=raw.get("why", ""), bugs=tuple(raw.get("bugs", [])), diagnosis=raw.get("diagnosis", ""),
                   restored=raw.get("restored", ""), changed=bool(raw.get("changed")))

    def outcome(self) -> HostOutcome:
        return HostOutcome(self.host, self.batch, self.state, self.before_profile, self.before, self.after,
                           self.gate_passed, self.clauses, self.why, self.bugs, self.diagnosis, self.restored)


class _Run:
    """One rollout in progress: its hosts, its record, its timeline."""

    def __init__(self, req: RolloutRequest, the_plan: RolloutPlan, hosts: list[_Host], rollout_id: str) -> None:
        self.req = req
        self.plan = the_plan
        self.hosts = {h.host: h for h in hosts}
        self.id = rollout_id
        self.started = time.monotonic()
        self.timeline: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self.workload = req.workload or load_prompts()

    # --- saying and saving ---

    def say(self, host: str, status: str, message: str) -> None:
        with self._lock:
            self.timeline.append((time.monotonic() - self.started, f"{host}: {message}"))
            self.save()
        if self.req.progress is not None:
            h = self.hosts[host]
            where = "canary" if h.batch == 0 else f"batch {h.batch}"
            self.req.progress(Progress(list(self.hosts).index(host) + 1, len(self.hosts),
                                       f"rollout {self.req.profile}: {host} ({where})", status,
                                       time.monotonic() - self.started, message))

    def save(self, state: str | None = None) -> None:
        try:
            self.req.store.rollouts.update(self.id, progress=self.progress(), state=state)
        except SpecopsError:
            pass  # the record is help for after a crash; the rollout itself goes on (its report says all)

    def progress(self) -> dict[str, Any]:
        return {"hosts": [h.record() for h in self.hosts.values()],
                "timeline": [[round(t, 1), e] for t, e in self.timeline]}

    # --- one host ---

    def host_request(self, host: str, profile: str | None, cancel: threading.Event,
                     force: bool = False) -> ops.HostRequest:
        return ops.HostRequest(self.req.config, host, profile, owner=self.req.owner, progress=self.req.step_progress,
                               cancel=cancel, force=force, store=self.req.store, hosts=self.req.pool)

    def _measure(self, host: str, profile: str, seconds: float) -> tuple[Measurement, ...]:
        p = self.req.config.profile_for(profile, host)
        max_tokens = self.workload.max_tokens or p.probe_max_tokens
        with self.req.pool.session(host) as session:
            return tuple(soak(session, p.port, p.served_model_name or p.model, self.workload, max_tokens,
                              self.req.concurrency, self.req.requests, self.req.cancel, seconds=seconds,
                              count_errors=True))

    def one(self, host: str) -> None:
        """Measure what serves, deploy, soak, triage, gate: the host's state says how it ended."""
        h = self.hosts[host]
        req = self.req
        if not h.before_known:
            h.step = "measure-before"
            h.before_profile = serving_before(req.config, host, req.store, req.pool)
            h.before_known = True
            if h.before_profile is not None:
                self.say(host, "running", f"measuring what it serves now ({h.before_profile})")
                try:
                    h.before = self._measure(host, h.before_profile, 0.0)
                except Exception as exc:  # nothing changed yet: the host is left as it is
                    h.state, h.why = "failed", f"measuring {h.before_profile} before the change failed: {exc}"
                    self.say(host, "failed", h.why)
                    return
        if req.cancel.is_set():
            return
        h.step = "deploy"
        self.say(host, "running", f"deploying {req.profile}")
        h.changed = True
        try:
            report = ops.deploy(self.host_request(host, req.profile, req.cancel, force=req.force))
        except SpecopsError as exc:
            h.state, h.why = "failed", f"the deploy failed: {exc}"
            self.say(host, "failed", h.why)
            return
        op = report.operation
        found = report.diagnosis.findings if report.diagnosis is not None else []
        if op.status == "refused":  # its checks before launch: nothing started, nothing to restore
            h.changed = False
            h.state, h.why = "failed", f"{report.headline} (`--force` to roll it out anyway)"
            h.bugs = tuple(f.title for f in found if f.is_bug)
            h.diagnosis = report.headline
            self.say(host, "failed", h.why)
            return
        if op.status == "failed":
            h.state = "failed"
            h.why = "cancelled during the deploy" if req.cancel.is_set() else f"the deploy failed: {report.headline}"
            h.bugs = tuple(f.title for f in found if f.is_bug)
            h.diagnosis = report.headline
            self.say(host, "failed", h.why)
            return
        h.step = "soak"
        self.say(host, "running", f"driving the workload for {self.req.soak:.0f} s")
        try:
            h.after = self._measure(host, req.profile, req.soak)
        except Exception as exc:  # a measurement that fails is a failed gate, never a pass
            h.state, h.gate_passed, h.why = "failed", False, f"measuring {req.profile} failed: {exc}"
            self.say(host, "failed", h.why)
            return
        if req.cancel.is_set():
            return
        h.step = "gate"
        try:
            triage = ops.diagnose_host(self.host_request(host, None, req.cancel).but(probe=False))
            h.bugs = tuple(f.title for f in triage.findings if f.is_bug)
            h.diagnosis = triage.headline
        except SpecopsError as exc:
            h.diagnosis = f"the triage could not read the host: {exc}"
        verdict = req.gate.judge(compare(h.before, h.after, errors_before=sum(m.errors for m in h.before),
                                         errors_after=sum(m.errors for m in h.after), bugs=h.bugs))
        h.gate_passed = verdict.passed
        h.clauses = tuple(GateClause(c.text, c.passed, c.said) for c in verdict.clauses)
        h.why = verdict.why
        h.state = "passed" if verdict.passed else "failed"
        self.say(host, "ok" if verdict.passed else "failed", f"gate {'passed' if verdict.passed else 'failed'}: "
                                                              f"{verdict.why}")

    def restore(self, host: str, reason: str) -> None:
        """What the host served before, back (or its server stopped when it served nothing of ours)."""
        h = self.hosts[host]
        fresh = threading.Event()  # the rollout's cancel must not cancel its restore
        h.step = "restore"
        self.say(host, "running", f"restoring {h.before_profile or 'nothing (stopping the server)'}: {reason}")
        try:
            if h.before_profile is None:
                stopped = ops.stop(self.host_request(host, None, fresh))
                ok, headline = stopped.status != "failed", stopped.headline
                how = "stopped (it served nothing specops started before)"
            else:
                # what served before comes back as it was: its checks do not stop a restore
                rep = ops.deploy(self.host_request(host, h.before_profile, fresh, force=True))
                ok = rep.operation.status in ("changed", "unchanged")
                headline = rep.headline
                how = f"{h.before_profile} serving again"
        except SpecopsError as exc:
            ok, how, headline = False, f"the restore failed: {exc}", None
        except KeyboardInterrupt:
            ok, how, headline = False, "interrupted while restoring", None
        if not ok and headline is not None:
            how = f"the restore failed: {headline}"
        h.restored = how
        if h.state != "failed":
            h.state = "restored"
        if not ok:
            h.state = "restore-failed"
        h.changed = not ok
        self.say(host, "ok" if ok else "failed", how)

    # --- the batches ---

    def run(self) -> RolloutState:
        try:
            for index, batch in enumerate(self.plan.batches):
                todo = [h for h in batch if self.hosts[h].state != "passed"]
                if not todo:
                    continue
                if self.req.cancel.is_set():
                    return self.undo("cancelled")
                with ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="specops-rollout") as pool:
                    list(pool.map(self.one, todo))
                if self.req.cancel.is_set():
                    return self.undo("cancelled")
                failed = [h for h in batch if self.hosts[h].state == "failed"]
                if failed:
                    where = "the canary" if index == 0 else f"batch {index}"
                    for h in batch:
                        if self.hosts[h].changed:
                            self.restore(h, f"{where} did not pass the gate")
                    return "failed"
            return "passed"
        except KeyboardInterrupt:
            self.req.cancel.set()
            return self.undo("interrupted")

    def undo(self, state: RolloutState) -> RolloutState:
        """Cancelled or interrupted: every host the rollout changed is restored."""
        for h in self.hosts.values():
            if h.changed:
                self.restore(h.host, "the rollout was cancelled" if state == "cancelled" else "interrupted")
        return state


def _lock_all(req: RolloutRequest, rollout_id: str) -> list[str]:
    taken: list[str] = []
    try:
        for host in req.hosts:
            req.store.locks.acquire(host, req.owner, f"rollout {req.profile} ({rollout_id})")
            taken.append(host)
    except LockHeld as exc:
        for host in taken:
            req.store.locks.release(host, req.owner)
        raise RolloutRefused(f"rollout refused, nothing changed: {exc}") from None
    return taken


def rollout(req: RolloutRequest) -> RolloutResult:
    _check(req)
    rollout_id = uuid.uuid4().hex[:8]
    the_plan = plan(req, rollout_id)
    hosts = [_Host(h, i) for i, b in enumerate(the_plan.batches) for h in b]
    return _carry(req, the_plan, hosts, rollout_id, begin=True)


def _carry(req: RolloutRequest, the_plan: RolloutPlan, hosts: list[_Host], rollout_id: str,
           begin: bool) -> RolloutResult:
    taken = _lock_all(req, rollout_id)
    run = _Run(req, the_plan, hosts, rollout_id)
    try:
        if begin:
            req.store.rollouts.begin(rollout_id, req.profile, req.owner, the_plan.as_json() | {
                "gate": req.gate.text, "canary": req.canary, "batch": req.batch,
                "concurrency": list(req.concurrency), "requests": req.requests}, run.progress())
        else:
            req.store.rollouts.update(rollout_id, resumed=True)
        state = run.run()
        run.save(state)
    finally:
        for host in taken:
            req.store.locks.release(host, req.owner)
    return _result(run, state)


def _result(run: _Run, state: RolloutState) -> RolloutResult:
    outcomes = tuple(h.outcome() for h in run.hosts.values())
    passed = [h.host for h in outcomes if h.state == "passed"]
    failed = next((h for h in outcomes if h.gate_passed is False or (h.state in ("failed", "restore-failed")
                                                                      and not h.gate_passed)), None)
    profile = run.req.profile
    if state == "passed":
        headline = f"Rollout of {profile}: all {len(passed)} host(s) passed the gate"
    elif state == "failed" and failed is not None:
        where = "the canary" if failed.batch == 0 else f"batch {failed.batch}"
        headline = (f"Rollout of {profile} stopped at {where} ({failed.host}): {failed.why}; "
                    f"{len(passed)} host(s) kept it, the batch was restored")
    elif state in ("cancelled", "interrupted", "aborted"):
        headline = f"Rollout of {profile} {state}: every host it changed was restored"
    else:
        headline = f"Rollout of {profile}: {state}"
    if any(h.state == "restore-failed" for h in outcomes):
        bad = ", ".join(h.host for h in outcomes if h.state == "restore-failed")
        headline += f" — the restore FAILED on {bad}: see each host's line"
    return RolloutResult(run.id, profile, state, headline, run.plan, outcomes, tuple(run.timeline))


# --- after a crash ----------------------------------------------------------------------------------

def _stopped_record(store: Store, rollout_id: str | None, action: str = "resume") -> RolloutRecord:
    running = [r for r in store.rollouts.recent(state="running", limit=50) if rollout_id in (None, r.id)]
    if not running:
        if rollout_id is None:
            raise RolloutRefused(f"nothing to {action}: no rollout was left unfinished (a rollout that ended, passed "
                                 "or not, is over)")
        known = next((r for r in store.rollouts.recent(limit=200) if r.id == rollout_id), None)
        if known is None:
            raise RolloutRefused(f"no rollout {rollout_id!r}: nothing to {action} (`specops rollout --{action}` "
                                 "without --id takes the latest one left unfinished)")
        raise RolloutRefused(f"nothing to {action}: rollout {rollout_id} is over ({known.state})")
    stopped = [r for r in running if r.holder_gone]
    if not stopped:
        ago = spoken(max(0.0, time.time() - running[0].updated_at))
        raise RolloutRefused(f"rollout {running[0].id} is still running (its process is alive, its last step "
                             f"{ago} ago): Cancel it there, or wait")
    return stopped[0]


def _from_record(req_for: Callable[[RolloutRecord], RolloutRequest], store: Store, rollout_id: str | None,
                 action: str = "resume") -> tuple[RolloutRecord, RolloutRequest, RolloutPlan, list[_Host]]:
    """The dead rollout's record, the request it asks for, its plan and its hosts as it left them."""
    record = _stopped_record(store, rollout_id, action)
    req = req_for(record)
    the_plan = RolloutPlan(record.id, record.profile, tuple(tuple(b) for b in record.plan["batches"]),
                           req.gate.text, float(record.plan["soak_s"]), tuple(record.plan["serving"].items()),
                           tuple(req.concurrency))
    return record, req, the_plan, [_Host.from_record(h) for h in record.progress["hosts"]]


def _unchanged_since(req: RolloutRequest, record: RolloutRecord, hosts: list[_Host]) -> None:
    """Each host serves what the dead rollout left there — else someone changed it since (a fix by hand), and a
    resume would undo that: refused, saying what changed. Raises RolloutRefused."""
    planned = record.plan.get("serving", {})
    changed: list[str] = []
    for h in hosts:
        if h.state == "passed":
            expected: set[str | None] = {record.profile}
        elif h.changed:  # mid-deploy or mid-soak: the new profile, the old one, or nothing (a deploy cut short)
            expected = {record.profile, h.before_profile, None}
        else:
            expected = {h.before_profile if h.before_known else planned.get(h.host)}
        try:
            now = serving_before(req.config, h.host, req.store, req.pool)
        except SpecopsError as exc:
            raise RolloutRefused(f"cannot resume rollout {record.id}: {h.host} could not be read ({exc}); "
                                 "`--abort` restores every host it changed") from None
        if now not in expected:
            left = " or ".join(sorted(p or "nothing of specops'" for p in expected))
            changed.append(f"{h.host} serves {now or 'nothing of specops'} now, the rollout left {left}")
    if changed:
        raise RolloutRefused(f"cannot resume rollout {record.id}: changed since it stopped — " + "; ".join(changed)
                             + ". A resume would undo that: leave it and start a new rollout, or `specops rollout "
                             "--abort` to restore what each host served before the rollout")


def preview(req_for: Callable[[RolloutRecord], RolloutRequest], store: Store, rollout_id: str | None,
            action: str) -> RolloutPlan:
    """What `--resume` or `--abort` would do to each host of the dead rollout; nothing runs, nothing is locked."""
    record, _req, the_plan, hosts = _from_record(req_for, store, rollout_id, action)
    steps = []
    for h in hosts:
        if action == "resume":
            what = ("stays as it is: it passed the gate" if h.state == "passed" else
                    f"{record.profile} deployed again, soaked and judged (it was {h.state}"
                    + (f", at {h.step}" if h.step else "") + ")")
        else:
            what = (f"restored to {h.before_profile or 'nothing (it served nothing before)'}" if h.changed
                    else "left as it is: the rollout did not change it")
        steps.append((h.host, what))
    return replace(the_plan, action=action, steps=tuple(steps))


def resume(req_for: Callable[[RolloutRecord], RolloutRequest], store: Store,
           rollout_id: str | None = None) -> RolloutResult:
    """Carry on a rollout whose process died: the hosts through the gate stay, the one it was on starts again
    (what it served before is what the record says, not what a half-done deploy left)."""
    record, req, the_plan, hosts = _from_record(req_for, store, rollout_id)
    _unchanged_since(req, record, hosts)
    for h in hosts:
        if h.state not in ("passed",):
            h.state, h.gate_passed, h.why = "pending", None, ""
    return _carry(replace(req, hosts=[h.host for h in hosts]), the_plan, hosts, record.id, begin=False)


def abort(req_for: Callable[[RolloutRecord], RolloutRequest], store: Store,
          rollout_id: str | None = None) -> RolloutResult:
    """End a rollout whose process died: every host it changed gets back what it served before."""
    record, req, the_plan, hosts = _from_record(req_for, store, rollout_id, "abort")
    req = replace(req, hosts=[h.host for h in hosts])
    taken = _lock_all(req, record.id)
    run = _Run(req, the_plan, hosts, record.id)
    try:
        req.store.rollouts.update(record.id, resumed=True)
        state = run.undo("aborted")
        run.save(state)
    finally:
        for host in taken:
            req.store.locks.release(host, req.owner)
    return _result(run, state)
