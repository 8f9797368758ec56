"""`specops fleet` (and `/specops fleet`): every vLLM instance a Prometheus scrapes, each judged on its window,
worst first, and the fleet's totals — as typed data.

`as_json()` is the `--format json` contract. The numbers are kept at its precision (tok/s to 0.01, the KV cache
to 0.0001), so every rendering says what the JSON says; the totals are summed from the unrounded windows by the
use case (bot/app/fleet.py), not from these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from bot.core.durations import spoken
from bot.core.report import Report, Verdict
from bot.core.triage.findings import Confidence, Finding, Severity

# worst first: how lines are sorted and which verdict speaks for the fleet
VERDICT_ORDER: dict[str, int] = {"failing": 0, "degraded": 1, "unknown": 2, "healthy": 3}


@dataclass(frozen=True)
class FleetMetrics:
    mean_acceptance_length: float | None
    per_position: tuple[float, ...]
    num_drafts: int
    tokens_per_s: float | None
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None  # 0..1
    up: bool | None  # Prometheus's `up` for the instance now

    def as_json(self) -> dict[str, Any]:
        return {"mean_acceptance_length": self.mean_acceptance_length, "per_position": list(self.per_position),
                "num_drafts": self.num_drafts, "tokens_per_s": self.tokens_per_s, "running": self.running,
                "waiting": self.waiting, "kv_cache_usage": self.kv_cache_usage, "up": self.up}


@dataclass(frozen=True)
class FleetWindow:
    """The part of the asked window an instance is judged on. `judged`: "window" (all of it), "since the current
    server started" (it started inside the window: its counters since then, never a sum with the server before
    it on the same address), or "too short to judge" (after a restart, under two scrapes of the current one).
    `restarts`: the restarts inside the window (a lower bound: what resets() and the start times show)."""

    seconds: float | None  # the span judged; None when the current server's start is not exported
    restarts: int = 0
    judged: str = "window"

    @property
    def mixed(self) -> bool:
        return self.judged != "window"

    def describe(self) -> str | None:
        """What the report says of the span, or None when it is the asked window."""
        if not self.mixed:
            return None
        mixes = f"the window mixes {self.restarts} restart{'s' if self.restarts != 1 else ''}"
        if self.judged == "too short to judge":
            started = f" and the current server started {spoken(self.seconds)} ago" if self.seconds else ""
            return f"{mixes}{started}: too short to judge, and the blended numbers are not this server's"
        if self.seconds is None:
            return (f"{mixes}: judged on the counters since the current server started (its start time is not "
                    "exported: span and tok/s unknown)")
        if not self.restarts:
            return f"the server started {spoken(self.seconds)} ago: judged on those {spoken(self.seconds)}"
        return f"{mixes}: judged on the last {spoken(self.seconds)} since the current server started"

    def as_json(self) -> dict[str, Any]:
        return {"seconds": None if self.seconds is None else round(self.seconds, 1), "restarts": self.restarts,
                "judged": self.judged}


@dataclass(frozen=True)
class TopFinding:
    """The instance's first finding, as the fleet shows it: the upstream threads by URL."""

    id: str
    title: str
    severity: Severity
    confidence: Confidence
    upstream: tuple[str, ...]

    @classmethod
    def of(cls, f: Finding) -> TopFinding:
        return cls(f.id, f.title, f.severity, f.confidence, tuple(u.url for u in f.upstream))

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "severity": self.severity, "confidence": self.confidence,
                "upstream": list(self.upstream)}


@dataclass(frozen=True)
class Judged:
    """What a fleet keeps of an instance's diagnosis: its verdict, headline, first finding and notes — the parts a
    fleet line shows, taken from the same triage as a log's. A fleet of 10,000 keeps these, not 10,000 Reports
    (a Report is its findings, considered hypotheses and context as pydantic models: ~25 KB apiece)."""

    verdict: Verdict
    headline: str
    top_finding: TopFinding | None
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, report: Report) -> Judged:
        top = TopFinding.of(report.findings[0]) if report.findings else None
        return cls(report.verdict, report.headline, top, tuple(report.notes))


