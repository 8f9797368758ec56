"""What a watch judges: its typed sample, the alert rules over a host's recent samples, the health streak
that resolves an incident, and the day summary a health report reads. Pure: the app collects the samples
and keeps them; the windows are summed by the same functions the diagnosis uses (`core.triage.evidence`).

The rules read `WatchRules`: the config's thresholds as it holds them (`Thresholds`, a protocol: the core imports
no config model, bot.config pulls in the scheduler's cron parser) and the profiles' facts the app hands in.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from bot.core.parsed_log import SpecDecodeSample
from bot.core.triage.acceptance import TPS_NOISE, first_position_floor
from bot.core.triage.evidence import EngineSummary, Window, summarize
from bot.core.triage.knowledge import KV_SATURATED, normalize_method

NO_DEPLOYMENT = "no deployment recorded"
PROMETHEUS = "prometheus"  # WatchSample.source of an instance watched through Prometheus (None: over SSH)


@dataclass(frozen=True)
class Alert:
    kind: str  # down | acceptance | slow | kv | errors (prometheus:NAME from Alertmanager)
    title: str
    detail: str
    severity: str = "critical"


@dataclass(frozen=True)
class WatchSample:
    """One watch of a host. The samples table keeps it as JSON (`as_dict`, read back by `from_dict`); the
    field names are that JSON's keys, so the rows written before this type read the same."""

    up: bool = False  # /health answered 200
    reachable: bool = False  # the host (or Prometheus' `up`) answered at all
    health: int | None = None  # /health's HTTP status
    errors: tuple[str, ...] = ()  # failing log lines, or why the host could not be read
    profile: str | None = None  # the deployed profile's name
    source: str | None = None
    note: str | None = None
    # a scrape (or Prometheus window) was read: its gauges are kept even when vLLM did not export them,
    # so a row says "read, absent" apart from "not read"
    metrics_read: bool = False
    kv: float | None = None  # percent, as the Engine line prints it
    running: float | None = None
    waiting: float | None = None
    requests_total: float | None = None
    generation_tokens_total: float | None = None
    drafts_total: float | None = None
    accepted_total: float | None = None
    mean: float | None = None  # mean acceptance length over this watch's window
    per_position: tuple[float, ...] | None = None
    drafts: float | None = None
    accepted: float | None = None
    drafted: float | None = None
    generated: float | None = None  # tokens generated in this watch's window
    gen_tps: float | None = None
    single_tps: float | None = None  # tok/s while exactly one request ran: comparable with the baseline
    alerts: tuple[str, ...] | None = None  # the kinds raised when it was taken

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WatchSample:
        return cls(
            up=bool(d.get("up")), reachable=bool(d.get("reachable")), health=_int(d.get("health")),
            errors=_texts(d.get("errors")) or (), profile=_text(d.get("profile")), source=_text(d.get("source")),
            note=_text(d.get("note")), metrics_read=any(k in d for k in ("kv", "running", "waiting")),
            kv=_num(d.get("kv")), running=_num(d.get("running")), waiting=_num(d.get("waiting")),
            requests_total=_num(d.get("requests_total")),
            generation_tokens_total=_num(d.get("generation_tokens_total")),
            drafts_total=_num(d.get("drafts_total")), accepted_total=_num(d.get("accepted_total")),
            mean=_num(d.get("mean")), per_position=_nums(d.get("per_position")), drafts=_num(d.get("drafts")),
            accepted=_num(d.get("accepted")), drafted=_num(d.get("drafted")), generated=_num(d.get("generated")),
            gen_tps=_num(d.get("gen_tps")), single_tps=_num(d.get("single_tps")), alerts=_texts(d.get("alerts")),
        )

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"up": self.up, "health": self.health, "errors": list(self.errors),
                             "reachable": self.reachable}
        if self.profile is not None or self.source is not None or self.note is not None:
            d["profile"] = self.profile  # once the deployment record (or the instance's config) was read
        if self.metrics_read:
            d |= {"kv": self.kv, "running": self.running, "waiting": self.waiting}
            if self.source is None:  # a /metrics scrape reads the totals; Prometheus answers their increase
                d |= {"requests_total": self.requests_total, "generation_tokens_total": self.generation_tokens_total}
        optional = {
            "source": self.source, "note": self.note, "drafts_total": self.drafts_total,
            "accepted_total": self.accepted_total, "mean": self.mean,
            "per_position": None if self.per_position is None else list(self.per_position),
            "drafts": self.drafts, "accepted": self.accepted, "drafted": self.drafted, "generated": self.generated,
            "gen_tps": self.gen_tps, "single_tps": self.single_tps,
            "alerts": None if self.alerts is None else list(self.alerts),
        }
        d |= {k: v for k, v in optional.items() if v is not None}
        return d

    def with_errors(self, lines: Sequence[str]) -> WatchSample:
        return replace(self, errors=(*self.errors, *lines)) if lines else self

    def with_interval(self, w: SpecDecodeSample | None) -> WatchSample:
        """The spec-decode counters over the interval between two scrapes (`core.prom_samples.window`)."""
        if w is None or not w.num_drafts:
            return self
        return replace(self, mean=round(w.mean_acceptance_length, 3), per_position=_rounded(w.per_position),
                       drafts=w.num_drafts, accepted=w.accepted, drafted=w.drafted)

    def with_log_window(self, win: Window | None) -> WatchSample:
        """The new SpecDecoding lines summed as a diagnosis sums them (`core.triage.evidence.summarize`);
        a scrape's window, when there was one, counts instead: it is exact where a log line rounds."""
        if win is None or not win.num_drafts or self.mean is not None:
            return self
        return replace(self, mean=round(win.mean, 3), per_position=_rounded(win.per_position) or None,
                       drafts=win.num_drafts, accepted=win.accepted, drafted=win.drafted)

    def with_engine(self, e: EngineSummary | None) -> WatchSample:
        """Throughput from the new Engine lines, averaged as a diagnosis averages them (`summarize_engine`)."""
        if e is None:
            return self
        return replace(self, gen_tps=_round1(e.generation_tps, self.gen_tps),
                       single_tps=_round1(e.single_request_tps, self.single_tps))

    def window(self) -> SpecDecodeSample | None:
        """This watch's counters as one window sample (counted like a scrape's), for summing several."""
        if self.drafts is None or self.drafts <= 0:
            return None
        return SpecDecodeSample(
            form="prometheus", mean_acceptance_length=math.nan if self.mean is None else self.mean,
            accepted=round(self.accepted or 0), drafted=round(self.drafted or 0),
            per_position=list(self.per_position or ()), avg_draft_acceptance_rate=None, num_drafts=self.drafts)


