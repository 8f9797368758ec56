"""`specops tune`: its plan (the dry run) and its sweep, as typed data.

`as_json()` is the `--format json` contract: its keys, their order and their values are what scripts read,
so they only ever grow. Everything else (text, Markdown, Slack, the chart) is bot/present/tune.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from bot.core.report import Verdict

RestoreStatus = Literal["redeployed", "kept-best", "stopped", "failed"]
BaselineSource = Literal["measured", "profile baseline_tps"]


def setting_label(method: str, k: int | None) -> str:
    return "none" if k is None or method == "none" else f"{method} k={k}"


@dataclass(frozen=True)
class Skipped:
    """A setting the sweep cannot deploy, and why (no drafter, a drafter of another method, an invalid profile)."""

    method: str
    k: int | None
    reason: str

    @property
    def line(self) -> str:
        return f"skipped {setting_label(self.method, self.k)}: {self.reason}"

    def as_json(self) -> dict[str, Any]:
        return {"method": self.method, "k": self.k, "reason": self.reason}


@dataclass(frozen=True)
class Measurement:
    """One concurrency level of the probe workload: tok/s = generated tokens / wall time, the acceptance from
    the /metrics counters' deltas, the median time to first token (at the lowest concurrency only)."""

    concurrency: int
    requests: int
    tokens: int
    seconds: float
    tokens_per_s: float | None
    mean_acceptance_length: float | None
    per_position: tuple[float | None, ...]
    ttft_s: float | None


@dataclass(frozen=True)
class Measured:
    """A setting measured at one concurrency (its derived profile, e.g. `mtp@mtp-k2`)."""

    method: str
    k: int | None
    profile: str
    concurrency: int
    requests: int
    tokens: int
    seconds: float
    tokens_per_s: float | None
    mean_acceptance_length: float | None
    per_position: tuple[float | None, ...]
    ttft_s: float | None

    @classmethod
    def of(cls, method: str, k: int | None, profile: str, m: Measurement) -> Measured:
        return cls(method, k, profile, m.concurrency, m.requests, m.tokens, m.seconds, m.tokens_per_s,
                   m.mean_acceptance_length, m.per_position, m.ttft_s)

    @property
    def label(self) -> str:
        return setting_label(self.method, self.k)

    def as_json(self) -> dict[str, Any]:
        return {"k": self.k, "method": self.method, "profile": self.profile, "concurrency": self.concurrency,
                "requests": self.requests, "tokens": self.tokens, "seconds": self.seconds,
                "tokens_per_s": self.tokens_per_s, "mean_acceptance_length": self.mean_acceptance_length,
                "per_position": list(self.per_position), "ttft_s": self.ttft_s}


@dataclass(frozen=True)
class Failed:
    """A setting that could not be measured: its deploy failed (at `failed_step`, when one step did), or the
    measuring did (`failed_step` "measure")."""

    method: str
    k: int | None
    profile: str
    error: str
    failed_step: str | None

    @property
    def label(self) -> str:
        return setting_label(self.method, self.k)

    def as_json(self) -> dict[str, Any]:
        # concurrency and tokens_per_s are null rather than absent: a script filters rows on them
        return {"k": self.k, "method": self.method, "profile": self.profile, "concurrency": None,
                "tokens_per_s": None, "error": self.error, "failed_step": self.failed_step}


TuneRow = Measured | Failed


@dataclass(frozen=True)
class WorkloadUsed:
    source: str
    prompts: int
    max_tokens: int

    def as_json(self) -> dict[str, Any]:
        return {"source": self.source, "prompts": self.prompts, "max_tokens": self.max_tokens}


@dataclass(frozen=True)
class Recommendation:
    """The fastest setting for one request, and its gain over the profile's own setting and over none."""

    method: str
    k: int | None
    concurrency: int
    tokens_per_s: float
    gain: float | None
    gain_over_none: float | None

    @property
    def label(self) -> str:
        return setting_label(self.method, self.k)

    def as_json(self) -> dict[str, Any]:
        return {"k": self.k, "method": self.method, "concurrency": self.concurrency,
                "tokens_per_s": self.tokens_per_s, "gain": self.gain, "gain_over_none": self.gain_over_none}


@dataclass(frozen=True)
class BestAt:
    """The fastest setting at a higher concurrency (it may differ from the one-request best)."""

    concurrency: int
    method: str
    k: int | None
    tokens_per_s: float

    @property
    def label(self) -> str:
        return setting_label(self.method, self.k)

    def as_json(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "method": self.method, "k": self.k,
                "tokens_per_s": self.tokens_per_s}


@dataclass(frozen=True)
class Baseline:
    """No speculation: measured in this sweep, else the profile's `baseline_tps`, else unknown."""

    tokens_per_s: float | None
    source: BaselineSource | None

    def as_json(self) -> dict[str, Any]:
        return {"method": "none", "tokens_per_s": self.tokens_per_s, "source": self.source}


