"""The one line a finished chat job leaves on its progress message: what happened and the verdict, in the words
of the report under it (a doctor's ok/warn/failed stay doctor's words; a deploy that is up with a failing
speculation never reads "ok")."""

from __future__ import annotations

from bot.core.report import Report
from bot.core.results.doctor import DoctorReport

ICON = {"healthy": ":white_check_mark:", "degraded": ":warning:", "failing": ":octagonal_sign:",
        "ok": ":white_check_mark:", "warn": ":warning:", "failed": ":x:"}
_DONE = {"deploy": {"changed": "deployed", "unchanged": "already serving", "ok": "deployed"},
         "stop": {"changed": "stopped", "unchanged": "nothing was running", "ok": "stopped"}}


def _report(report: Report) -> tuple[str, str]:
    op = report.operation
    verdict = f"verdict *{report.verdict}*"
    if op is None or op.kind in ("status", "diagnose"):
        return report.verdict, verdict
    if op.status == "planned":
        return "planned", "planned, nothing ran"
    if op.status == "failed":
        said = " ".join([op.message, *(step.message for step in op.steps if step.status == "failed")]).lower()
        word = "cancelled" if "cancel" in said else "failed"
        return "failed", word + (f" at step {_step(op.failed_step)}" if op.failed_step else "")
    if op.status == "refused":
        return "failed", "refused"
    done = _DONE.get(op.kind, {}).get(op.status, op.status)
    return (report.verdict, done) if op.kind == "stop" else (report.verdict, f"{done}, {verdict}")


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


def summary_of(result: object) -> tuple[str, str]:
    """(icon, phrase) for a finished job's result."""
    if isinstance(result, Report):
        key, phrase = _report(result)
    elif isinstance(result, DoctorReport):
        key, phrase = _doctor(result)
    else:
        status = str(getattr(result, "status", None) or "")
        verdict = str(getattr(result, "verdict", None) or "")
        key = verdict or status
        phrase = ", ".join(p for p in (status if status not in ("", "ok", verdict) else "",
                                       f"verdict *{verdict}*" if verdict else "") if p) or "done"
    return ICON.get(key, ":information_source:"), phrase
