"""Use cases. Adapters (CLI, console, Slack, scheduler) call these and nothing below them."""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeVar

from bot.app.diagnosis.diagnose import (
    diagnose_parsed,
    prom_window,
    running_of,
)
from bot.app.diagnosis.facts import profile_flags
from bot.app.operations import launch_gate
from bot.config import Config
from bot.core.logparse import LineParser
from bot.core.logread import parse_bytes
from bot.core.parsed_log import ParsedLog, resolve_log_years
from bot.core.report import MetricsOut, OperationOut, Report, StepResult
from bot.core.results.health import HealthReport
from bot.core.results.operation import OperationResult
from bot.core.triage.findings import Finding
from bot.engine.hosts import HostPool, HostSession
from bot.engine.hostvars import HostVars, fingerprint_of, host_variables
from bot.engine.playbook import Playbook, ProgressFn, RunState, load_playbook
from bot.engine.runner import run_playbook
from bot.engine.steps import process_matches
from bot.errors import InputError, SpecopsError
from bot.identity import default_owner
from bot.store.deployments import Deployment
from bot.store.facade import Store

log = logging.getLogger("specops.ops")
# what this operation's lock took over (a gone holder, an expired lease): said in its report
_TAKEN_OVER: ContextVar[str | None] = ContextVar("specops_taken_over", default=None)



# --- on a host, over SSH ------------------------------------------------------------------------

@dataclass
class HostRequest:
    """One host operation. `store` and `hosts` come from the object graph (app/services.py)."""

    config: Config
    host: str
    profile: str | None = None
    dry_run: bool = False
    force: bool = False  # deploy past a refusing check before launch
    probe: bool = True
    owner: str = field(default_factory=default_owner)
    progress: ProgressFn | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    store: Store = field(kw_only=True)
    hosts: HostPool = field(kw_only=True)

    def but(self, **changes: Any) -> HostRequest:
        """The same request with these fields changed (the graph and who asks stay)."""
        return replace(self, **changes)


def _read_meta(session: HostSession, v: HostVars) -> dict[str, Any]:
    raw = session.read_file(v["meta_file"])
    if not raw:
        return {}
    try:
        meta = json.loads(raw)
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


def _steps_out(results: list[StepResult]) -> list[StepResult]:
    """The steps as the report keeps them: copies (the run's own go on being read), durations to 10 ms."""
    return [replace(r, duration=round(r.duration, 2), output=list(r.output)) for r in results]


def _parsed_from_state(state: RunState, extra_lines: list[str]) -> ParsedLog:
    """What the collect step read of the log; else what the wait step streamed since the start."""
    parsed = state.parsed_log if state.parsed_log is not None else parse_bytes(bytes(state.log_bytes))
    if extra_lines:  # output of a failed step, e.g. nvidia-smi's "No devices were found"
        parser = LineParser()
        for text in extra_lines:
            parser.feed(text)
        parsed.extend(parser.result)
    resolve_log_years(parsed, datetime.now())
    return parsed


def _gpu_name(gpus: Any) -> str | None:
    """The host's first GPU as nvidia-smi named it (pre-flight): the report sets it beside capability checks."""
    if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict) and isinstance(gpus[0].get("name"), str):
        return str(gpus[0]["name"])
    return None


def _triage(req: HostRequest, v: HostVars, state: RunState, extra_lines: list[str],
            server_alive: bool | None, health_ok: bool | None) -> Report:
    profile = req.config.served_profile(v.get("profile_name"), req.host)
    parsed = _parsed_from_state(state, extra_lines)
    prom, notes = prom_window(state.scrapes)
    flags = profile_flags(profile, host=req.host, origin="the host and its profile",
                          env=req.config.host(req.host).vllm_env, floors=req.config.watch.rules.first_position_floor,
                          vllm_version=state.facts.get("vllm_version"),
                          drafter_config=state.facts.get("drafter_config"),
                          probe_tps=state.facts.get("probe_tps"), server_alive=server_alive, health_ok=health_ok,
                          gpu=_gpu_name(state.facts.get("gpus")))
    source = f"{req.host}:{v['log_file']}"
    return diagnose_parsed(parsed, flags, prom, notes=notes, source=source, running=running_of(state.scrapes),
                           metrics_from="scrape" if state.scrapes else "")


