"""The evidence triage looks at: the latest launch's samples, summed into one window, plus context."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from bot.core.logparse import EngineSample, LogEvent, Origin, ParsedLog, SpecDecodeSample
from bot.core.triage.context import DeploymentContext


def position(origin: Origin | None) -> int:
    if origin is None:
        return -1
    if origin.offset is not None:
        return origin.offset
    return origin.line_no if origin.line_no is not None else -1


@dataclass
class Window:
    """SpecDecoding samples summed: rates weighted by drafts, as vLLM's counters would give them."""

    samples: list[SpecDecodeSample]
    mean: float
    per_position: list[float]
    accepted: int
    drafted: int
    num_drafts: float
    rate: float  # percent
    means: list[float] = field(default_factory=list)
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
        samples=usable, mean=mean, per_position=per_pos, accepted=accepted, drafted=drafted,
        num_drafts=drafts, rate=100.0 * accepted / drafted if drafted else math.nan,
        means=[s.mean_acceptance_length for s in usable], fragment=any(s.fragment for s in usable),
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
    means = [s.mean_acceptance_length for s in usable]
    rates = [s.avg_draft_acceptance_rate for s in usable if s.avg_draft_acceptance_rate is not None]
    return Window(samples=usable, mean=sum(means) / len(means), per_position=per_pos, accepted=0, drafted=0,
                  num_drafts=0.0, rate=sum(rates) / len(rates) if rates else math.nan, means=means,
                  counts_known=False, fragment=True)


def _drafts(s: SpecDecodeSample) -> float:
    if s.num_drafts:
        return s.num_drafts
    if s.mean_acceptance_length > 1.0:
        return s.accepted / (s.mean_acceptance_length - 1.0)
    return 0.0


@dataclass
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


@dataclass
class Evidence:
    parsed: ParsedLog
    context: DeploymentContext
    window: Window | None
    engine: EngineSummary | None
    events: list[LogEvent]
    prom_window: SpecDecodeSample | None = None
    notes: list[str] = field(default_factory=list)
    # `vllm:num_requests_running` from a /metrics scrape, when one was read (the Engine lines say it too)
    running_gauge: float | None = None

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


def gather(parsed: ParsedLog, context: DeploymentContext, prom_window: SpecDecodeSample | None = None,
           samples: int | None = None, running_gauge: float | None = None) -> Evidence:
    start = latest_launch(parsed)
    notes: list[str] = []
    spec = [s for s in parsed.samples if position(s.origin) >= start]
    if len(spec) < len(parsed.samples):
        notes.append(f"{len(parsed.samples) - len(spec)} sample(s) from an earlier launch were left out")
    if samples is not None and len(spec) > samples:
        spec = spec[-samples:]
    engine = [e for e in parsed.engine if position(e.origin) >= start]
    events = [ev for ev in parsed.events if position(ev.origin) >= start]
    k = context.num_speculative_tokens
    for s in spec:  # a fragment with counts but neither rates nor a mean: k from the context completes it
        if math.isnan(s.mean_acceptance_length) and s.counts_known and s.drafted and k:
            s.mean_acceptance_length = 1.0 + k * s.accepted / s.drafted
            s.num_drafts = s.drafted / k
            s.derived.append(f"mean from the counts (k = {k}, from {context.sources.get('num_speculative_tokens')})")
    window = summarize(spec)
    if window is not None and window.fragment:
        derived = sorted({d for s in window.samples for d in s.derived})
        notes.append("read from a fragment of the SpecDecoding line (no `SpecDecoding metrics:` prefix or fields "
                     "missing)" + (f": {'; '.join(derived)}" if derived else ""))
    if parsed.stats.skipped:  # never silently dropped: the report says how many and shows the first
        example = parsed.stats.skipped_examples[0] if parsed.stats.skipped_examples else ""
        notes.append(f"{parsed.stats.skipped} line(s) looked like metrics but could not be read (truncated, "
                     "interleaved or inconsistent)" + (f", e.g. `{example[:200]}`" if example else ""))
    if window is None and prom_window is not None and prom_window.drafted > 0:
        window = summarize([prom_window])
    return Evidence(parsed=parsed, context=context, window=window, engine=summarize_engine(engine),
                    events=events, prom_window=prom_window, notes=notes, running_gauge=running_gauge)
