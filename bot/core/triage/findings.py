"""What triage concludes: findings with evidence, upstream references and remediation."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Severity = Literal["critical", "warning", "info"]
Confidence = Literal["high", "medium", "low"]
SEVERITY_RANK: dict[str, int] = {"critical": 0, "warning": 1, "info": 2}
CONFIDENCE_RANK: dict[str, int] = {"high": 0, "medium": 1, "low": 2}


class Upstream(BaseModel):
    repo: str
    number: int
    url: str
    state: str
    kind: str = "pull"
    title: str | None = None  # the thread's own title, where we checked it
    about: str | None = None  # our words, where we did not
    first_release: str | None = None


class Finding(BaseModel):
    id: str
    title: str
    severity: Severity
    confidence: Confidence
    summary: str = ""
    evidence: list[str] = Field(default_factory=list)
    upstream: list[Upstream] = Field(default_factory=list)
    remediation: list[str] = Field(default_factory=list)
    is_bug: bool = False  # an upstream or deployment defect, as opposed to tuning or information
    priority: int = 50  # ties within severity and confidence: lower first

    def rank_key(self) -> tuple[int, int, int]:
        return (SEVERITY_RANK[self.severity], CONFIDENCE_RANK[self.confidence], self.priority)