def _operation(kind: str, req: HostRequest, status: str, results: list[StepResult], started: float,
               message: str = "", probe_tps: float | None = None) -> OperationOut:
    failed = next((r for r in results if r.status == "failed"), None)
    return OperationOut(kind=kind, host=req.host, profile=req.profile, status=status, message=message,
                        failed_step=f"{failed.index}. {failed.name}" if failed else None, steps=_steps_out(results),
                        probe_tps=round(probe_tps, 1) if probe_tps else None,
                        duration=round(time.monotonic() - started, 1))


def _step_failed_finding(failed: StepResult) -> Finding:
    return Finding(
        id="step-failed", title=f"Step {failed.index} ({failed.name}) failed", severity="critical",
        confidence="high", summary=failed.message or "the step failed", evidence=failed.output[-10:],
        remediation=["Fix what the step reports, then run the same command again."], priority=12,
    )


def _plan_operation(kind: str, req: HostRequest, playbook: Playbook, v: HostVars) -> tuple[OperationOut, str]:
    """The playbook's dry run: every step as it would run, nothing run; and the plan's headline."""
    state = RunState(variables=dict(v), dry_run=True)
    started = time.monotonic()
    outcome = run_playbook(playbook, None, state)
    failed = outcome.failed
    status = "failed" if failed else "planned"
    op = _operation(kind, req, status, outcome.results, started,
                    message=failed.message if failed else f"dry run: {len(outcome.results)} steps, nothing ran")
    what = f"{kind} {req.profile} on {req.host}" if req.profile else f"{kind} on {req.host}"
    return op, f"Plan: {what}"


def _record_found_serving(store: Store, host: str, profile: str, fp: str, pid: int) -> None:
    """What the host serves becomes its latest row again when a later row (a cancelled or failed deploy of
    something else) says otherwise: the rows follow the host, not the last attempt."""
    latest = store.deployments.latest(host)
    if latest is not None and latest.status == "serving" and latest.fingerprint == fp:
        return
    dep_id = store.deployments.record(host, profile, fp, "running")
    store.deployments.update(dep_id, status="serving", pid=pid, finished=True,
                             detail={"message": f"found {profile} serving (PID {pid}), unchanged"})


_Noted = TypeVar("_Noted", Report, OperationResult)


def _noting_takeover(run: Callable[[HostRequest], _Noted]) -> Callable[[HostRequest], _Noted]:
    """The result says so when the operation took over a lock whose holder was gone or whose lease expired."""
    @functools.wraps(run)
    def noted(req: HostRequest) -> _Noted:
        token = _TAKEN_OVER.set(None)
        try:
            report = run(req)
            taken = _TAKEN_OVER.get()
        finally:
            _TAKEN_OVER.reset(token)
        if taken:
            report.notes.insert(0, f"took over the lock of {req.host}: {taken}")
        return report
    return noted


@_noting_takeover
def deploy(req: HostRequest) -> OperationResult:
    if req.profile is None:
        raise InputError("deploy needs a profile")
    req.config.host(req.host)
    profile = req.config.profile_for(req.profile, req.host)
    v = host_variables(req.config, req.host, req.profile)
    playbook = load_playbook(profile.playbook if profile.playbook != "deploy" else
                             ("deploy-dflash" if profile.method == "dflash" else "deploy-mtp"))
    started = time.monotonic()
    # nothing runs on the host before the checks: a refusal stops here
    checked = launch_gate.check(req.config, req.profile, req.host, req.hosts)
    if checked.refused and not req.force:
        return launch_gate.refused(checked, planned=req.dry_run, duration=time.monotonic() - started)
    if req.dry_run:
        return launch_gate.shown(OperationResult(*_plan_operation("deploy", req, playbook, v)), checked,
                                 forced=req.force)
    result = _deploy(req, playbook, v, started, [c.title for c in checked.refused])
    if checked.refused and result.operation.status != "unchanged":
        result.operation.message += " (forced past: " + "; ".join(c.title for c in checked.refused) + ")"
    return launch_gate.shown(result, checked, forced=req.force)


