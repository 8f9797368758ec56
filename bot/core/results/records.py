"""What the store remembers, as the use cases hand it on and the renderers show it: an audit entry, an incident
(with its timeline and what still fires), a replica as `specops replicas` lists it. Pure data: the store writes and
reads them; present/records.py shows them without knowing the store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

IncidentState = Literal["open", "acknowledged", "resolved"]


@dataclass
class AuditEntry:
    id: int
    started_at: float
    finished_at: float | None
    source: str
    team: str | None
    user: str | None
    channel: str | None
    text: str
    command: str | None
    plan_id: str | None
    result: str
    detail: str


@dataclass
class Incident:
    id: int
    key: str
    host: str
    state: IncidentState
    opened_at: float
    resolved_at: float | None
    channel: str | None
    ts: str | None
    title: str
    timeline: list[dict[str, Any]]
    # what still fires, by fingerprint: {"source": "alertmanager" | "watch", "kind", "title", "since"}
    active: dict[str, dict[str, Any]] = field(default_factory=dict)

    def active_from(self, source: str) -> list[str]:
        return sorted(fp for fp, a in self.active.items() if a.get("source") == source)


@dataclass
class ReplicaView:
    """A replica as `specops replicas` shows it: alive while its heartbeat is younger than the lease."""

    id: str
    machine: str
    pid: int
    started_at: float
    heartbeat_age: float
    leader: bool
    alive: bool
