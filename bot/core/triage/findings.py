"""What triage concludes: findings with evidence, upstream references and remediation."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.core.upstream import Upstream

Severity = Literal["critical", "warning", "info"]
Confidence = Literal["high", "medium", "low"]
SEVERITY_RANK: dict[str, int] = {"critical": 0, "warning": 1, "info": 2}
CONFIDENCE_RANK: dict[str, int] = {"high": 0, "medium": 1, "low": 2}


class Finding(BaseModel):
    model_config = ConfigDict(defer_build=True)

    id: str
    title: str
    severity: Severity
    confidence: Confidence
    summary: str = ""
    evidence: list[str] = Field(default_factory=list)
    upstream: list[Upstream] = Field(default_factory=list)
    remediation: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)  # the public threads the facts come from
    is_bug: bool = False  # an upstream or deployment defect, as opposed to tuning or information
    priority: int = 50  # ties within severity and confidence: lower first

    def rank_key(self) -> tuple[int, int, int]:
        return (SEVERITY_RANK[self.severity], CONFIDENCE_RANK[self.confidence], self.priority)


Status = Literal["fits", "possible", "ruled-out", "not-applicable"]
STATUS_RANK: dict[str, int] = {"fits": 0, "possible": 1, "ruled-out": 2, "not-applicable": 3}


class Considered(BaseModel):
    """One hypothesis of the differential diagnosis and what the evidence said of it."""

    model_config = ConfigDict(defer_build=True)

    id: str
    title: str
    status: Status
    why: str
    upstream: list[Upstream] = Field(default_factory=list)