def _deploy(req: HostRequest, playbook: Playbook, v: HostVars, started: float, forced: list[str]) -> OperationResult:
    """The deploy past its gate. `forced`: the refusing checks `--force` went past (kept in the deployment's row)."""
    assert req.profile is not None  # deploy() refused a request without one
    fp = fingerprint_of(v)
    said: dict[str, Any] = {"forced": forced} if forced else {}
    store = _locked_store(req, f"deploy {req.profile}")
    try:
        with req.hosts.session(req.host) as session:
            meta = _read_meta(session, v)
            if meta.get("fingerprint") == fp and isinstance(meta.get("pid"), int):
                ours, _, _ = process_matches(session, meta["pid"], v["config_file"])
                if ours:
                    _record_found_serving(store, req.host, req.profile, fp, meta["pid"])
                    report = diagnose_host(req.but(profile=None, probe=False), session=session)
                    report.operation = None  # the deploy's own steps are the result's; the diagnosis judges
                    op = _operation("deploy", req, "unchanged", [], started,
                                    message=f"{req.profile} is already serving (PID {meta['pid']})")
                    return OperationResult(op, f"Unchanged: {req.profile} already serving on {req.host} — "
                                               f"{report.headline}", report)
            previous = store.deployments.latest(req.host)  # what the host served before: a failure may stop it
            dep_id = store.deployments.record(req.host, req.profile, fp, "running", detail=said)
            # earlier starts of this profile here: the /health wait says what to expect of this one
            state = RunState(variables=dict(v), progress=req.progress, cancel=req.cancel,
                             startup_history=store.startups.history(req.host, req.profile))
            try:
                outcome = run_playbook(playbook, session, state)
                failed = outcome.failed
                results = outcome.results
            except SpecopsError as exc:  # the host vanished (or a step could not run) in the middle of a step
                failed = _interrupted(state, exc)
                results = state.results
            except BaseException:
                # a bug, or the bot stopping: the row and the server this run started are not left behind
                pid = state.facts.get("pid")
                store.deployments.update(dep_id, status="failed", pid=pid if isinstance(pid, int) else None,
                                         finished=True,
                                         detail={**said, "step": _step_name(state), "message": "interrupted"})
                _cleanup_quietly(session, v, pid)
                raise
            pid = state.facts.get("pid")
            startup = state.facts.get("startup")
            if startup is not None:  # the server reached ready, whatever a later step found
                store.startups.record(req.host, req.profile, startup)
            if failed is None:
                session.put(json.dumps({"profile": req.profile, "fingerprint": fp, "pid": pid, "owner": req.owner,
                                        "started_at": time.time()}).encode(), v["meta_file"], 0o644)
                store.deployments.update(dep_id, status="serving", pid=pid, finished=True)
                report = _triage(req, v, state, [], True, True)
                op = _operation("deploy", req, "changed", outcome.results, started, message=f"serving, PID {pid}",
                                probe_tps=state.facts.get("probe_tps"))
                return OperationResult(op, report.headline, report)
            # the row first: whatever happens next, it says which step failed and why
            store.deployments.update(dep_id, status="failed", pid=pid if isinstance(pid, int) else None, finished=True,
                                     detail={**said, "step": failed.name, "message": failed.message})
            left = _cleanup_quietly(session, v, pid) + _previous_stopped(store, req, previous, results, failed)
            store.deployments.update(dep_id, detail={**said, "step": failed.name, "message": failed.message,
                                                     "left": left})
            try:
                report = _triage(req, v, state, failed.output, None, None)
            except SpecopsError:  # the host is gone: report what the run itself saw
                report = Report(verdict="failing", headline="", metrics=MetricsOut(), findings=[],
                                context={"host": req.host, "version_text": str(v.get("vllm_version_expected"))})
            report.findings.insert(0, _step_failed_finding(failed))
            report.verdict = "failing"
            report.headline = f"Deploy failed at step {failed.index} ({failed.name}): {failed.message}"
            op = _operation("deploy", req, "failed", results, started, message=f"step {failed.index} failed; {left}")
            return OperationResult(op, report.headline, report, notes=[left])
    finally:
        store.locks.release(req.host, req.owner)


