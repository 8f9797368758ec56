"""Deploy's first step: the checks before launch (`specops check`, bot/app/operations/prelaunch.py) as a gate. A
refusing check stops the deploy before anything runs on the host unless `--force`; a forced deploy carries what it
went past in its report, its audit line and its deployment row; warnings and checks that could not read their
inputs are shown and the deploy goes on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.core.prelaunch import Check, finding_of
from bot.core.report import MetricsOut, OperationOut, Report, StepResult, StepStatus
from bot.core.results.operation import OperationResult

if TYPE_CHECKING:
    from bot.config import Config
    from bot.core.results.prelaunch import PrelaunchReport
    from bot.engine.hosts import HostPool


def check(config: Config, profile: str, host: str, hosts: HostPool) -> PrelaunchReport:
    from bot.app.operations.prelaunch import prelaunch

    return prelaunch(config, profile, host, hosts=hosts)


def step_of(checked: PrelaunchReport) -> StepResult:
    """The gate as step 0 of the deploy's steps."""
    counts = {v: sum(1 for c in checked.checks if c.verdict == v) for v in ("ok", "warn", "unknown", "refuse")}
    said = ", ".join(f"{n} {v if v != 'unknown' else 'could not check'}" for v, n in counts.items() if n)
    status: StepStatus = "failed" if checked.refused else "ok"
    return StepResult(0, "check before launch", "check", status,
                      message=(f"refused: {'; '.join(c.title for c in checked.refused)}" if checked.refused else said),
                      output=[_line(c) for c in checked.checks if c.verdict != "ok"][:20])


def _line(c: Check) -> str:
    return f"{c.verdict}: {c.title}" + (f" — fix: {c.fix}" if c.fix else "")


def refused(checked: PrelaunchReport, *, planned: bool, duration: float = 0.0) -> OperationResult:
    """The deploy refused before launch (or, `planned`, a dry run that would be): what refused, why, how to fix it,
    and how to go on anyway. Nothing ran on the host; the checks' findings are the judgment it carries."""
    titles = "; ".join(c.title for c in checked.refused)
    host, profile = checked.host, checked.profile
    again = f"`specops deploy {profile} --host {host} --force`"
    head = (f"Plan: deploy {profile} on {host} would be refused before launch — {titles}" if planned else
            f"Refused before launch: {profile} on {host} — {titles}")
    plan = [f"{c.fix}" for c in checked.refused if c.fix]
    plan.append(f"Or deploy anyway with {again} (the refusal is written to the audit and the report).")
    op = OperationOut(kind="deploy", host=host, profile=profile, status="refused",
                      message=("dry run: nothing ran" if planned else "nothing started on the host") + f"; {titles}",
                      failed_step="0. check before launch", steps=[step_of(checked)], duration=round(duration, 1))
    judged = Report(verdict="failing", headline=head, metrics=MetricsOut(),
                    findings=[finding_of(c) for c in checked.checks if c.verdict != "ok"], plan=plan,
                    context={"host": host, "profile": profile, "version_text": checked.vllm_version or "unknown",
                             # nothing ran, nothing measured: the checks are the whole judgment
                             "version_label": checked.vllm_version or "version unknown", "measured": False})
    unread = _unread_note(checked)
    return OperationResult(op, head, judged, notes=[unread] if unread else [])


def shown(result: OperationResult, checked: PrelaunchReport, *, forced: bool) -> OperationResult:
    """A deploy that went on: the gate's step first, what `--force` went past, the warnings and what could not be
    checked, as notes (the triage of the running server decides the verdict)."""
    planned = result.operation.status == "planned"
    result.operation.steps.insert(0, step_of(checked))
    if forced and checked.refused:
        result.operation.forced = [c.title for c in checked.refused]
    notes = []
    if forced and checked.refused:
        notes.append(("would deploy" if planned else "deployed") + " with --force past the checks before launch: "
                     + "; ".join(c.title for c in checked.refused))
    notes += [f"before launch, warned: {c.title}" + (f" — {c.fix}" if c.fix else "")
              for c in checked.checks if c.verdict == "warn"]
    unread = _unread_note(checked)
    if unread:
        notes.append(unread)
    result.notes[:0] = notes
    return result


def _unread_note(checked: PrelaunchReport) -> str:
    unread = [c.title for c in checked.checks if c.verdict == "unknown"]
    return f"before launch, could not check: {'; '.join(unread)} (`specops check` says why)" if unread else ""
