"""What parsing a log yields: where a line came from (its origin and its stamp), the SpecDecoding and Engine
samples, the events, clues and problem lines, and the bounded `ParsedLog` that holds them; the year a year-less
stamp belongs to.

Plain data: `logparse.py` fills it, the triage and the use cases read it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal


@dataclass
class Stamp:
    """A log timestamp as printed (no year); `resolve_years` gives it one."""

    month: int
    day: int
    hour: int
    minute: int
    second: int
    year: int | None = None

    def as_datetime(self) -> datetime | None:
        if self.year is None:
            return None
        try:
            return datetime(self.year, self.month, self.day, self.hour, self.minute, self.second)
        except ValueError:  # 02-29 in a year that has none
            return None

    def key(self) -> tuple[int, int, int, int, int]:
        return (self.month, self.day, self.hour, self.minute, self.second)


@dataclass
class Origin:
    """Where a line came from: its number when known (None in a tail read) and its byte offset."""

    line_no: int | None
    offset: int | None = None
    text: str = ""
    proc: str | None = None
    pid: int | None = None
    level: str | None = None
    source_file: str | None = None
    source_line: int | None = None
    stamp: Stamp | None = None

    def where(self) -> str:
        if self.line_no is not None:
            return f"line {self.line_no}"
        if self.offset is not None:
            return f"byte {self.offset}"
        return "?"


@dataclass
class SpecDecodeSample:
    """One SpecDecoding interval (or a Prometheus window). Counts are for the interval."""

    form: str  # "B" (0.10.2+), "A" (0.8.5-0.10.1), "V0", "prometheus"
    mean_acceptance_length: float
    accepted: int
    drafted: int
    per_position: list[float]
    avg_draft_acceptance_rate: float | None  # percent
    accepted_tps: float | None = None
    drafted_tps: float | None = None
    num_drafts: float | None = None
    cumulative: bool = False  # V0 counters and a single scrape count since start
    origin: Origin | None = None
    counts_known: bool = True  # False for a fragment without `Accepted: N tokens, Drafted: N tokens`
    fragment: bool = False  # part of the line only (no prefix, or fields missing)
    derived: list[str] = field(default_factory=list)  # what was computed rather than read

    @property
    def num_speculative_tokens(self) -> int | None:
        return len(self.per_position) or None


@dataclass
class EngineSample:
    prompt_tps: float | None
    generation_tps: float | None
    running: int | None
    waiting: int | None
    kv_cache_usage: float | None  # percent
    kv_cache_device: str | None
    prefix_cache_hit_rate: float | None
    engine: int | None = None
    engines_aggregated: int | None = None
    extra: dict[str, float] = field(default_factory=dict)
    origin: Origin | None = None


@dataclass
class LogEvent:
    kind: str
    origin: Origin
    detail: dict[str, str] = field(default_factory=dict)


@dataclass
class ContextClue:
    """Something the log says about the deployment: version, model, arguments, a version hint."""

    # "version", "model", "args", "command" (the text after `vllm serve` on a command line a launcher printed),
    # "metrics_hint", "start", "logo_version", "compile_cache" (a graph loaded from
    # vLLM's torch.compile cache); "progress" (value: "startup" or
    # "serving"): a line that shows the server moved on — weights loaded, caches sized, graphs compiled, the
    # server up, a request answered
    kind: str
    value: object
    origin: Origin


MAX_SKIPPED_EXAMPLES = 3


@dataclass
class ParseStats:
    lines: int = 0
    parsed: int = 0
    skipped: int = 0  # looked like metrics but were truncated, interleaved or inconsistent
    undecodable: int = 0
    # the first lines counted in `skipped`, as read (clipped): a report shows what it could not read
    skipped_examples: list[str] = field(default_factory=list)

    samples_seen: int = 0  # SpecDecoding samples read, kept or not (a bounded parse keeps the last ones)
    accepted_seen: int = 0
    drafts_seen: float = 0.0
    problems_seen: int = 0  # problem lines met, kept or not (`ParsedLog.problems` keeps the first and last)

    def skip(self, text: str) -> None:
        self.skipped += 1
        if len(self.skipped_examples) < MAX_SKIPPED_EXAMPLES:
            self.skipped_examples.append(text if len(text) <= 300 else text[:300] + " …")

    def merge(self, other: ParseStats) -> None:
        self.lines += other.lines
        self.parsed += other.parsed
        self.skipped += other.skipped
        self.undecodable += other.undecodable
        room = MAX_SKIPPED_EXAMPLES - len(self.skipped_examples)
        if room > 0:
            self.skipped_examples.extend(other.skipped_examples[:room])
        self.samples_seen += other.samples_seen
        self.accepted_seen += other.accepted_seen
        self.drafts_seen += other.drafts_seen
        self.problems_seen += other.problems_seen


MAX_EVENTS = 2000
PROBLEMS_FIRST = 20  # a crash's first lines say what started it ...
PROBLEMS_LAST = 80  # ... and its last ones how it ended: the middle of a long log of warnings is dropped
MAX_LOOSE = 40

ProblemKind = Literal["level", "exception", "frame", "loose"]


@dataclass
class ProblemLine:
    """A line that says something went wrong, whether or not anything explains it: a WARNING/ERROR/CRITICAL
    record, an exception (`torch.OutOfMemoryError: ...`) or a traceback frame.

    `traceback_id` ties the frames of one traceback to the exception that ends it (the position of its
    `Traceback (most recent call last):` line, or of its first frame); `explained_by` is the failure-table
    signature the same line matched, if any."""

    kind: ProblemKind
    origin: Origin
    message: str  # without vLLM's prefix; for an exception the text after `Class: `
    exception: str | None = None  # the class, module dropped: "OutOfMemoryError" for `torch.OutOfMemoryError: …`
    frame_file: str | None = None
    frame_line: int | None = None
    frame_function: str | None = None
    explained_by: str | None = None
    traceback_id: int | None = None
    config_field: str | None = None  # a pydantic error's `Class.field` ("CacheConfig.gpu_memory_utilization")
    source: str | None = None  # a frame's code line, as the traceback printed it under the frame
    # a frame of a stack dump (bot.core.dump_lines): "fatal", "timeout" or "snapshot" — where a thread was, not where
    # it raised; "" for a traceback's frame
    dump: str = ""
    # an exception message whose lines were joined: the same lines joined with no space, as a terminal's hard wrap
    # inside a word needs (`… leading to a corr` + `upted compilation artifact`)
    tight: str | None = None


def bound_problems(items: list[ProblemLine]) -> None:
    if len(items) > PROBLEMS_FIRST + PROBLEMS_LAST:
        del items[PROBLEMS_FIRST:len(items) - PROBLEMS_LAST]


@dataclass
class ParsedLog:
    samples: list[SpecDecodeSample] = field(default_factory=list)
    engine: list[EngineSample] = field(default_factory=list)
    events: list[LogEvent] = field(default_factory=list)
    clues: list[ContextClue] = field(default_factory=list)
    stats: ParseStats = field(default_factory=ParseStats)
    # lines that say something went wrong (first PROBLEMS_FIRST and last PROBLEMS_LAST), explained or not
    problems: list[ProblemLine] = field(default_factory=list)
    # the first lines that carry no needle at all (a pasted message without vLLM's prefix): the atlas may
    # still know them; bounded, so a big log pays nothing for them
    loose: list[ProblemLine] = field(default_factory=list)
    # tracebacks Python printed under `Exception ignored in: …` (its unraisable hook): never raised to the program
    ignored: set[int] = field(default_factory=set)

    def extend(self, other: ParsedLog, keep: int | None = None) -> None:
        self.samples.extend(other.samples)
        self.engine.extend(other.engine)
        self.events.extend(other.events)
        self.clues.extend(other.clues)
        self.problems.extend(other.problems)
        self.loose.extend(other.loose[:max(0, MAX_LOOSE - len(self.loose))])
        self.ignored |= other.ignored
        bound_problems(self.problems)
        self.stats.merge(other.stats)
        if keep is not None:
            self.trim(keep)

    def trim(self, keep: int) -> None:
        """Keep the last `keep` samples and Engine lines, and at most MAX_EVENTS events and clues (first and last
        half): memory stays flat in the number of lines, whatever the log holds."""
        if len(self.samples) > keep:
            del self.samples[:len(self.samples) - keep]
        if len(self.engine) > keep:
            del self.engine[:len(self.engine) - keep]
        for items in (self.events, self.clues):
            if len(items) > MAX_EVENTS:
                del items[MAX_EVENTS // 2:len(items) - MAX_EVENTS // 2]
        bound_problems(self.problems)


# --- years -------------------------------------------------------------------------------------

def resolve_years(stamps: Iterable[Stamp], reference: datetime) -> None:
    """Give year-less stamps (in log order) a year: the last one is not after `reference`.

    vLLM prints `%m-%d %H:%M:%S`; going forward, a month that jumps back by more than half a year
    is the new-year wrap.
    """
    ordered = list(stamps)
    if not ordered:
        return
    wraps = 0
    relative: list[int] = []
    prev = ordered[0].key()
    for st in ordered:
        key = st.key()
        if key[0] < prev[0] - 6:
            wraps += 1
        relative.append(wraps)
        prev = key
    last = ordered[-1]
    last_year = reference.year
    if (last.month, last.day) > (reference.month, reference.day + 1):
        last_year -= 1  # a stamp after the reference day belongs to the year before
    base = last_year - relative[-1]
    for st, rel in zip(ordered, relative, strict=True):
        st.year = base + rel


def stamped_origins(parsed: ParsedLog) -> list[Origin]:
    origins: list[Origin] = []
    for s in parsed.samples:
        if s.origin is not None:
            origins.append(s.origin)
    for e in parsed.engine:
        if e.origin is not None:
            origins.append(e.origin)
    origins.extend(ev.origin for ev in parsed.events)
    origins.extend(c.origin for c in parsed.clues)
    unique = {id(o): o for o in origins if o.stamp is not None}
    return sorted(unique.values(), key=lambda o: (o.offset if o.offset is not None else -1,
                                                   o.line_no if o.line_no is not None else -1))


def resolve_log_years(parsed: ParsedLog, reference: datetime) -> None:
    resolve_years([o.stamp for o in stamped_origins(parsed) if o.stamp is not None], reference)
