"""The one line a finished chat job leaves on its progress message: what happened and the verdict, in the words
of the report under it (a doctor's ok/warn/failed stay doctor's words; a deploy that is up with a failing
speculation never reads "ok")."""

from __future__ import annotations

from bot.core.report import OperationOut, Report
from bot.core.results.doctor import DoctorReport
from bot.core.results.operation import OperationResult
from bot.core.results.rollout import RolloutPlan, RolloutResult

ICON = {"healthy": ":white_check_mark:", "degraded": ":warning:", "failing": ":octagonal_sign:",
        "ok": ":white_check_mark:", "warn": ":warning:", "failed": ":x:"}
_DONE = {"deploy": {"changed": "deployed", "unchanged": "already serving", "ok": "deployed"},
         "stop": {"changed": "stopped", "unchanged": "nothing was running", "ok": "stopped"}}


def _report(report: Report) -> tuple[str, str]:
    op = report.operation
    verdict = f"verdict *{report.verdict}*"
    if op is None or op.kind in ("status", "diagnose"):
        return report.verdict, verdict
    key, phrase = _operation(op)
    return (key, phrase) if key in ("planned", "failed") else (report.verdict, f"{phrase}, {verdict}")


def _operation(op: OperationOut) -> tuple[str, str]:
    """What the operation did, in a few words; the key is `planned`, `failed` or `ok`."""
    if op.status == "planned":
        return "planned", "planned, nothing ran"
    if op.status == "failed":
        said = " ".join([op.message, *(step.message for step in op.steps if step.status == "failed")]).lower()
        word = "cancelled" if "cancel" in said else "failed"
        return "failed", word + (f" at step {_step(op.failed_step)}" if op.failed_step else "")
    if op.status == "refused":
        return "failed", "refused before launch" if op.failed_step and op.failed_step.startswith("0.") else "refused"
    return "ok", _DONE.get(op.kind, {}).get(op.status, op.status)


def _step(failed_step: str) -> str:
    """"12. wait for /health" -> "12: wait for /health"."""
    number, _, name = failed_step.partition(". ")
    return f"{number}: {name}" if name and number.isdigit() else failed_step


def _doctor(result: DoctorReport) -> tuple[str, str]:
    problems = result.problems
    if result.status == "ok":
        return "ok", f"*ok*: all {len(result.checks)} checks passed"
    failed = sum(1 for c in problems if c.status == "failed")
    warned = len(problems) - failed
    parts = [f"{n} {word}" for n, word in ((failed, "failed"), (warned, "to look at")) if n]
    return result.status, f"*{result.status}*: " + ", ".join(parts)


def _hosts(n: int) -> str:
    return f"{n} host" + ("" if n == 1 else "s")


def _stopped(result: RolloutResult, failed_restore: str, kept: int) -> str:
    """Where a failed rollout stopped, why, and whether that host has what it served back."""
    first = next((h for h in result.hosts if h.state in ("failed", "restore-failed")), None)
    if first is None:
        return ", ".join(p for p in ("*failed*", failed_restore) if p)
    where = "the canary" if first.batch == 0 else f"batch {first.batch}"
    why = "gate failed" if first.clauses and first.gate_passed is False else (first.why or "failed")
    why = why if len(why) <= 80 else why[:79] + "…"
    restored = failed_restore or ("restored" if first.restored else "")
    phrase = f"*stopped* at {where} ({first.host}): {why}" + (f", {restored}" if restored else "")
    return phrase + (f"; {_hosts(kept)} kept it" if kept else "")


def _rollout(result: RolloutResult) -> tuple[str, str]:
    """"passed on 3 hosts", "stopped at the canary (a6000): gate failed, restored", "cancelled, 2 hosts
    restored"; a restore that failed is said by name."""
    broken = [h.host for h in result.hosts if h.state == "restore-failed"]
    failed_restore = f"restore FAILED on {', '.join(broken)}" if broken else ""
    kept = sum(1 for h in result.hosts if h.state == "passed")
    if result.state == "passed":
        return result.verdict, f"*passed* on {_hosts(kept)}"
    if result.state == "failed":
        return result.verdict, _stopped(result, failed_restore, kept)
    restored = sum(1 for h in result.hosts if h.state == "restored" or (h.state == "failed" and h.restored))
    return result.verdict, ", ".join(p for p in (f"*{result.state}*", f"{_hosts(restored)} restored",
                                                 failed_restore) if p)


def summary_of(result: object) -> tuple[str, str]:
    """(icon, phrase) for a finished job's result."""
    if isinstance(result, Report):
        key, phrase = _report(result)
    elif isinstance(result, OperationResult):
        key, phrase = _operation(result.operation)
        if result.diagnosis is not None and key not in ("planned", "failed"):  # a deploy that judged what it left
            key, phrase = result.diagnosis.verdict, f"{phrase}, verdict *{result.diagnosis.verdict}*"
    elif isinstance(result, DoctorReport):
        key, phrase = _doctor(result)
    elif isinstance(result, RolloutResult):
        key, phrase = _rollout(result)
    elif isinstance(result, RolloutPlan):
        key, phrase = "planned", "planned, nothing ran"
    else:
        status = str(getattr(result, "status", None) or "")
        verdict = str(getattr(result, "verdict", None) or "")
        key = verdict or status
        phrase = ", ".join(p for p in (status if status not in ("", "ok", verdict) else "",
                                       f"verdict *{verdict}*" if verdict else "") if p) or "done"
    return ICON.get(key, ":information_source:"), phrase
