"""A scheduled health report: the period's numbers from the recorded watches, and the diagnosis of those watches.

Its own result, not a diagnosis with a health field: the renderers show the period first and the diagnosis under it,
and its JSON keeps the two apart (`{"health": …, "diagnosis": …}`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bot.core.report import Report, Verdict


class HealthOut(BaseModel):
    """A health report's numbers over its period (24 h)."""

    model_config = ConfigDict(defer_build=True)

    period: str
    samples: int
    up_now: bool | None = None
    up_fraction: float | None = None
    requests: float | None = None
    gen_tps: float | None = None
    single_tps: float | None = None
    baseline_tps: float | None = None
    mean_acceptance: float | None = None
    open_incidents: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class HealthReport:
    host: str
    headline: str
    health: HealthOut
    diagnosis: Report  # the watches' counters through the same triage as a log

    @property
    def verdict(self) -> Verdict:
        return self.diagnosis.verdict

    def contract(self) -> dict[str, Any]:
        return {"host": self.host, "headline": self.headline, "health": self.health.model_dump(mode="json"),
                "diagnosis": self.diagnosis.contract()}