# --- the alert rules ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Deployed:
    """What the rules need of a profile: what it speculates with, and how fast it ran without."""

    method: str = "none"
    baseline_tps: float | None = None

    @property
    def speculates(self) -> bool:
        return self.method != "none"


class Thresholds(Protocol):
    """The config's watch.rules (`bot.config.AlertRules`, where the defaults live), read as it is: one model of
    the thresholds, which the core reads without importing the config."""

    @property
    def down_after(self) -> int: ...  # /health failed this many watches in a row
    @property
    def low_acceptance_samples(self) -> int: ...  # position 0 (or one-request tok/s) below its floor, in a row
    @property
    def first_position_floor(self) -> Mapping[str, float]: ...  # per method (core.triage.acceptance)
    @property
    def kv_saturated(self) -> float | None: ...  # percent; None: the triage's own limit


@dataclass(frozen=True)
class WatchRules:
    """The thresholds and the profiles a sample may name."""

    thresholds: Thresholds
    profiles: Mapping[str, Deployed] = field(default_factory=dict)

    @property
    def down_after(self) -> int:
        return self.thresholds.down_after

    @property
    def low_acceptance_samples(self) -> int:
        return self.thresholds.low_acceptance_samples

    @property
    def first_position_floor(self) -> Mapping[str, float]:
        return self.thresholds.first_position_floor

    @property
    def kv_saturated(self) -> float:
        kv = self.thresholds.kv_saturated
        return KV_SATURATED if kv is None else kv

    def profile(self, sample: WatchSample) -> Deployed | None:
        return self.profiles.get(str(sample.profile))


@dataclass(frozen=True)
class Watched:
    """What every rule reads: the host's recent samples (newest last), the thresholds and the profile."""

    host: str
    recent: tuple[WatchSample, ...]
    rules: WatchRules
    profile: Deployed | None

    @property
    def last(self) -> WatchSample:
        return self.recent[-1]

    @property
    def method(self) -> str | None:
        """The speculative method deployed; None when the profile does not speculate or is unknown."""
        p = self.profile
        if p is None or not p.speculates:
            return None
        return normalize_method(p.method) or p.method


Rule = Callable[[Watched], Alert | None]


