"""`specops tune`: measure which speculative setting (method x num_speculative_tokens) serves fastest on a host.

For each setting the named profile is copied with the method and k changed (a derived profile, e.g.
`mtp@mtp-k2`, valid like any profile, in an in-memory copy of the config) and deployed through the
normal deploy path (`ops.deploy`: the lock, the pre-flight, the doctor, the health wait). Then the
probe workload (bot/app/tuning/tune_prompts.yaml, or --prompts FILE) is measured by
bot/app/tuning/workload.py, the driver
`rollout` uses too: through an SSH forward, a warm-up, then at each concurrency a fixed number of
completions (generation tok/s = tokens / wall time), the mean acceptance and per-position curve from
/metrics counter deltas, and the time to first token of streamed requests. Afterwards the deployment that
was serving before is restored (or the best setting kept, with keep_best; with nothing serving before, the
server is stopped).

The result is a `TuneResult` (bot/core/results/tune.py; its `as_json()` is the contract of `--format json`),
the dry run a `TunePlan`; bot/present/tune.py renders both.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from bot.app.operations import ops
from bot.app.tuning.tune_load import by_concurrency, observed_load, per_load, yaml_lines
from bot.app.tuning.workload import Workload, load_prompts, measure, serving_before
from bot.config import Config, Profile
from bot.core.results.tune import (
    Baseline,
    BestAt,
    Current,
    Failed,
    LoadBest,
    Measured,
    Measurement,
    ObservedLoad,
    ProfileChange,
    Recommendation,
    Reference,
    Restored,
    RestoreStatus,
    Skipped,
    SpecSetting,
    TunePlan,
    TuneResult,
    TuneRow,
    WorkloadUsed,
    shown_label,
)
from bot.engine.hosts import HostPool
from bot.engine.playbook import Progress, ProgressFn
from bot.errors import InputError, SpecopsError
from bot.identity import default_owner
from bot.store.facade import Store

__all__ = [
    "METHODS", "Setting", "TuneRequest", "check_requests", "derive_profile", "derived_config", "parse_concurrency",
    "parse_ks", "parse_methods", "plan", "plan_settings", "tune"
]

METHODS: tuple[str, ...] = ("dflash", "mtp", "eagle", "eagle3", "ngram", "draft_model", "none")
NEEDS_DRAFTER = frozenset({"dflash", "eagle", "eagle3", "draft_model"})
DEFAULT_KS: tuple[int, ...] = (1, 2, 4, 8)
# no speculation (k = 0) is measured whatever the methods, unless include_none is off (--no-k0)
DEFAULT_METHODS: tuple[str, ...] = ("dflash", "mtp", "none")
DEFAULT_CONCURRENCY: tuple[int, ...] = (1, 8)
DEFAULT_REQUESTS = 4
MAX_K = 64
MAX_CONCURRENCY = 256
MAX_REQUESTS = 1000


# --- inputs -------------------------------------------------------------------------------------

def _int_list(text: str, what: str, low: int, high: int) -> list[int]:
    words = [w.strip() for w in str(text).split(",")]
    if not words or any(not w for w in words):
        raise InputError(f"{what} {text!r}: give whole numbers separated by commas, e.g. 1,2,4")
    out: list[int] = []
    for w in words:
        if not w.isdigit():
            raise InputError(f"{what} {text!r}: {w[:20]!r} is not a whole number")
        n = int(w)
        if not low <= n <= high:
            raise InputError(f"{what} {text!r}: {n} is out of range ({low}..{high})")
        if n not in out:
            out.append(n)
    return out


def parse_ks(text: str) -> list[int]:
    return _int_list(text, "--k", 1, MAX_K)


def parse_concurrency(text: str) -> list[int]:
    return sorted(_int_list(text, "--concurrency", 1, MAX_CONCURRENCY))


def parse_methods(text: str) -> list[str]:
    words = [w.strip().lower() for w in str(text).split(",")]
    if not words or any(not w for w in words):
        raise InputError(f"--methods {text!r}: give methods separated by commas, e.g. dflash,mtp,none")
    out: list[str] = []
    for w in words:
        if w not in METHODS:
            raise InputError(f"--methods: unknown method {w[:24]!r}; known: {', '.join(METHODS)}")
        if w not in out:
            out.append(w)
    return out


def check_requests(n: int) -> int:
    if not 1 <= n <= MAX_REQUESTS:
        raise InputError(f"--requests {n}: must be from 1 to {MAX_REQUESTS}")
    return n


# --- settings -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    method: str
    k: int | None  # None: no speculation

    @property
    def label(self) -> str:
        return "none" if self.k is None else f"{self.method} k={self.k}"

    def profile_name(self, profile: str) -> str:
        return f"{profile}@none" if self.k is None else f"{profile}@{self.method}-k{self.k}"


def derive_profile(base: Profile, s: Setting) -> Profile:
    """The profile with method and k changed, validated as any profile. Raises ValueError."""
    data = base.model_dump()
    data["method"] = s.method
    data["num_speculative_tokens"] = s.k
    if s.method not in NEEDS_DRAFTER:
        data["drafter"] = None
        data["drafter_config"] = None
    if s.method != base.method:
        data["speculative_extra"] = {}  # e.g. ngram's prompt_lookup_max means nothing to MTP
    if data.get("playbook") in ("deploy-dflash", "deploy-mtp"):
        data["playbook"] = "deploy"  # the deploy picks the playbook by the method
    return Profile.model_validate(data)


def plan_settings(config: Config, profile: str, ks: Sequence[int], methods: Sequence[str],
                  include_current: bool = True,
                  include_none: bool = True) -> tuple[list[tuple[Setting, Profile]], list[Skipped]]:
    """The settings a sweep deploys, each with its derived profile, and those that cannot exist (and why).
    `include_current`: the profile's own k is measured too (when its method is swept), so the gain over the
    current setting is a measured one. `include_none`: no speculation (k = 0, the same model served without a
    speculative config) is measured first, whatever the methods, so every gain over it is measured in the same
    sweep (as vLLM's own K tuning does)."""
    base = config.profile(profile)
    out: list[tuple[Setting, Profile]] = []
    skipped: list[Skipped] = []
    swept = [m for m in methods if m != "none"]
    if include_none or "none" in methods:
        swept.insert(0, "none")
    for method in swept:
        method_ks = list(ks)
        current_k = base.num_speculative_tokens
        if include_current and method == base.method and current_k is not None and current_k not in method_ks:
            method_ks = sorted([*method_ks, current_k])
        candidates = [Setting("none", None)] if method == "none" else [Setting(method, k) for k in method_ks]
        if method in NEEDS_DRAFTER and not base.drafter:
            skipped += [Skipped(s.method, s.k, f"{method} needs a drafter; profile {profile} names none")
                        for s in candidates]
            continue
        if method in NEEDS_DRAFTER and method != base.method and base.method in NEEDS_DRAFTER:
            skipped += [Skipped(s.method, s.k, f"the drafter of {profile} is a {base.method} drafter, not a "
                                f"{method} one") for s in candidates]
            continue
        for s in candidates:
            try:
                out.append((s, derive_profile(base, s)))
            except ValueError as exc:
                skipped.append(Skipped(s.method, s.k, str(exc).splitlines()[-1][:200]))
    return out, skipped


def derived_config(config: Config, profile: str, settings: Sequence[tuple[Setting, Profile]]) -> Config:
    profiles = dict(config.profiles)
    for s, p in settings:
        profiles[s.profile_name(profile)] = p
    return config.model_copy(update={"profiles": profiles})


@dataclass
class TuneRequest:
    """One sweep. `store` and `hosts` are the object graph's (app/services.py): the deploys lock and record
    through that store, and every session comes from that pool."""

    config: Config
    host: str
    profile: str
    ks: Sequence[int] = DEFAULT_KS
    methods: Sequence[str] = DEFAULT_METHODS
    concurrency: Sequence[int] = DEFAULT_CONCURRENCY
    requests: int = DEFAULT_REQUESTS
    workload: Workload | None = None
    keep_best: bool = False
    include_current: bool = True
    include_none: bool = True  # k = 0 measured in the same sweep (--no-k0 turns it off)
    owner: str = field(default_factory=default_owner)
    progress: ProgressFn | None = None  # one line per setting
    step_progress: ProgressFn | None = None  # the deploys' steps
    cancel: threading.Event = field(default_factory=threading.Event)
    store: Store = field(kw_only=True)
    hosts: HostPool = field(kw_only=True)


# --- the sweep ----------------------------------------------------------------------------------

def _best(rows: Sequence[TuneRow], concurrency: int) -> tuple[Measured, float] | None:
    """The fastest measured row at `concurrency`, with its tok/s (the first of equals: the sweep's order)."""
    rated = [(r, tps) for r in rows if isinstance(r, Measured) and r.concurrency == concurrency
             and (tps := r.tokens_per_s)]
    return max(rated, key=lambda rt: rt[1]) if rated else None


def _row_for(rows: Sequence[TuneRow], method: str, k: int | None, concurrency: int) -> Measured | None:
    return next((r for r in rows if isinstance(r, Measured) and r.concurrency == concurrency and r.method == method
                 and (r.k == k or method == "none")), None)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def plan(req: TuneRequest) -> TunePlan:
    settings, skipped = plan_settings(req.config, req.profile, req.ks, req.methods, req.include_current,
                                      req.include_none)
    req.config.host(req.host)
    return TunePlan(req.host, req.profile, tuple(s.label for s, _ in settings), tuple(skipped),
                    tuple(req.concurrency), req.requests, req.keep_best)


def _nothing_to_measure(skipped: Sequence[Skipped]) -> str:
    return "nothing to measure: " + "; ".join(sorted({s.reason for s in skipped})) if skipped else "nothing to measure"


def _measured_line(found: Sequence[Measurement]) -> str:
    if not found:
        return "cancelled before measuring"
    one = found[0]
    return (f"{one.tokens_per_s} tok/s at concurrency {one.concurrency}, mean acceptance "
            f"{one.mean_acceptance_length or '—'}, TTFT {one.ttft_s or '—'} s")


@dataclass
class _Sweep:
    """One run: the request, the derived config its settings deploy from, the graph's parts, the rows so far
    and how it ended."""

    req: TuneRequest
    cfg: Config
    store: Store
    hosts: HostPool
    workload: Workload
    max_tokens: int
    started: float
    rows: list[TuneRow] = field(default_factory=list)
    cancelled: bool = False
    interrupted: bool = False

    def host_request(self, profile: str | None, cancel: threading.Event,
                     progress: ProgressFn | None = None, force: bool = False) -> ops.HostRequest:
        return ops.HostRequest(self.cfg, self.req.host, profile, owner=self.req.owner, progress=progress,
                               cancel=cancel, force=force, store=self.store, hosts=self.hosts)

    def say(self, i: int, total: int, s: Setting, status: str, message: str = "") -> None:
        if self.req.progress is not None:
            self.req.progress(Progress(i, total, f"tune {shown_label(s.method, s.k)}", status,
                                       time.monotonic() - self.started, message))

    def run(self, settings: Sequence[tuple[Setting, Profile]]) -> None:
        try:
            for i, (s, p) in enumerate(settings, 1):
                if self.req.cancel.is_set():
                    self.cancelled = True
                    return
                rows, stop = self.one(s, p, partial(self.say, i, len(settings), s))
                self.rows += rows
                if stop:
                    self.cancelled = True
                    return
        except KeyboardInterrupt:  # Ctrl-C in the CLI: restore, then say so
            self.cancelled = self.interrupted = True

    def one(self, s: Setting, p: Profile, say: Callable[..., None]) -> tuple[list[TuneRow], bool]:
        """Deploy the setting and measure it: its rows (or its failure), and whether the sweep stops here. A
        failure is this setting's: the sweep goes on."""
        req = self.req
        name = s.profile_name(req.profile)
        say("running", f"deploying {name}")
        try:
            report = ops.deploy(self.host_request(name, req.cancel, req.step_progress))
        except SpecopsError as exc:
            say("failed", str(exc))
            return [Failed(s.method, s.k, name, str(exc), None)], False
        op = report.operation
        if op.status in ("failed", "refused"):  # refused: its checks before launch, nothing started
            if req.cancel.is_set():  # the deploy stopped because the sweep was cancelled: not a failure
                return [], True
            say("failed", report.headline)
            return [Failed(s.method, s.k, name, report.headline, op.failed_step)], False
        try:
            served = self.cfg.profile_for(name, req.host)  # the host's overrides: its port, its model path
            with self.hosts.session(req.host) as session:
                found = measure(session, served.port, served.served_model_name or served.model, self.workload,
                                self.max_tokens, req.concurrency, req.requests, req.cancel)
        except Exception as exc:  # a request failed, the host went away: this setting's failure
            say("failed", f"measuring failed: {exc}")
            return [Failed(s.method, s.k, name, f"measuring failed: {type(exc).__name__}: {str(exc)[:300]}",
                           "measure")], False
        say("ok", _measured_line(found))
        return [Measured.of(s.method, s.k, name, m) for m in found], req.cancel.is_set()

    def restore(self, previous: str | None, best: Measured | None, base: Profile) -> Restored:
        """What served before, back (or the best setting kept, or the server stopped when nothing served)."""
        req = self.req
        fresh = threading.Event()  # the sweep's cancel must not cancel the restore
        target = previous
        status: RestoreStatus = "redeployed"
        if req.keep_best and best is not None and not self.cancelled:
            same = best.method == base.method and (best.k == base.num_speculative_tokens or base.method == "none")
            target = req.profile if same else best.profile
            status = "kept-best"
        try:
            if target is None:
                return Restored(None, "stopped", ops.stop(self.host_request(None, fresh)).headline)
            # what served before (or the best setting measured) is brought back: its checks do not stop that
            rep = ops.deploy(self.host_request(target, fresh, req.step_progress, force=True))
        except SpecopsError as exc:
            return Restored(target, "failed", str(exc))
        except KeyboardInterrupt:
            return Restored(target, "failed", "interrupted while restoring")
        ok = rep.operation.status in ("changed", "unchanged")
        return Restored(target, status if ok else "failed", rep.headline)


def tune(req: TuneRequest) -> TuneResult:
    """The sweep. Raises InputError before anything ran (unknown profile or host, nothing to measure);
    after that every failure is recorded in the result, and the previous deployment is restored."""
    started = time.monotonic()
    base = req.config.profile_for(req.profile, req.host)
    req.config.host(req.host)
    settings, skipped = plan_settings(req.config, req.profile, req.ks, req.methods, req.include_current,
                                      req.include_none)
    if not settings or ("none" not in req.methods and all(s.method == "none" for s, _ in settings)):
        raise InputError(_nothing_to_measure(skipped))  # k = 0 alone is no sweep unless asked for
    workload = req.workload or load_prompts()
    sweep = _Sweep(req, derived_config(req.config, req.profile, settings), req.store, req.hosts, workload,
                   workload.max_tokens or base.probe_max_tokens, started)
    previous = serving_before(req.config, req.host, req.store, req.hosts)
    load = observed_load(req.store, req.host, req.concurrency)  # before the sweep's own traffic
    sweep.run(settings)
    best = _best(sweep.rows, min(req.concurrency))
    restored = sweep.restore(previous, best[0] if best else None, base)
    return _result(sweep, base, settings, skipped, best, restored, previous, load)


def _baseline(none_row: Measured | None) -> Baseline:
    """No speculation as this sweep measured it; never the profile's baseline_tps (that is the reference)."""
    return Baseline(none_row.tokens_per_s, "measured") if none_row is not None else Baseline(None, None)


def _no_k0_caution(req: TuneRequest, rows: Sequence[TuneRow]) -> str:
    if not req.include_none and "none" not in req.methods:
        return "no speculation (k=0) not measured (--no-k0): the gain over it is unknown"
    failed = next((r for r in rows if isinstance(r, Failed) and r.method == "none"), None)
    why = failed.error if failed else "the sweep ended before it"
    return f"no speculation (k=0) could not be measured ({why[:200]}): the gain over it is unknown"


def _cautions(req: TuneRequest, rows: Sequence[TuneRow], rec: Recommendation | None, baseline: Baseline,
              reference: Reference | None) -> tuple[str, ...]:
    """What the reader must not miss: a recommendation slower than no speculation or than the reference."""
    out: list[str] = []
    if baseline.tokens_per_s is None:
        out.append(_no_k0_caution(req, rows))
    if rec is None:
        return tuple(out)
    shown = f"{rec.label} ({rec.tokens_per_s:.1f} tok/s, measured in this sweep at concurrency {rec.concurrency})"
    if rec.method != "none" and baseline.tokens_per_s and rec.tokens_per_s < baseline.tokens_per_s:
        out.append(f"{shown} is slower than no speculation (measured: {baseline.tokens_per_s:.1f} tok/s)")
    if reference is not None and rec.tokens_per_s < reference.tokens_per_s:
        out.append(f"{shown} is slower than the {reference.label}: {rec.tokens_per_s / reference.tokens_per_s:.2f}x."
                   " Nothing measured here reaches the speed the team had; the reference is the profile's number, "
                   "not measured in this sweep (another workload, release or host may explain part of the gap)")
    return tuple(out)


def _recommend(req: TuneRequest, base: Profile, best: tuple[Measured, float] | None, current: Current,
               baseline: Baseline, reference: Reference | None) -> tuple[Recommendation | None, ProfileChange | None]:
    if best is None:
        return None, None
    row, tps = best
    cur_k = current.k
    rec = Recommendation(row.method, row.k, min(req.concurrency), tps, _ratio(tps, current.tokens_per_s),
                         _ratio(tps, baseline.tokens_per_s), _ratio(tps, reference.tokens_per_s if reference else None))
    change = None
    if row.method != base.method or row.k != cur_k:
        change = ProfileChange(req.profile, SpecSetting(base.method, cur_k), SpecSetting(row.method, row.k),
                               yaml_lines(req.profile, row.method, row.k, base.drafter))
    return rec, change


def _under_load(loads: Sequence[LoadBest], low: int) -> tuple[BestAt, ...]:
    return tuple(BestAt(b.concurrency, b.method, b.k, b.tokens_per_s) for b in loads if b.concurrency != low)


def _result(sweep: _Sweep, base: Profile, settings: Sequence[tuple[Setting, Profile]], skipped: Sequence[Skipped],
            best: tuple[Measured, float] | None, restored: Restored, previous: str | None,
            load: ObservedLoad | None = None) -> TuneResult:
    req, rows = sweep.req, tuple(sweep.rows)
    low = min(req.concurrency)
    cur_k = base.num_speculative_tokens if base.method != "none" else None
    cur_row = _row_for(rows, base.method, cur_k, low)
    baseline = _baseline(_row_for(rows, "none", None, low))
    reference = Reference(base.baseline_tps) if base.baseline_tps else None
    current = Current(req.profile, base.method, cur_k, cur_row.tokens_per_s if cur_row else None)
    recommended, change = _recommend(req, base, best, current, baseline, reference)
    loads = by_concurrency(rows, req.concurrency)
    return TuneResult(
        host=req.host, profile=req.profile, settings=tuple(s.label for s, _ in settings), skipped=tuple(skipped),
        concurrency=tuple(req.concurrency), requests=req.requests,
        workload=WorkloadUsed(sweep.workload.source, len(sweep.workload.prompts), sweep.max_tokens), results=rows,
        recommended=recommended, best_under_load=_under_load(loads, low), baseline=baseline, current=current,
        profile_change=change, previous=previous, restored=restored, cancelled=sweep.cancelled,
        interrupted=sweep.interrupted, duration_s=round(time.monotonic() - sweep.started, 1), reference=reference,
        by_concurrency=loads, per_load=per_load(req.profile, base, rows, req.concurrency, recommended, load),
        cautions=_cautions(req, rows, recommended, baseline, reference))


# --- chat ---------------------------------------------------------------------------------------