@dataclass(frozen=True)
class Current:
    """The profile's own setting, and its tok/s when the sweep measured it."""

    profile: str
    method: str
    k: int | None
    tokens_per_s: float | None

    @property
    def label(self) -> str:
        return setting_label(self.method, self.k)

    def as_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "method": self.method, "k": self.k, "tokens_per_s": self.tokens_per_s}


@dataclass(frozen=True)
class SpecSetting:
    method: str
    num_speculative_tokens: int | None

    def as_json(self) -> dict[str, Any]:
        return {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens}


@dataclass(frozen=True)
class ProfileChange:
    """What to change in the specops config for the recommended setting; `yaml` is the snippet to paste."""

    profile: str
    before: SpecSetting
    after: SpecSetting
    yaml: str

    def as_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "from": self.before.as_json(), "to": self.after.as_json(), "yaml": self.yaml}


@dataclass(frozen=True)
class Restored:
    """What serves after the sweep: the deployment from before, the best setting (keep_best), or nothing."""

    profile: str | None
    status: RestoreStatus
    message: str

    def as_json(self) -> dict[str, Any]:
        return {"profile": self.profile, "status": self.status, "message": self.message}


@dataclass(frozen=True)
class TunePlan:
    """What a sweep would deploy and measure (the dry run), and what it cannot."""

    host: str
    profile: str
    settings: tuple[str, ...]
    skipped: tuple[Skipped, ...]
    concurrency: tuple[int, ...]
    requests: int
    keep_best: bool

    @property
    def verdict(self) -> Verdict:
        return "unknown"  # nothing ran, nothing judged

    @property
    def status(self) -> Literal["planned"]:
        return "planned"

    @property
    def headline(self) -> str:
        return (f"Plan: tune {self.profile} on {self.host} — {len(self.settings)} settings, each deployed and "
                "measured")

    @property
    def steps(self) -> tuple[str, ...]:
        """The plan line by line: each setting deployed and measured, those skipped, then the restore."""
        keep = " (or keep the best)" if self.keep_best else ""
        return (*(f"would deploy and measure {label}" for label in self.settings), *(s.line for s in self.skipped),
                "then restore the deployment serving now" + keep)

    def as_json(self) -> dict[str, Any]:
        return {"host": self.host, "profile": self.profile, "settings": list(self.settings),
                "skipped": [s.as_json() for s in self.skipped], "concurrency": list(self.concurrency),
                "requests": self.requests, "keep_best": self.keep_best}


@dataclass(frozen=True)
class TuneResult:
    """The sweep: one row per setting and concurrency (or the setting's failure), the recommendation among
    them, and what was restored afterwards."""

    host: str
    profile: str
    settings: tuple[str, ...]
    skipped: tuple[Skipped, ...]
    concurrency: tuple[int, ...]
    requests: int
    workload: WorkloadUsed
    results: tuple[TuneRow, ...]
    recommended: Recommendation | None
    best_under_load: tuple[BestAt, ...]
    baseline: Baseline
    current: Current
    profile_change: ProfileChange | None
    previous: str | None
    restored: Restored
    cancelled: bool
    interrupted: bool
    duration_s: float

    @property
    def measured(self) -> tuple[Measured, ...]:
        return tuple(r for r in self.results if isinstance(r, Measured))

    @property
    def verdict(self) -> Verdict:
        if self.recommended is None:
            return "failing"
        return "unknown" if self.cancelled else "healthy"

    @property
    def status(self) -> Literal["changed", "failed"]:
        """The host's side of it, as an operation's status: the sweep always changed what serves."""
        return "failed" if self.restored.status == "failed" else "changed"

    @property
    def headline(self) -> str:
        rec = self.recommended
        if rec is None:
            line = f"Tune {self.profile} on {self.host}: no setting could be measured"
        else:
            gains = []
            if rec.gain:
                gains.append(f"{rec.gain:.2f}x the current setting")
            if rec.gain_over_none:
                gains.append(f"{rec.gain_over_none:.2f}x no speculation")
            line = (f"Tune {self.profile} on {self.host}: best {rec.label}, {rec.tokens_per_s} tok/s for one request"
                    + (f" ({', '.join(gains)})" if gains else ""))
        return line + (" — cancelled" if self.cancelled else "")

    def as_json(self) -> dict[str, Any]:
        return {"host": self.host, "profile": self.profile, "settings": list(self.settings),
                "skipped": [s.as_json() for s in self.skipped], "concurrency": list(self.concurrency),
                "requests": self.requests, "workload": self.workload.as_json(),
                "results": [r.as_json() for r in self.results],
                "recommended": None if self.recommended is None else self.recommended.as_json(),
                "best_under_load": [b.as_json() for b in self.best_under_load], "baseline": self.baseline.as_json(),
                "current": self.current.as_json(),
                "profile_change": None if self.profile_change is None else self.profile_change.as_json(),
                "previous": self.previous, "restored": self.restored.as_json(), "cancelled": self.cancelled,
                "interrupted": self.interrupted, "duration_s": self.duration_s}