def server_down(w: Watched) -> Alert | None:
    n = w.rules.down_after
    down = w.recent[-n:]
    if len(down) < n or any(s.up for s in down):
        return None
    why = "; ".join(down[-1].errors) or f"/health answered {down[-1].health}"
    return Alert("down", f"{w.host}: the server is down", f"/health failed {n} watches in a row ({why[:300]})")


def acceptance_floor(rules: WatchRules, method: str) -> float:
    """The floor of position 0's acceptance for `method`: the triage's, so the watch and a diagnosis agree."""
    return first_position_floor(method, rules.first_position_floor)


def first_position(s: WatchSample) -> float | None:
    """Position 0's acceptance in the sample; without per-position rates, mean - 1 bounds it from above (the
    accepted tokens per draft are position 0's share plus the later positions'), as the triage bounds it."""
    if s.per_position:
        return s.per_position[0]
    return None if s.mean is None else max(s.mean - 1.0, 0.0)


def acceptance_collapsed(w: Watched) -> Alert | None:
    method, n = w.method, w.rules.low_acceptance_samples
    if method is None:
        return None
    floor = acceptance_floor(w.rules, method)
    firsts = [p for s in w.recent if (p := first_position(s)) is not None][-n:]
    if len(firsts) < n or not all(p < floor for p in firsts):
        return None
    shown = ", ".join(f"{p:.2f}" for p in firsts)
    return Alert("acceptance", f"{w.host}: acceptance collapsed ({method})",
                 f"position 0 accepts {shown} of drafts — below the floor of {floor:g} for {method} in {n} samples "
                 "in a row")


def slower_than_baseline(w: Watched) -> Alert | None:
    # like acceptance, judged over several samples: one slow interval is not an incident
    n = w.rules.low_acceptance_samples
    baseline = w.profile.baseline_tps if w.profile is not None and w.method is not None else None
    measured = [s.single_tps for s in w.recent if s.single_tps is not None][-n:]
    if not baseline or len(measured) < n or not all(t < baseline * (1 - TPS_NOISE) for t in measured):
        return None
    shown = ", ".join(f"{t:.1f}" for t in measured)
    return Alert("slow", f"{w.host}: speculation slower than the reference",
                 f"{shown} tok/s for one request in {n} samples, the reference {baseline:.1f} tok/s", "warning")


def kv_saturated(w: Watched) -> Alert | None:
    kv, waiting = w.last.kv, w.last.waiting or 0
    if kv is not None and kv >= w.rules.kv_saturated and waiting > 0:
        return Alert("kv", f"{w.host}: KV cache saturated",
                     f"KV cache usage {kv:.1f}% with {waiting:.0f} request(s) waiting", "warning")
    return None


def new_error_lines(w: Watched) -> Alert | None:
    if not (w.last.errors and w.last.reachable):
        return None  # an unreachable host's errors say why it is down: the down rule reports them
    return Alert("errors", f"{w.host}: new error lines in the log", "\n".join(w.last.errors[-5:]))


# in this order: an incident is titled after its first alert
RULES: tuple[Rule, ...] = (server_down, acceptance_collapsed, slower_than_baseline, kv_saturated, new_error_lines)


def evaluate(rules: WatchRules, host: str, recent: Sequence[WatchSample]) -> list[Alert]:
    """The alert rules over the host's recent samples, newest last."""
    if not recent or recent[-1].note == NO_DEPLOYMENT:
        return []
    watched = Watched(host, tuple(recent), rules, rules.profile(recent[-1]))
    return [alert for rule in RULES if (alert := rule(watched)) is not None]


# --- health: what resolves an incident ------------------------------------------------------------

def shows_health(rules: WatchRules, s: WatchSample) -> bool | None:
    """True: this sample shows the deployment healthy; False: it shows a problem; None: it shows nothing
    (an idle server: no traffic, so no acceptance measured — it can neither resolve nor break a streak)."""
    if s.alerts or not s.up:
        return False
    profile = rules.profile(s)
    if profile is not None and profile.speculates and s.mean is None:
        return None
    return True


def health_streak(rules: WatchRules, samples: Sequence[WatchSample]) -> int:
    """Samples that showed health, newest back to the last one that showed a problem (idle ones skipped)."""
    streak = 0
    for s in reversed(samples):
        shown = shows_health(rules, s)
        if shown is False:
            break
        if shown:
            streak += 1
    return streak


# --- the day's numbers ----------------------------------------------------------------------------

