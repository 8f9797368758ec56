"""`specops check`: one profile's pre-launch checks on one host, as typed data. `as_json()` is the `--format json`
contract."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from bot.core.prelaunch import Check, Verdict, worst
from bot.core.report import Verdict as ReportVerdict


@dataclass(frozen=True)
class PrelaunchReport:
    """The checks of `profile` on `host`, worst first."""

    host: str
    profile: str
    vllm_version: str | None
    checks: tuple[Check, ...]

    @property
    def status(self) -> Verdict:
        return worst(list(self.checks))

    @property
    def verdict(self) -> ReportVerdict:
        verdicts: dict[str, ReportVerdict] = {"refuse": "failing", "unknown": "unknown", "warn": "degraded"}
        return verdicts.get(self.status, "healthy")

    @property
    def refused(self) -> list[Check]:
        return [c for c in self.checks if c.verdict == "refuse"]

    @property
    def headline(self) -> str:
        if self.refused:
            return f"{self.profile} on {self.host}: refused before launch — " + "; ".join(c.title for c in self.refused)
        if self.status == "unknown":
            return f"{self.profile} on {self.host}: could not check everything"
        if self.status == "warn":
            return f"{self.profile} on {self.host}: can launch, with warnings"
        return f"{self.profile} on {self.host}: ready to launch"

    def as_json(self) -> dict[str, Any]:
        return {"host": self.host, "profile": self.profile, "vllm_version": self.vllm_version, "status": self.status,
                "checks": [asdict(c) for c in self.checks]}
