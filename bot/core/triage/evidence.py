"""What a diagnosis reads (Readings: the parsed log, the /metrics window, the flags) and the evidence triage
looks at: the latest launch's samples, summed into one window, plus context. Both frozen: every detector
weighs the same evidence, and the parsed log stays what the log said."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from bot.core.parsed_log import EngineSample, LogEvent, Origin, ParsedLog, SpecDecodeSample
from bot.core.triage.context import DeploymentContext, Flags


@dataclass(frozen=True)
class Readings:
    """Everything a diagnosis reads, as the app read it from files, hosts or Prometheus."""

    parsed: ParsedLog = field(default_factory=ParsedLog)  # the log (empty when only /metrics was read)
    flags: Flags = field(default_factory=Flags)  # what the user, a profile or the host says
    prom: SpecDecodeSample | None = None  # the /metrics window, or its counters since the server started
    running: float | None = None  # `vllm:num_requests_running` at the last scrape
    notes: tuple[str, ...] = ()  # what reading noted (how much of the log, which scrapes)
    samples: int | None = None  # weigh only the latest this many SpecDecoding samples
    source: str = ""  # what was read, as the report names it
    # where the counters were read: "scrape" (the server's /metrics), "prometheus" (a query), "" (nowhere)
    metrics_from: str = ""


def position(origin: Origin | None) -> int:
    if origin is None:
        return -1
    if origin.offset is not None:
        return origin.offset
    return origin.line_no if origin.line_no is not None else -1


@dataclass(frozen=True)
class Window:
    """SpecDecoding samples summed: rates weighted by drafts, as vLLM's counters would give them."""

    samples: tuple[SpecDecodeSample, ...]
    mean: float
    per_position: list[float]
    accepted: int
    drafted: int
    num_drafts: float
    rate: float  # percent
    means: tuple[float, ...] = ()
    counts_known: bool = True  # False when fragments gave rates but no Accepted/Drafted counts
    fragment: bool = False

    @property
    def k(self) -> int:
        return len(self.per_position)


def summarize(samples: list[SpecDecodeSample]) -> Window | None:
    usable = [s for s in samples if not s.cumulative and s.drafted > 0]
    if not usable:
        usable = [s for s in samples if s.drafted > 0][-1:]  # V0 counters are cumulative: the last one
    if not usable:
        return _summarize_fragments(samples)
    if not usable:
        return None
    ks = [len(s.per_position) for s in usable]
    k = max(set(ks), key=ks.count)
    same_k = [s for s in usable if len(s.per_position) == k]
    accepted = sum(s.accepted for s in usable)
    drafted = sum(s.drafted for s in usable)
    drafts = sum(_drafts(s) for s in usable)
    if k and same_k:
        d_same = sum(_drafts(s) for s in same_k)
        per_pos = [
            sum(s.per_position[i] * _drafts(s) for s in same_k if not math.isnan(s.per_position[i])) / d_same
            if d_same else 0.0
            for i in range(k)
        ]
    else:
        per_pos = []
    mean = 1.0 + accepted / drafts if drafts else math.nan
    return Window(
        samples=tuple(usable), mean=mean, per_position=per_pos, accepted=accepted, drafted=drafted,
        num_drafts=drafts, rate=100.0 * accepted / drafted if drafted else math.nan,
        means=tuple(s.mean_acceptance_length for s in usable), fragment=any(s.fragment for s in usable),
    )


def _summarize_fragments(samples: list[SpecDecodeSample]) -> Window | None:
    """Fragments without counts: each interval weighs the same."""
    usable = [s for s in samples if not s.counts_known and not math.isnan(s.mean_acceptance_length)]
    if not usable:
        return None
    ks = [len(s.per_position) for s in usable]
    k = max(set(ks), key=ks.count)
    same_k = [s for s in usable if len(s.per_position) == k]
    per_pos = [sum(s.per_position[i] for s in same_k) / len(same_k) for i in range(k)] if k else []
    means = tuple(s.mean_acceptance_length for s in usable)
    rates = [s.avg_draft_acceptance_rate for s in usable if s.avg_draft_acceptance_rate is not None]
    return Window(samples=tuple(usable), mean=sum(means) / len(means), per_position=per_pos, accepted=0, drafted=0,
                  num_drafts=0.0, rate=sum(rates) / len(rates) if rates else math.nan, means=means,
                  counts_known=False, fragment=True)


def _drafts(s: SpecDecodeSample) -> float:
    if s.num_drafts:
        return s.num_drafts
    if s.mean_acceptance_length > 1.0:
        return s.accepted / (s.mean_acceptance_length - 1.0)
    return 0.0


@dataclass(frozen=True)
class EngineSummary:
    samples: int
    generation_tps: float | None  # mean over intervals with work
    single_request_tps: float | None  # mean over intervals with exactly one request running
    max_running: int
    max_waiting: int
    max_kv: float | None
    kv_at_max: EngineSample | None
    typical_running: float | None = None  # median of `Running: N reqs` over the intervals with work