def _previous_stopped(store: Store, req: HostRequest, previous: Deployment | None, results: list[StepResult],
                      failed: StepResult) -> str:
    """A deploy that stopped the server before it (its `stop` step) and then failed or was cancelled leaves the
    host serving nothing: said plainly, with how to bring the old one back, and the old row says stopped."""
    stopped = next((r for r in results if r.kind == "stop" and r.status == "changed"), None)
    if stopped is None or previous is None or previous.status != "serving":
        return ""
    store.deployments.update(previous.id, status="stopped", finished=True, detail={
        **previous.detail, "stopped_by": f"the deploy of {req.profile}, which then "
                                         f"{'was cancelled' if req.cancel.is_set() else 'failed'} "
                                         f"at step {failed.index} ({failed.name})"})
    return (f"; {req.host} now serves nothing: this deploy stopped {previous.profile} at step {stopped.index} "
            f"({stopped.message}) before it stopped itself — `specops deploy {previous.profile} --host {req.host}` "
            "brings it back")


def _locked_store(req: HostRequest, operation: str) -> Store:
    """The store, with the host's lock taken for `operation` (LockHeld names who holds it)."""
    taken = req.store.locks.acquire(req.host, req.owner, operation)
    if taken:
        log.warning("took over the lock of %s: %s", req.host, taken)
        _TAKEN_OVER.set(taken)
    return req.store


def _last_failed(req: HostRequest) -> str:
    """What the last deploy left, when it failed before it could record itself on the host."""
    dep = req.store.deployments.latest(req.host)
    if dep is None or dep.status != "failed":
        return ""
    left = str(dep.detail.get("left", ""))
    step = dep.detail.get("step")
    said = f"; the last deploy ({dep.profile}) failed" + (f" at step {step!r}" if step else "")
    return said + (f", and {left}" if "may still be running" in left else "")


def _step_name(state: RunState) -> str:
    return state.current[1] if state.current else "before the first step"


def _interrupted(state: RunState, exc: Exception) -> StepResult:
    """The step that was running when the host went away, as a failed step with the reason."""
    index, name, kind = state.current or (len(state.results) + 1, "connect", "run")
    result = StepResult(index, name, kind, "failed", message=str(exc))
    if not state.results or state.results[-1].index != index:
        state.results.append(result)
    return result


def _cleanup_quietly(session: HostSession, v: HostVars, pid: Any) -> str:
    """Stop what a failed deploy started, by its PID; say what is left on the host either way."""
    host = v.get("host_name", "the host")
    if not isinstance(pid, int):
        return f"nothing was started on {host}"
    try:
        message = _cleanup_failed_start(session, v, pid)
    except Exception as exc:  # the host is unreachable: the server may still run there
        return (f"the server this deploy started (PID {pid}) may still be running on {host}: could not stop it "
                f"({exc}); stop it with `specops stop --host {host}` once the host answers")
    return f"stopped the server this deploy started (PID {pid}){': ' + message if message else ''}"


