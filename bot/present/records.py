"""The store's records for a terminal, a Markdown file or a script: the audit trail, the incidents and one
incident's timeline, the scheduled jobs. Text is a table whose long cells are cut and end with "…" (a reader
knows there is more: `--format md` or `json` shows it whole); JSON is one document, a list of objects with
stable keys and ISO-8601 UTC times."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from bot.core.results.records import AuditEntry, Incident, ReplicaView

ListFormat = Literal["text", "md", "json"]
LIST_FORMATS: tuple[ListFormat, ...] = ("text", "md", "json")


@dataclass(frozen=True)
class Column:
    head: str
    width: int | None = None  # the most a text cell shows (cut with "…"); None: the cell's own width
    right: bool = False  # numbers line up on the right


@dataclass(frozen=True)
class JobRow:
    """A scheduled job as the listing shows it (the scheduler's own job objects stay in the adapter)."""

    id: str
    next_run: datetime | None  # None: paused
    trigger: str


def cut(s: str, n: int) -> str:
    """`s` in at most `n` characters; a cut one ends with "…", never silently short."""
    return s if len(s) <= n else s[: max(n - 1, 0)] + "…"


def iso(at: float | datetime | None) -> str | None:
    """ISO-8601 in UTC with a Z, to the second: what a script parses (`date -d`, `datetime.fromisoformat`)."""
    if at is None:
        return None
    moment = at if isinstance(at, datetime) else datetime.fromtimestamp(at, UTC)
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at is not None else "—"


def _flat(s: str) -> str:
    """One line: a newline inside a cell would break the table's rows."""
    return " ".join(s.split())


def table(cols: Sequence[Column], rows: Sequence[Sequence[str]], md: bool) -> list[str]:
    """Markdown (whole cells, `|` escaped) or aligned text (cells cut to their column's width, with "…")."""
    if md:
        esc = [[_flat(c).replace("|", "\\|") for c in row] for row in rows]
        rule = "|" + "|".join("---:" if c.right else "---" for c in cols) + "|"
        return ["| " + " | ".join(c.head.lower() for c in cols) + " |", rule,
                *("| " + " | ".join(row) + " |" for row in esc)]
    cells = [[cut(_flat(c), col.width) if col.width else _flat(c) for c, col in zip(row, cols, strict=True)]
             for row in rows]
    widths = [max([len(col.head), *(len(r[i]) for r in cells)]) for i, col in enumerate(cols)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if col.right else c.ljust(w)
                         for c, w, col in zip(row, widths, cols, strict=True)).rstrip()

    return [line([c.head for c in cols]), *(line(r) for r in cells)]


# --- the audit trail ----------------------------------------------------------------------------------

AUDIT_COLUMNS = (Column("ID", right=True), Column("STARTED"), Column("SOURCE", 8), Column("WHO", 24),
                 Column("WHERE", 14), Column("COMMAND", 48), Column("PLAN", 12), Column("RESULT", 12),
                 Column("TOOK", 8, right=True), Column("DETAIL", 48))


def _took(e: AuditEntry) -> str:
    return f"{e.finished_at - e.started_at:.1f}s" if e.finished_at is not None else "running"


def audit_json(entries: Sequence[AuditEntry]) -> list[dict[str, Any]]:
    return [{"id": e.id, "started_at": iso(e.started_at), "finished_at": iso(e.finished_at),
             "seconds": round(e.finished_at - e.started_at, 3) if e.finished_at is not None else None,
             "source": e.source, "user": e.user, "team": e.team, "channel": e.channel, "text": e.text,
             "command": e.command, "plan_id": e.plan_id, "result": e.result, "detail": e.detail or None}
            for e in entries]


def audit_table(entries: Sequence[AuditEntry], md: bool) -> str:
    rows = [(str(e.id), _when(e.started_at), e.source, (e.user or "?") + (f"@{e.team}" if e.team else ""),
             e.channel or "", e.text, e.plan_id or "", e.result, _took(e), e.detail) for e in entries]
    return _lines(table(AUDIT_COLUMNS, rows, md) if rows else ["(no audit entries)"])


# --- incidents ------------------------------------------------------------------------------------------

INCIDENT_COLUMNS = (Column("ID", right=True), Column("STATE", 12), Column("HOST", 20), Column("OPENED"),
                    Column("EVENTS", right=True), Column("LAST", 16), Column("TITLE", 72))
TIMELINE_COLUMNS = (Column("WHEN"), Column("EVENT", 18), Column("BY", 24), Column("WHAT"))


def _last(inc: Incident) -> str | None:
    return str(inc.timeline[-1].get("event")) if inc.timeline else None


def _firing(inc: Incident) -> list[str]:
    return sorted({str(a.get("title")) for a in inc.active.values()})


def incident_json(inc: Incident) -> dict[str, Any]:
    return {"id": inc.id, "key": inc.key, "host": inc.host, "state": inc.state, "title": inc.title,
            "opened_at": iso(inc.opened_at), "resolved_at": iso(inc.resolved_at), "events": len(inc.timeline),
            "last_event": _last(inc), "firing": _firing(inc), "slack_channel": inc.channel, "slack_ts": inc.ts}


def incidents_json(incs: Sequence[Incident]) -> list[dict[str, Any]]:
    return [incident_json(i) for i in incs]


def incidents_table(incs: Sequence[Incident], md: bool) -> str:
    rows = [(str(i.id), i.state, i.host, _when(i.opened_at), str(len(i.timeline)), _last(i) or "", i.title)
            for i in incs]
    if not rows:
        return _lines(["(no incidents)"])
    return _lines([*table(INCIDENT_COLUMNS, rows, md), "", "(`specops incidents show ID` prints its timeline)"])


def _alerts(event: dict[str, Any]) -> list[dict[str, Any]]:
    alerts = event.get("alerts")
    return [{"kind": a.get("kind"), "title": a.get("title"), "detail": a.get("detail")}
            for a in alerts if isinstance(a, dict)] if isinstance(alerts, list) else []


def _what(event: dict[str, Any]) -> str:
    """What happened, in words: the alerts' titles and details, why it was resolved, which alerts ended."""
    said = [f"{a['title']}: {a['detail']}" if a.get("detail") else str(a.get("title")) for a in _alerts(event)]
    if event.get("why"):
        said.append(str(event["why"]))
    if event.get("resolved"):
        said.append("ended: " + ", ".join(str(x) for x in event["resolved"]))
    known = {"at", "event", "source", "user", "alerts", "why", "resolved"}
    said += [f"{k}: {v}" for k, v in event.items() if k not in known]  # whatever a later version records
    return "; ".join(said)


def timeline_json(event: dict[str, Any]) -> dict[str, Any]:
    at = event.get("at")
    return {"at": iso(at) if isinstance(at, int | float) else None, "event": event.get("event"),
            "source": event.get("source"), "user": event.get("user"), "detail": _what(event) or None,
            "alerts": _alerts(event)}


def incident_show_json(inc: Incident) -> dict[str, Any]:
    return {**incident_json(inc), "timeline": [timeline_json(e) for e in inc.timeline]}


def _header(inc: Incident) -> list[str]:
    facts = [f"key {inc.key}", f"host {inc.host}", f"opened {_when(inc.opened_at)}"]
    if inc.resolved_at is not None:
        facts.append(f"resolved {_when(inc.resolved_at)}")
    if inc.channel:
        facts.append(f"Slack {inc.channel}" + (f" {inc.ts}" if inc.ts else ""))
    return [" · ".join(facts), f"firing: {', '.join(_firing(inc)) or 'nothing'}"]


def incident_show(inc: Incident, md: bool) -> str:
    """The incident and its timeline, oldest first: each event with its time, who or what did it, and what."""
    title = f"#{inc.id} [{inc.state}] {inc.title}"
    rows = [(_when(e.get("at") if isinstance(e.get("at"), int | float) else None), str(e.get("event", "?")),
             str(e.get("user") or e.get("source") or ""), _what(e)) for e in inc.timeline]
    head = [f"# Incident {title}", "", *(f"- {f}" for f in _header(inc))] if md else [title, *_header(inc)]
    return _lines([*head, "", *table(TIMELINE_COLUMNS, rows, md)])


# --- scheduled jobs --------------------------------------------------------------------------------------

JOB_COLUMNS = (Column("ID", 32), Column("NEXT RUN", 26), Column("TRIGGER", 100))


def jobs_json(jobs: Sequence[JobRow]) -> list[dict[str, Any]]:
    return [{"id": j.id, "next_run": iso(j.next_run), "trigger": j.trigger} for j in jobs]


def jobs_table(jobs: Sequence[JobRow], md: bool) -> str:
    rows = [(j.id, j.next_run.isoformat(sep=" ", timespec="seconds") if j.next_run else "paused", j.trigger)
            for j in jobs]
    return _lines(table(JOB_COLUMNS, rows, md) if rows else ["(no jobs: see watch: in the config)"])


def _lines(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


REPLICA_COLUMNS = (Column("REPLICA", 40), Column("ROLE", 8), Column("MACHINE", 24), Column("PID", right=True),
                   Column("STARTED"), Column("HEARTBEAT", 16, right=True))


def _role(r: ReplicaView) -> str:
    if not r.alive:
        return "gone"
    return "leader" if r.leader else "standby"


def replicas_json(rows: Sequence[ReplicaView]) -> list[dict[str, Any]]:
    return [{"replica": r.id, "role": _role(r), "machine": r.machine, "pid": r.pid, "started": iso(r.started_at),
             "heartbeat_age_s": round(r.heartbeat_age, 1), "alive": r.alive} for r in rows]


def replicas_table(rows: Sequence[ReplicaView], md: bool) -> str:
    cells = [(r.id, _role(r), r.machine, str(r.pid), _when(r.started_at), f"{r.heartbeat_age:.0f} s ago")
             for r in rows]
    if not cells:
        return _lines(["(no replica is running `specops serve` on this state store)"])
    leaders = [r for r in rows if r.leader and r.alive]
    said = (f"leader: {leaders[0].id}" if leaders
            else "no leader: no live replica holds the lead (the schedules run nowhere)")
    return _lines([*table(REPLICA_COLUMNS, cells, md), "", said])