def summarize_engine(engine: list[EngineSample]) -> EngineSummary | None:
    if not engine:
        return None
    busy = [e for e in engine if (e.running or 0) > 0 and e.generation_tps is not None]
    single = [e for e in busy if e.running == 1]
    kvs = [e for e in engine if e.kv_cache_usage is not None]
    top = max(kvs, key=lambda e: e.kv_cache_usage or 0.0) if kvs else None
    running = sorted(float(e.running or 0) for e in busy)
    return EngineSummary(
        samples=len(engine),
        generation_tps=(sum(e.generation_tps or 0.0 for e in busy) / len(busy)) if busy else None,
        single_request_tps=(sum(e.generation_tps or 0.0 for e in single) / len(single)) if single else None,
        max_running=max((e.running or 0) for e in engine),
        max_waiting=max((e.waiting or 0) for e in engine),
        max_kv=top.kv_cache_usage if top else None,
        kv_at_max=top,
        typical_running=running[len(running) // 2] if running else None,
    )


@dataclass(frozen=True)
class Evidence:
    parsed: ParsedLog
    context: DeploymentContext
    window: Window | None
    engine: EngineSummary | None
    events: tuple[LogEvent, ...]
    prom_window: SpecDecodeSample | None = None
    notes: tuple[str, ...] = ()
    # `vllm:num_requests_running` from a /metrics scrape, when one was read (the Engine lines say it too)
    running_gauge: float | None = None
    source: str = ""  # what was read, as the report names it
    metrics_from: str = ""  # "scrape", "prometheus" or "": as Readings says

    def loads(self) -> tuple[list[float], str]:
        """How many requests run at once (typical, then peak), and where that was read; [] if nowhere."""
        e = self.engine
        if e is not None and e.typical_running is not None:
            out = [e.typical_running] + ([float(e.max_running)] if e.max_running > e.typical_running else [])
            return out, f"Engine lines: {e.typical_running:g} running (median), up to {e.max_running}"
        if self.running_gauge is not None and self.running_gauge > 0:
            return [self.running_gauge], f"/metrics: vllm:num_requests_running {self.running_gauge:g}"
        return [], ""


def latest_launch(parsed: ParsedLog) -> int:
    """Position of the newest launch marker (args or start line), or -1: earlier samples are another run."""
    marks = [position(c.origin) for c in parsed.clues if c.kind in ("args", "start")]
    return max(marks) if marks else -1


def gather(readings: Readings, context: DeploymentContext) -> Evidence:
    parsed, prom = readings.parsed, readings.prom
    start = latest_launch(parsed)
    notes = list(readings.notes)
    spec = [s for s in parsed.samples if position(s.origin) >= start]
    if len(spec) < len(parsed.samples):
        notes.append(f"{len(parsed.samples) - len(spec)} sample(s) from an earlier launch were left out")
    if readings.samples is not None and len(spec) > readings.samples:
        spec = spec[-readings.samples:]
    window = summarize([_completed(s, context) for s in spec])
    if window is not None and window.fragment:
        notes.append(_fragment_note(window))
    if parsed.stats.skipped:  # never silently dropped: the report says how many and shows the first
        notes.append(_skipped_note(parsed))
    if window is None and prom is not None and prom.drafted > 0:
        window = summarize([prom])
    elif window is not None and prom is not None:  # both measured: the report shows where they differ
        notes.append(f"/metrics gives mean acceptance length {prom.mean_acceptance_length:.2f} over its window; "
                     f"the log's last {len(window.samples)} sample(s) give {window.mean:.2f}")
    engine = [e for e in parsed.engine if position(e.origin) >= start]
    events = tuple(ev for ev in parsed.events if position(ev.origin) >= start)
    return Evidence(parsed=parsed, context=context, window=window, engine=summarize_engine(engine),
                    events=events, prom_window=prom, notes=tuple(notes), running_gauge=readings.running,
                    source=readings.source, metrics_from=readings.metrics_from)


def _completed(s: SpecDecodeSample, context: DeploymentContext) -> SpecDecodeSample:
    """A fragment with counts but neither rates nor a mean, completed with k from the context — as a copy, since
    the parsed log is the caller's and may be diagnosed again."""
    k = context.num_speculative_tokens
    if not (math.isnan(s.mean_acceptance_length) and s.counts_known and s.drafted and k):
        return s
    how = f"mean from the counts (k = {k}, from {context.sources.get('num_speculative_tokens')})"
    return replace(s, mean_acceptance_length=1.0 + k * s.accepted / s.drafted, num_drafts=s.drafted / k,
                   derived=[*s.derived, how])


def _fragment_note(window: Window) -> str:
    derived = sorted({d for s in window.samples for d in s.derived})
    return ("read from a fragment of the SpecDecoding line (no `SpecDecoding metrics:` prefix or fields missing)"
            + (f": {'; '.join(derived)}" if derived else ""))


def _skipped_note(parsed: ParsedLog) -> str:
    example = parsed.stats.skipped_examples[0] if parsed.stats.skipped_examples else ""
    return (f"{parsed.stats.skipped} line(s) looked like metrics but could not be read (truncated, interleaved or "
            "inconsistent)" + (f", e.g. `{example[:200]}`" if example else ""))