def _cleanup_failed_start(session: HostSession, v: HostVars, pid: Any) -> str:
    """A deploy that failed after starting leaves nothing running: stop what it started, by PID."""
    if not isinstance(pid, int):
        return ""
    stop_state = RunState(variables=dict(v))
    outcome = run_playbook(load_playbook("stop"), session, stop_state)
    session.run(["rm", "-f", v["meta_file"]], timeout=10)
    return outcome.results[-1].message if outcome.results else ""


def diagnose_host(req: HostRequest, session: HostSession | None = None) -> Report:
    """One pass over the host: what the deployment specops started is doing now."""
    meta: dict[str, Any] = {}
    started = time.monotonic()
    own = session is None
    sess = session or req.hosts.session(req.host)
    try:
        sess.connect()
        v0 = host_variables(req.config, req.host, None)
        meta = _read_meta(sess, v0)
        profile_name = req.profile or meta.get("profile")
        if profile_name and profile_name not in req.config.profiles:
            profile_name = None
        if profile_name is None:
            raise InputError(f"no deployment recorded on {req.host}{_last_failed(req)}: deploy one first "
                             f"(`deploy PROFILE {req.host}`)")
        v = host_variables(req.config, req.host, profile_name)
        v["pid"] = meta.get("pid") if isinstance(meta.get("pid"), int) else None
        v["probe"] = req.probe
        sub = req.but(profile=profile_name, dry_run=False)
        state = RunState(variables=dict(v), progress=req.progress, cancel=req.cancel)
        outcome = run_playbook(load_playbook("diagnose"), sess, state)
        alive_step = next((r for r in outcome.results if r.name == "server process"), None)
        server_alive = None if alive_step is None or alive_step.status == "skipped" else alive_step.status != "failed"
        health_ok = state.variables.get("health_status") == 200
        report = _triage(sub, v, state, [], server_alive, health_ok)
        report.operation = _operation("diagnose", sub, "ok", outcome.results, started,
                                      message=f"profile {profile_name}" + (f", PID {v['pid']}" if v["pid"] else ""),
                                      probe_tps=state.facts.get("probe_tps"))
        return report
    finally:
        if own:
            sess.close()


@_noting_takeover
def stop(req: HostRequest) -> OperationResult:
    """Stop the server specops started there: its steps and their outcome (a stop judges no server: no verdict)."""
    req.config.host(req.host)
    v = host_variables(req.config, req.host, None)
    playbook = load_playbook("stop")
    if req.dry_run:
        return OperationResult(*_plan_operation("stop", req, playbook, v))
    store = _locked_store(req, "stop")
    started = time.monotonic()
    try:
        with req.hosts.session(req.host) as session:
            meta = _read_meta(session, v)
            state = RunState(variables=dict(v), progress=req.progress, cancel=req.cancel)
            outcome = run_playbook(playbook, session, state)
            result = outcome.results[-1]
            if result.status == "changed":
                session.run(["rm", "-f", v["meta_file"]], timeout=10)
            if result.status != "failed":  # nothing serves there now: no row may say it does
                store.deployments.stop(req.host, f"stopped by {req.owner}")
            op = _operation("stop", req, result.status, outcome.results, started, message=result.message)
            op.profile = meta.get("profile")
            return OperationResult(op, f"Stop on {req.host}: {result.message}")
    finally:
        store.locks.release(req.host, req.owner)


def status(req: HostRequest) -> Report:
    """Like diagnose, without a probe: what is running and what it logged last."""
    return diagnose_host(req.but(probe=False, dry_run=False))


def health(req: HostRequest) -> HealthReport:
    """The health report of a host from its recorded watches (what the daily report posts); with none recorded
    yet, the host's state now under an empty period."""
    from bot.app.watching.health import health_report

    req.config.host(req.host)
    report, _ = health_report(req.config, req.store, req.host)
    if report.health.samples == 0:
        now = status(req)
        now.notes.insert(0, "no watches recorded yet (is `specops serve` running with watch.interval set?): "
                            "this is the host's state now")
        return replace(report, headline=f"Health report {req.host}: no watches yet — {now.headline}", diagnosis=now)
    return report