@dataclass(frozen=True)
class FleetLine:
    """One instance: its labels, where the config places it (host and profile, when it is one of its
    deployments), its window's numbers, and its diagnosis (`report`: the same triage as a log's, whole or as the
    fleet keeps it)."""

    instance: str
    labels: dict[str, str]
    report: Report | Judged
    metrics: FleetMetrics
    host: str | None = None
    profile: str | None = None
    window: FleetWindow | None = None  # None: the whole asked window

    @property
    def verdict(self) -> Verdict:
        return self.report.verdict

    @property
    def top_finding(self) -> TopFinding | None:
        if isinstance(self.report, Judged):
            return self.report.top_finding
        return TopFinding.of(self.report.findings[0]) if self.report.findings else None

    def as_json(self) -> dict[str, Any]:
        top = self.top_finding
        return {"instance": self.instance, "labels": self.labels, "verdict": self.verdict, "host": self.host,
                "profile": self.profile, "metrics": self.metrics.as_json(),
                "top_finding": None if top is None else top.as_json(), "headline": self.report.headline,
                "window": None if self.window is None else self.window.as_json()}


@dataclass(frozen=True)
class Omitted:
    """The instances a fleet report does not list (`--limit`, `--only-problems`), by verdict: judged and counted
    in the totals like the listed ones."""

    by_verdict: dict[str, int]

    @property
    def instances(self) -> int:
        return sum(self.by_verdict.values())

    @property
    def healthy(self) -> int:
        return self.by_verdict.get("healthy", 0)

    def as_json(self) -> dict[str, Any]:
        return {"instances": self.instances, "by_verdict": self.by_verdict}


@dataclass(frozen=True)
class FleetTotals:
    instances: int
    by_verdict: dict[str, int]
    tokens_per_s: float | None
    mean_acceptance_length: float | None  # 1 + accepted / drafts over every instance: drafts weigh, not instances
    drafts: int

    def as_json(self) -> dict[str, Any]:
        return {"instances": self.instances, "by_verdict": self.by_verdict, "tokens_per_s": self.tokens_per_s,
                "mean_acceptance_length": self.mean_acceptance_length, "drafts": self.drafts}


@dataclass(frozen=True)
class FleetReport:
    """The fleet over one window. `window` is the window as shown ("1h"), `seconds` its length."""

    url: str
    selector: str
    seconds: float
    window: str
    lines: tuple[FleetLine, ...]  # the listed instances, worst first
    totals: FleetTotals  # every instance, listed or not
    omitted: Omitted = Omitted({})

    @property
    def verdict(self) -> Verdict:
        # every instance speaks, listed or not (the totals count them all)
        verdicts = list(self.totals.by_verdict) or [line.verdict for line in self.lines]
        return cast(Verdict, min(verdicts, key=lambda v: VERDICT_ORDER.get(v, 9))) if verdicts else "unknown"

    @property
    def status(self) -> Verdict:
        """What the audit records of a fleet: its worst verdict (it changes nothing)."""
        return self.verdict

    @property
    def counts(self) -> str:
        """The instances by verdict, worst first ("1 failing, 2 healthy")."""
        by = sorted(self.totals.by_verdict.items(), key=lambda kv: VERDICT_ORDER.get(kv[0], 9))
        return ", ".join(f"{n} {v}" for v, n in by)

    @property
    def headline(self) -> str:
        return (f"Fleet: {self.counts or 'no vLLM instance'} ({self.totals.instances} instances, "
                f"last {self.window})")

    def as_json(self, lines: bool = True) -> dict[str, Any]:
        """The JSON contract; `lines` False: with `"instances": []`, for a renderer that writes the lines one by
        one (10,000 of them as one tree of dicts is ~70 MB)."""
        return {"prometheus": self.url, "selector": self.selector, "window": self.window,
                "instances": [line.as_json() for line in self.lines] if lines else [],
                "totals": self.totals.as_json(), "omitted": self.omitted.as_json()}