@dataclass(frozen=True)
class DaySummary:
    """A period of samples -> the numbers of a health report."""

    samples: int
    up_fraction: float = 0.0
    up_now: bool = False
    mean_acceptance: float | None = None
    drafts: float = 0.0
    accepted: float = 0.0
    drafted: float = 0.0
    per_position: tuple[float, ...] = ()
    requests: float | None = None
    gen_tps: float | None = None
    single_tps: float | None = None
    first: float = 0.0
    last: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        if not self.samples:
            return {"samples": 0}
        return {
            "samples": self.samples, "up_fraction": self.up_fraction, "up_now": self.up_now,
            "mean_acceptance": self.mean_acceptance, "drafts": self.drafts, "accepted": self.accepted,
            "drafted": self.drafted, "per_position": list(self.per_position), "requests": self.requests,
            "gen_tps": self.gen_tps, "single_tps": self.single_tps, "first": self.first, "last": self.last,
        }

    def window(self) -> SpecDecodeSample | None:
        """The period's counters as one window sample the triage can judge."""
        if self.drafts <= 0:
            return None
        drafted = self.drafted or self.drafts * len(self.per_position)
        return SpecDecodeSample(
            form="prometheus", mean_acceptance_length=1 + self.accepted / self.drafts, accepted=round(self.accepted),
            drafted=round(drafted), per_position=list(self.per_position),
            avg_draft_acceptance_rate=(100.0 * self.accepted / drafted) if drafted else None, num_drafts=self.drafts)


def summarize_day(rows: Sequence[tuple[float, WatchSample]]) -> DaySummary:
    """The samples of a period (when each was taken, oldest first) -> the numbers of a health report."""
    if not rows:
        return DaySummary(samples=0)
    samples = [s for _, s in rows]
    windows = [w for s in samples if (w := s.window()) is not None]
    mean, drafts, accepted, drafted = _counted(windows)
    curve = summarize(latest_setting(windows))
    return DaySummary(
        samples=len(rows), up_fraction=sum(1 for s in samples if s.up) / len(rows), up_now=samples[-1].up,
        mean_acceptance=mean, drafts=drafts, accepted=accepted, drafted=drafted,
        per_position=tuple(curve.per_position) if curve else (),
        requests=counter_growth([s.requests_total for s in samples]),
        gen_tps=_mean([s.gen_tps for s in samples]), single_tps=_mean([s.single_tps for s in samples]),
        first=rows[0][0], last=rows[-1][0],
    )


def _counted(windows: list[SpecDecodeSample]) -> tuple[float | None, float, float, float]:
    """(mean acceptance length, drafts, accepted, drafted) over every window of the period."""
    total = summarize(windows)
    if total is None or not total.num_drafts:
        return None, 0.0, 0.0, 0.0
    return total.mean, total.num_drafts, float(total.accepted), float(total.drafted)


def latest_setting(windows: Sequence[SpecDecodeSample]) -> list[SpecDecodeSample]:
    """The windows since k last changed (a redeploy within the period): the per-position curve is the
    current setting's, not a blend of two."""
    measured = [w for w in windows if w.per_position]
    if not measured:
        return []
    k = len(measured[-1].per_position)
    return list(itertools.takewhile(lambda w: len(w.per_position) == k, reversed(measured)))[::-1]


def counter_growth(values: Sequence[float | None]) -> float | None:
    """How much a counter grew, across restarts (a drop means the server restarted at zero)."""
    nums = [v for v in values if v is not None and not math.isnan(v)]
    if len(nums) < 2:
        return None
    return sum((b - a) if b >= a else b for a, b in itertools.pairwise(nums))


def _mean(values: Sequence[float | None]) -> float | None:
    nums = [v for v in values if v is not None]
    return sum(nums) / len(nums) if nums else None


def _rounded(values: Sequence[float]) -> tuple[float, ...]:
    return tuple(round(x, 3) for x in values)


def _round1(value: float | None, otherwise: float | None) -> float | None:
    return otherwise if value is None else round(value, 1)


def _num(v: object) -> float | None:
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _text(v: object) -> str | None:
    return None if v is None else str(v)


def _texts(v: object) -> tuple[str, ...] | None:
    return tuple(str(x) for x in v) if isinstance(v, list | tuple) else None


def _nums(v: object) -> tuple[float, ...] | None:
    nums = [_num(x) for x in v] if isinstance(v, list | tuple) else [None]
    return None if None in nums else tuple(n for n in nums if n is not None)
