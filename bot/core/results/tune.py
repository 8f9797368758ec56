"""`specops tune`: its plan (the dry run) and its sweep, as typed data.

`as_json()` is the `--format json` contract: its keys, their order and their values are what scripts read,
so they only ever grow. Everything else (text, Markdown, Slack, the chart) is bot/present/tune.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from bot.core.report import Verdict

RestoreStatus = Literal["redeployed", "kept-best", "stopped", "failed"]
# "profile baseline_tps" is what `baseline.source` said before the reference had its own key (`reference`);
# a sweep now fills `baseline` from its own k = 0 rows only
BaselineSource = Literal["measured", "profile baseline_tps"]
NO_SPECULATION = "no speculation (k=0)"


def setting_label(method: str, k: int | None) -> str:
    return "none" if k is None or method == "none" else f"{method} k={k}"


def shown_label(method: str, k: int | None) -> str:
    """A setting as a person reads it: k = 0 is named for what it is."""
    return NO_SPECULATION if k is None or method == "none" else f"{method} k={k}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


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
    errors: int = 0  # requests answered with an error (a rollout counts them; tune's measurement fails on one)


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
    """The fastest setting for one request, and its gain over the profile's own setting, over no speculation
    measured in this sweep (k = 0), and over the reference (the profile's baseline_tps)."""

    method: str
    k: int | None
    concurrency: int
    tokens_per_s: float
    gain: float | None
    gain_over_none: float | None
    gain_over_reference: float | None = None

    @property
    def label(self) -> str:
        return setting_label(self.method, self.k)

    def as_json(self) -> dict[str, Any]:
        return {"k": self.k, "method": self.method, "concurrency": self.concurrency,
                "tokens_per_s": self.tokens_per_s, "gain": self.gain, "gain_over_none": self.gain_over_none,
                "gain_over_reference": self.gain_over_reference}


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
    """No speculation (k = 0: the profile served without a speculative config), measured in this sweep at the
    lowest concurrency — else unknown. Never the profile's baseline_tps: that is the `Reference`."""

    tokens_per_s: float | None
    source: BaselineSource | None

    @property
    def label(self) -> str:
        return "no speculation (measured)" if self.tokens_per_s is not None else "no speculation (not measured)"

    def as_json(self) -> dict[str, Any]:
        return {"method": "none", "tokens_per_s": self.tokens_per_s, "source": self.source, "label": self.label}


@dataclass(frozen=True)
class Reference:
    """The speed the team had before, as the profile states it (`baseline_tps`): a number to beat, not measured
    in this sweep, and not "no speculation" (the brief's 73.5 tok/s is MTP's)."""

    tokens_per_s: float
    source: Literal["profile baseline_tps"] = "profile baseline_tps"

    @property
    def label(self) -> str:
        return f"reference (profile baseline_tps: {self.tokens_per_s:.1f} tok/s)"

    def as_json(self) -> dict[str, Any]:
        return {"tokens_per_s": self.tokens_per_s, "source": self.source, "label": self.label}


@dataclass(frozen=True)
class LoadBest:
    """The fastest setting measured at one concurrency, beside no speculation measured at the same one."""

    concurrency: int
    method: str
    k: int | None
    tokens_per_s: float
    no_speculation_tps: float | None

    @property
    def label(self) -> str:
        return shown_label(self.method, self.k)

    @property
    def gain_over_none(self) -> float | None:
        return _ratio(self.tokens_per_s, self.no_speculation_tps)

    def as_json(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "method": self.method, "k": self.k,
                "tokens_per_s": self.tokens_per_s, "no_speculation_tps": self.no_speculation_tps,
                "gain_over_none": self.gain_over_none, "source": "measured in this sweep"}


@dataclass(frozen=True)
class ObservedLoad:
    """The load the host saw: requests running in the watch's samples (those with a request running) over the
    last `hours`, and the measured concurrency nearest their median."""

    samples: int
    hours: float
    median_running: float
    p90_running: float
    concurrency: int

    @property
    def line(self) -> str:
        return (f"median {self.median_running:g} requests running, 90th percentile {self.p90_running:g}, over "
                f"{self.samples} watch samples in the last {self.hours:g} h")

    def as_json(self) -> dict[str, Any]:
        return {"source": "watch samples", "samples": self.samples, "hours": self.hours,
                "median_running": self.median_running, "p90_running": self.p90_running,
                "concurrency": self.concurrency}


@dataclass(frozen=True)
class BatchSizeOption:
    """vLLM's per-batch-size k, as read from its released source: the speculative config key, the first
    release that has it, the releases checked, and where to read it."""

    key: str
    first_release: str | None
    checked: str  # the releases read, e.g. "0.6.6.post1–0.33.0"
    source: str | None  # the key in the first release's source
    docs: str | None
    pr: str | None

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "first_release": self.first_release, "checked": self.checked,
                "source": self.source, "docs": self.docs, "pr": self.pr}


@dataclass(frozen=True)
class PerLoad:
    """A k per load: the schedule to serve (`schedule`: [start, end, k] batch-size ranges, when the profile's
    release takes one), and the one k for the load the host saw (`single`, measured at `load.concurrency`) or,
    with no load known, the one closest to the best at every concurrency measured."""

    vllm_version: str | None
    supported: bool | None  # None: the profile names no vLLM version
    option: BatchSizeOption
    method: str | None
    schedule: tuple[tuple[int, int, int], ...] | None
    load: ObservedLoad | None
    single: LoadBest | None
    single_why: str
    yaml: str | None
    notes: tuple[str, ...] = ()
    same_everywhere: bool = False  # one k is the fastest at every concurrency: no schedule needed

    def as_json(self) -> dict[str, Any]:
        return {"vllm_version": self.vllm_version, "supported": self.supported, "option": self.option.as_json(),
                "method": self.method,
                "schedule": None if self.schedule is None else [list(e) for e in self.schedule],
                "load": None if self.load is None else self.load.as_json(),
                "single": None if self.single is None else self.single.as_json(), "single_why": self.single_why,
                "yaml": self.yaml, "notes": list(self.notes), "same_everywhere": self.same_everywhere}


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
        return (*(f"would deploy and measure {label}" + (" (no speculation, k=0)" if label == "none" else "")
                  for label in self.settings), *(s.line for s in self.skipped),
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
    reference: Reference | None = None
    by_concurrency: tuple[LoadBest, ...] = ()
    per_load: PerLoad | None = None
    cautions: tuple[str, ...] = ()  # what a reader must not miss: slower than the reference, k = 0 not measured

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
            if rec.gain_over_reference and rec.gain_over_reference < 1:
                gains.append(f"slower than the reference: {rec.gain_over_reference:.2f}x")
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
                "interrupted": self.interrupted, "duration_s": self.duration_s,
                "reference": None if self.reference is None else self.reference.as_json(),
                "by_concurrency": [b.as_json() for b in self.by_concurrency],
                "per_load": None if self.per_load is None else self.per_load.as_json(),
                "cautions": list(self.cautions)}

