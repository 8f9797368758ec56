"""The playbook runner: every step in order, progress reported, the first failed step ends the run."""

from __future__ import annotations

import time

import jinja2

from bot.core.report import StepResult
from bot.engine.playbook import (
    Cancelled,
    Playbook,
    PlaybookError,
    RunOutcome,
    RunState,
    evaluate,
    resolve_numbers,
)
from bot.engine.steps import execute
from bot.remote.ssh import SSHSession


def run_playbook(playbook: Playbook, session: SSHSession | None, state: RunState) -> RunOutcome:
    """Run every step in order; the first failed step (on_fail: stop) ends the run. No session: a dry run's
    plan (`state.dry_run` renders what only the host could tell as <name>)."""
    total = len(playbook.steps)
    started = time.monotonic()
    for i, step in enumerate(playbook.steps, start=1):
        try:
            state.check_cancel()
        except Cancelled:
            state.results.append(StepResult(i, step.name, step.kind, "failed", message="cancelled"))
            state.report(i, total, step.name, "failed", started, "cancelled")
            break
        if step.when is not None:
            cond = evaluate(step.when, state.variables, state.dry_run)
            # in a dry run a condition on a value only a host can tell (a probe's result) stays open
            unknown = state.dry_run and isinstance(cond, jinja2.Undefined)
            if not unknown and not cond:
                # the condition is the playbook's business; the user needs to know the step did not apply
                state.results.append(StepResult(i, step.name, step.kind, "skipped", message="not needed here"))
                state.report(i, total, step.name, "skipped", started)
                continue
        state.current = (i, step.name, step.kind)
        state.report(i, total, step.name, "running", started)
        t0 = time.monotonic()
        try:
            step = resolve_numbers(step, state)
            result = execute(step, i, session, state)
        except Cancelled:
            result = StepResult(i, step.name, step.kind, "failed", message="cancelled")
        except PlaybookError as exc:
            result = StepResult(i, step.name, step.kind, "failed", message=str(exc))
        result.duration = time.monotonic() - t0
        state.results.append(result)
        state.report(i, total, step.name, result.status, started, result.message)
        if result.status == "failed" and step.on_fail == "stop":
            break
    return RunOutcome(playbook.name, state.results, state)
