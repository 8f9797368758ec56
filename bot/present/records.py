"""The store's records as lines for a terminal: the audit trail and the incidents."""

from __future__ import annotations

import time
from collections.abc import Sized
from typing import Protocol


class _Audit(Protocol):
    @property
    def id(self) -> int: ...

    @property
    def started_at(self) -> float: ...

    @property
    def finished_at(self) -> float | None: ...

    @property
    def source(self) -> str: ...

    @property
    def user(self) -> str | None: ...

    @property
    def team(self) -> str | None: ...

    @property
    def channel(self) -> str | None: ...

    @property
    def text(self) -> str: ...

    @property
    def plan_id(self) -> str | None: ...

    @property
    def result(self) -> str: ...

    @property
    def detail(self) -> str: ...


class _Incident(Protocol):
    @property
    def id(self) -> int: ...

    @property
    def state(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def opened_at(self) -> float: ...

    @property
    def timeline(self) -> Sized: ...


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def audit_line(e: _Audit) -> str:
    took = f"{e.finished_at - e.started_at:.1f}s" if e.finished_at else "running"
    who = f"{e.user or '?'}" + (f"@{e.team}" if e.team else "")
    where = f" in {e.channel}" if e.channel else ""
    plan = f" plan {e.plan_id}" if e.plan_id else ""
    return (f"{e.id:>5} {_when(e.started_at)} {e.source:<7} {who}{where}: {e.text!r}{plan} -> {e.result} ({took})"
            + (f" — {e.detail}" if e.detail else ""))


def incident_line(inc: _Incident) -> str:
    return (f"#{inc.id} [{inc.state}] {inc.title} (key {inc.key}, opened {_when(inc.opened_at)}, "
            f"{len(inc.timeline)} event(s))")
