"""`specops rollout`: its plan (the dry run) and its run, as typed data.

`as_json()` is the `--format json` contract: its keys only ever grow. Text, Markdown, Slack and the chart are
bot/present/rollout.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from bot.core.results.tune import Measurement

# what became of one host: not reached; changed and through the gate; failed the gate (or its deploy or its
# measurement) and restored; restored because the rollout was cancelled or aborted; its restore failed too
HostState = Literal["pending", "passed", "failed", "restored", "restore-failed", "untouched"]
RolloutState = Literal["planned", "passed", "failed", "cancelled", "aborted", "interrupted"]


def _measurements(ms: tuple[Measurement, ...]) -> list[dict[str, Any]]:
    return [{"concurrency": m.concurrency, "requests": m.requests, "tokens": m.tokens, "seconds": m.seconds,
             "tokens_per_s": m.tokens_per_s, "mean_acceptance_length": m.mean_acceptance_length,
             "per_position": list(m.per_position), "ttft_s": m.ttft_s, "errors": m.errors} for m in ms]


def measurements_of(raw: Any) -> tuple[Measurement, ...]:
    """Measurements as a record stored them (as_json's form): a resumed rollout reuses its 'before'."""
    out = []
    for m in raw or []:
        out.append(Measurement(int(m["concurrency"]), int(m["requests"]), int(m["tokens"]), float(m["seconds"]),
                               m.get("tokens_per_s"), m.get("mean_acceptance_length"),
                               tuple(m.get("per_position") or ()), m.get("ttft_s"), int(m.get("errors") or 0)))
    return tuple(out)


@dataclass(frozen=True)
class GateClause:
    """One `and` clause of the gate, judged: its text, whether it held, and the values it read."""

    text: str
    passed: bool
    said: str

    def as_json(self) -> dict[str, Any]:
        return {"clause": self.text, "passed": self.passed, "said": self.said}


@dataclass(frozen=True)
class HostOutcome:
    host: str
    batch: int  # 0: the canary
    state: HostState
    before_profile: str | None  # what the host served before (None: nothing specops started)
    before: tuple[Measurement, ...] = ()
    after: tuple[Measurement, ...] = ()
    gate_passed: bool | None = None  # None: the gate was not reached (the deploy failed, cancelled)
    clauses: tuple[GateClause, ...] = ()
    why: str = ""  # one sentence: the gate's verdict, the failed step, the measurement that failed
    bugs: tuple[str, ...] = ()  # the triage's bug findings on the new setting
    diagnosis: str = ""  # the triage headline of the new setting (its own window)
    restored: str = ""  # how it was restored, when it was

    def as_json(self) -> dict[str, Any]:
        return {"host": self.host, "batch": self.batch, "state": self.state, "before_profile": self.before_profile,
                "before": _measurements(self.before), "after": _measurements(self.after),
                "gate_passed": self.gate_passed, "clauses": [c.as_json() for c in self.clauses], "why": self.why,
                "bugs": list(self.bugs), "diagnosis": self.diagnosis, "restored": self.restored}


@dataclass(frozen=True)
class RolloutPlan:
    """The dry run: the batches in order (the canary first), the gate, the soak, what each host serves now."""

    rollout_id: str | None
    profile: str
    batches: tuple[tuple[str, ...], ...]
    gate: str
    soak_s: float
    serving: tuple[tuple[str, str | None], ...]  # host -> the profile it serves now, per the store
    concurrency: tuple[int, ...]
    # `--resume --dry-run` / `--abort --dry-run`: which of the two, and what it would do to each host
    action: str | None = None
    steps: tuple[tuple[str, str], ...] = ()

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(h for b in self.batches for h in b)

    def as_json(self) -> dict[str, Any]:
        out = {"kind": "rollout-plan", "rollout": self.rollout_id, "profile": self.profile,
               "batches": [list(b) for b in self.batches], "gate": self.gate, "soak_s": self.soak_s,
               "serving": dict(self.serving), "concurrency": list(self.concurrency)}
        if self.action is not None:
            out.update(action=self.action, would=dict(self.steps))
        return out


@dataclass(frozen=True)
class RolloutResult:
    rollout_id: str
    profile: str
    state: RolloutState
    headline: str
    plan: RolloutPlan
    hosts: tuple[HostOutcome, ...]
    timeline: tuple[tuple[float, str], ...] = ()  # (seconds since the start, what happened)
    notes: tuple[str, ...] = field(default=())

    @property
    def cancelled(self) -> bool:
        return self.state in ("cancelled", "aborted")

    @property
    def verdict(self) -> str:
        """For the chat summary line: healthy when every host passed; degraded when the gate stopped it and the
        hosts were restored; failing when a restore failed."""
        if any(h.state == "restore-failed" for h in self.hosts):
            return "failing"
        return "healthy" if self.state == "passed" else "degraded"

    def as_json(self) -> dict[str, Any]:
        return {"kind": "rollout", "rollout": self.rollout_id, "profile": self.profile, "state": self.state,
                "headline": self.headline, "plan": self.plan.as_json(), "hosts": [h.as_json() for h in self.hosts],
                "timeline": [{"t": round(t, 1), "event": e} for t, e in self.timeline], "notes": list(self.notes)}
