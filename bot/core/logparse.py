"""vLLM log lines and Prometheus text -> typed samples and events.

Pure functions over text: no file or network I/O (that lives in `logfile.py`), so the same code
parses a local file, a remote tail and a test fixture. Every form here is documented in
shared/reference/vllm-logs.md; the parser never raises on input and counts what it skips.
"""

from __future__ import annotations

import ast
import itertools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from bot.core import vllm_metrics as M
from bot.core.failures import FailureTable, default_table
from bot.core.specline import SPEC_HEADERS as SPEC_HEADERS
from bot.core.specline import SPEC_KEYS as SPEC_KEYS
from bot.core.specline import TOKEN_RATE_RE, looks_like_spec, spec_fields
from bot.core.specline import metric_pairs as metric_pairs

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# vLLM's own prefix: optional process tag, level, month-day time (no year), [file:line].
PREFIX_RE = re.compile(
    r"(?:\((?P<proc>[\w.-]+(?: rank=\d+)?) pid=(?P<pid>\d+)\) )?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d) "
    # `[file.py:123] ` since 0.7; `file.py:123] ` (no opening bracket) in 0.6 and before
    r"(?:\[(?P<file>[^\]:]+)|(?P<file_old>[\w./-]+\.py)):(?P<line>\d+)\] "
)
# vLLM 0.9–0.10 name a worker with its rank: `(VllmWorker rank=1 pid=3467046)`
TAG_RE = re.compile(r"\((?P<proc>[\w.-]+(?: rank=\d+)?) pid=(?P<pid>\d+)\) ")

_NUM = r"(?:\d+(?:\.\d+)?|nan|inf)"
_RATES = r"(?:(?:\d+\.\d+|nan)(?:, (?:\d+\.\d+|nan))*)?"

ENGINE_RE = re.compile(
    r"(?:Engine (?P<engine>\d{3}): |(?P<n_engines>\d+) Engines Aggregated: |(?=Avg prompt throughput: ))"
    r"(?P<body>Avg prompt throughput: .*)$"
)
_ENGINE_PART_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z ]*?): (?P<val>-?[\d.]+|nan)(?P<unit> tokens/s| reqs|%)?$")

VERSION_RES = (
    re.compile(r"vLLM server version (?P<v>[\w.+-]+), serving model (?P<model>\S+)"),
    re.compile(r"Initializing a V\d LLM engine \(v(?P<v>[\w.+-]+)\)"),
    re.compile(r"vLLM API server version (?P<v>[\w.+-]+)"),
)
LOGO_VERSION_RE = re.compile(r"\bversion (?P<v>\d+\.\d+\.\d+[\w.+-]*)\s*$")
LOGO_MODEL_RE = re.compile(r"\bmodel\s+(?P<model>\S+)\s*$")
SPEC_CONFIG_RE = re.compile(
    r"SpeculativeConfig\(method='(?P<method>[\w-]+)', model=(?:'(?P<model>[^']*)'|None), num_spec_tokens=(?P<k>\d+)\)"
)
ARGS_RE = re.compile(r"non-default args: (?P<args>\{.*\})\s*$")
START_RE = re.compile(r"Starting vLLM (?:API )?server")
# lines vLLM (and uvicorn) print as startup goes on, and once it serves: what a warning before them was followed by
STARTUP_PROGRESS_RE = re.compile(
    r"Loading weights took|Model loading took|Available KV cache memory|GPU KV cache size|# GPU blocks|"
    r"Maximum concurrency for|Graph capturing finished|init engine \(profile, create kv cache|"
    r"Compiling a graph for|torch\.compile takes|Dynamo bytecode transform time|Platform plugin \w+ is activated|"
    r"Loading safetensors checkpoint shards: 100%|Capturing CUDA graphs?.*100%|Started server process|"
    r"Waiting for application startup|Uvicorn running on|Supported_tasks|Starting vLLM (?:API )?server|"
    r"Started engine process|Automatically detected platform|Initializing an? (?:V\d )?LLM engine|"
    r"Starting to load model|Loading model weights took|Using \w+ backend|This model supports multiple tasks")
# vLLM's torch.compile backend reusing what an earlier start compiled (0.7.3– `Directly load the compiled graph(s)
# for … from the cache`; its needle, "compiled graph", holds an anchor the scanner has already: 0.6.6's wording,
# `Directly lookup the graph …`, is not read)
COMPILE_CACHE_LOAD_RE = re.compile(r"Directly load the compiled graph.{0,120}? from the cache")
# (the engine taking a request in — `Added request chatcmpl-…`, as vLLM's engine logs it — is serving too)
SERVING_PROGRESS_RE = re.compile(r"Application startup complete|\"(?:POST|GET) /v1/[^\"]*\" 200\b|"
                                 r"Avg generation throughput: (?!0\.0 tokens)|\bAdded request [\w.-]{6,}")


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

    # "version", "model", "args", "metrics_hint", "start", "logo_version", "compile_cache" (a graph loaded from
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
    # an exception message whose lines were joined: the same lines joined with no space, as a terminal's hard wrap
    # inside a word needs (`… leading to a corr` + `upted compilation artifact`)
    tight: str | None = None


def bound_problems(items: list[ProblemLine]) -> None:
    if len(items) > PROBLEMS_FIRST + PROBLEMS_LAST:
        del items[PROBLEMS_FIRST:len(items) - PROBLEMS_LAST]


def innermost_vllm_frame(problems: list[ProblemLine], traceback_id: int) -> ProblemLine | None:
    """The last frame of that traceback inside vLLM's own package: where vLLM itself failed."""
    frames = [p for p in problems if p.kind == "frame" and p.traceback_id == traceback_id and p.frame_file]
    inside = [p for p in frames if "vllm/" in (p.frame_file or "").replace("\\", "/")]
    return inside[-1] if inside else None


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

    def extend(self, other: ParsedLog, keep: int | None = None) -> None:
        self.samples.extend(other.samples)
        self.engine.extend(other.engine)
        self.events.extend(other.events)
        self.clues.extend(other.clues)
        self.problems.extend(other.problems)
        self.loose.extend(other.loose[:max(0, MAX_LOOSE - len(self.loose))])
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


def strip_ansi(text: str) -> str:
    return ANSI_RE.sub("", text) if "\x1b" in text else text


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _consistent(mean: float, per_position: list[float]) -> bool:
    """vLLM's identity `mean - 1 == sum(per-position)`, within the rounding of %.2f and %.3f."""
    if not per_position or math.isnan(mean):
        return True
    total = sum(0.0 if math.isnan(x) else x for x in per_position)
    tolerance = 0.006 + 0.0006 * len(per_position)
    if any(b > a + 1e-9 for a, b in itertools.pairwise(per_position)):
        return False  # rates never increase with position: this line was cut or interleaved
    return abs((mean - 1.0) - total) <= tolerance or abs(mean - total) <= tolerance


def _drafts(mean: float, accepted: int, drafted: int, k: int) -> float | None:
    """How many drafts the interval had. `drafted / k` only when every draft has k tokens: ngram drafts
    fewer when the prompt has no match (seen on vLLM 0.32: Drafted 40 tokens at k = 3, mean 3.50), so
    derive it from vLLM's own identity mean = 1 + accepted / drafts whenever something was accepted."""
    if accepted > 0 and not math.isnan(mean) and mean > 1.0:
        return max(1.0, float(round(accepted / (mean - 1.0))))
    return (drafted / k) if k else None


def parse_spec_message(msg: str, origin: Origin | None = None, k_hint: int | None = None,
                       fields: dict[str, str] | None = None) -> SpecDecodeSample | None:
    """A SpecDecoding line of any release (Form A/B, V0 `Speculative metrics`) or any fragment of one.

    What is missing is derived from vLLM's identities: mean = 1 + sum(per-position rates) and
    mean = 1 + accepted / drafts with drafts = drafted / k when every draft holds k tokens."""
    f = dict(fields) if fields is not None else spec_fields(msg)
    if "ex_acc" in f and "ex_dr" in f and "acc" not in f:
        f["acc"], f["dr"] = f["ex_acc"], f["ex_dr"]
    whole = "SpecDecoding metrics" in msg or "Speculative metrics" in msg
    if "acc_v0" in f or "k" in f:  # the V0 layout: cumulative counters, the rate as a fraction
        return _v0_sample(f, origin, k_hint, whole)
    return _interval_sample(f, origin, k_hint, whole)


def _v0_sample(f: dict[str, str], origin: Origin | None, k_hint: int | None, whole: bool) -> SpecDecodeSample | None:
    """V0's `Speculative metrics`: counters since the start (a cumulative sample), the rate a fraction unless `%`."""
    k = int(_float(f.get("k", "0")) or 0) or (k_hint or 0)
    acc, dr = int(_float(f.get("acc_v0", "0"))), int(_float(f.get("dr_v0", "0")))
    drafts = dr / k if k else 0.0
    mean = 1.0 + acc / drafts if drafts else math.nan
    rate = _float(f["rate"]) if "rate" in f else (100.0 * acc / dr if dr else math.nan)
    if "rate" in f and "rate_pct" not in f:
        rate *= 100.0
    # the order matters: a counter that reads as nan raises in `int()` above even when its pair is missing
    if not ("acc_v0" in f and "dr_v0" in f):
        return None
    return SpecDecodeSample(form="V0", mean_acceptance_length=mean, accepted=acc, drafted=dr, per_position=[],
                            avg_draft_acceptance_rate=rate, num_drafts=drafts or None, cumulative=True,
                            origin=origin, fragment=not whole)


def _interval_sample(f: dict[str, str], origin: Origin | None, k_hint: int | None,
                     whole: bool) -> SpecDecodeSample | None:
    """Form A/B (0.8.5+) or a fragment of it: the counts are the interval's."""
    # Form A printed `Draft acceptance rate`, Form B `Avg Draft acceptance rate`
    form = "A" if ("rate" in f and "avg_rate" not in f) else "B"
    read = _rates_and_mean(f, form)
    if read is None:
        return None
    pp, mean = read
    counts = (int(_float(f["acc"])), int(_float(f["dr"]))) if "acc" in f and "dr" in f else None
    acc, dr = counts or (0, 0)
    k = len(pp) or k_hint or 0
    rate = _rate(f, acc, dr)
    derived: list[str] = []
    if math.isnan(mean):
        mean = _derived_mean(pp, k, acc, dr, rate, derived)
    checked = _checked_mean(mean, form, pp, counts)
    if checked is None:
        return None
    num_drafts, mean = _num_drafts(f, checked, acc, dr, k, counts is not None)
    return SpecDecodeSample(
        form=form, mean_acceptance_length=mean, accepted=acc, drafted=dr, per_position=pp,
        avg_draft_acceptance_rate=rate, accepted_tps=_float(f["atps"]) if "atps" in f else None,
        drafted_tps=_float(f["dtps"]) if "dtps" in f else None, num_drafts=num_drafts, origin=origin,
        counts_known=counts is not None, derived=derived,
        fragment=not whole or not ("mean" in f and counts is not None and bool(pp)),
    )


def _rates_and_mean(f: dict[str, str], form: str) -> tuple[list[float], float] | None:
    """The per-position rates and the printed mean (nan if none), or None if this is no interval of vLLM's."""
    pp = _rates_loose(f["pp"]) if "pp" in f else []
    if not (pp or _says_anything(f)) or not _plausible_rates(pp):
        return None
    if "mean" not in f:
        return pp, math.nan
    mean = _float(f["mean"])
    if pp and not _consistent(mean, pp):
        return None
    if form == "A" and pp and abs(mean - sum(pp)) < abs(mean - 1.0 - sum(pp)):
        mean += 1.0  # 0.8.5 printed accepted/drafts without the bonus token
    return pp, mean


def _says_anything(f: dict[str, str]) -> bool:
    """A field an interval can be read from, besides the per-position rates."""
    return "mean" in f or ("acc" in f and "dr" in f) or "avg_rate" in f or "rate" in f


def _plausible_rates(pp: list[float]) -> bool:
    known = [x for x in pp if not math.isnan(x)]
    if any(x > 1.0 + 1e-9 or x < 0.0 for x in known):
        return False  # a rate is a fraction of drafts: this is not vLLM's line
    return not any(b > a + 1e-9 for a, b in itertools.pairwise(known))  # rates never rise: cut or interleaved


def _rate(f: dict[str, str], acc: int, dr: int) -> float | None:
    """The acceptance rate in percent: as printed (Form B's average first), else from the counts."""
    text = f.get("avg_rate", f.get("rate"))
    if text is not None:
        return _float(text)
    return 100.0 * acc / dr if dr else None


def _derived_mean(pp: list[float], k: int, acc: int, dr: int, rate: float | None, derived: list[str]) -> float:
    """The mean a line did not print, from what it did; `derived` gets how, for the report."""
    if k and dr:
        derived.append(f"mean from the counts (1 + k·accepted/drafted, k = {k})")
        return 1.0 + k * acc / dr
    if pp:
        derived.append("mean from the per-position rates (1 + their sum)")
        return 1.0 + sum(0.0 if math.isnan(x) else x for x in pp)
    if rate is not None and not math.isnan(rate) and k:
        derived.append(f"mean from the acceptance rate (k = {k})")
        return 1.0 + k * rate / 100.0
    return math.nan


def _checked_mean(mean: float, form: str, pp: list[float], counts: tuple[int, int] | None) -> float | None:
    """The mean to report, or None when it shows the line is not vLLM's or leaves nothing to judge."""
    if form == "B" and mean < 1.0:  # (nan is not below 1: a mean still unknown goes on)
        return None  # 1 + accepted / drafts is never below 1: not vLLM's number
    if not math.isnan(mean):
        return mean
    if counts is not None and counts[1] > 0 and counts[0] == 0:
        return 1.0  # nothing accepted: 1.00 whatever k is
    if not pp and counts is None:
        return None  # a rate alone, without k: nothing to judge
    return mean


def _num_drafts(f: dict[str, str], mean: float, acc: int, dr: int, k: int,
                counts_known: bool) -> tuple[float | None, float]:
    """The interval's drafts, and the mean they give when it is still unknown: as printed (the offline
    example's `num_drafts`) over what `_drafts` derives."""
    derived = _drafts(mean, acc, dr, k) if counts_known else None
    if "ex_drafts" in f and (printed := _float(f["ex_drafts"])) > 0:
        return printed, (1.0 + acc / printed if math.isnan(mean) else mean)
    return derived, mean


def _rates_loose(text: str) -> list[float]:
    return [_float(x.strip()) for x in re.split(r"[,/]", text) if x.strip()]


def parse_engine_message(msg: str, origin: Origin | None = None) -> EngineSample | None:
    m = ENGINE_RE.search(msg)
    if not m:
        return None
    values: dict[str, float] = {}
    kv_device: str | None = None
    for part in m["body"].rstrip(". ").split(", "):
        pm = _ENGINE_PART_RE.match(part.strip())
        if not pm:
            continue  # e.g. 0.33's "KV fetch: ..." part: keep what we know
        key = pm["key"]
        if key.endswith("KV cache usage") and key != "KV cache usage":
            device = key.split()[0]
            if kv_device is None:  # V0 prints GPU then CPU: the first one is the accelerator
                kv_device = device
                key = "KV cache usage"
        values[key] = _float(pm["val"])
    if "Avg prompt throughput" not in values:
        return None

    def intval(name: str) -> int | None:
        v = values.pop(name, None)
        return None if v is None or math.isnan(v) else int(v)

    sample = EngineSample(
        prompt_tps=values.pop("Avg prompt throughput", None),
        generation_tps=values.pop("Avg generation throughput", None),
        running=intval("Running"),
        waiting=intval("Waiting") if "Waiting" in values else intval("Pending"),  # V0 said "Pending"
        kv_cache_usage=values.pop("KV cache usage", None),
        kv_cache_device=kv_device,
        prefix_cache_hit_rate=values.pop("Prefix cache hit rate", None),
        engine=int(m["engine"]) if m["engine"] else None,
        engines_aggregated=int(m["n_engines"]) if m["n_engines"] else None,
        origin=origin,
    )
    sample.extra = values
    return sample


def split_prefix(line: str) -> tuple[Origin, str]:
    """Separate vLLM's prefix (tag, level, time, [file:line]) from the message."""
    origin = Origin(line_no=None, text=line)
    m = PREFIX_RE.search(line)
    if m:
        origin.level = m["level"]
        origin.source_file = m["file"] or m["file_old"]
        origin.source_line = int(m["line"])
        ts = m["ts"]
        origin.stamp = Stamp(int(ts[0:2]), int(ts[3:5]), int(ts[6:8]), int(ts[9:11]), int(ts[12:14]))
        if m["proc"]:
            origin.proc, origin.pid = m["proc"], int(m["pid"])
        return origin, line[m.end():]
    t = TAG_RE.match(line)
    if t:
        origin.proc, origin.pid = t["proc"], int(t["pid"])
        return origin, line[t.end():]
    return origin, line


def _parse_args_literal(text: str) -> dict[str, object] | None:
    try:
        value = ast.literal_eval(text)  # a Python dict repr; literal_eval runs no code
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# Prefixes that journald, docker, containerd/CRI and kubectl put before vLLM's own.
OUTER_PREFIX_RE = re.compile(
    r"^(?:"
    r"\[pod/[^\]]+\]\s*"  # kubectl logs --prefix
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+(?:(?:stdout|stderr)\s+[FP]\s+)?"
    r"|[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+\S+\s+[\w@./-]+(?:\[\d+\])?:\s"  # journald / syslog
    r"|[\w.-]+\s+\|\s"  # docker compose `service  | `
    r"|\[(?:default)?rank\d+\]:\s?"  # torch.distributed's per-rank stderr prefix (`[rank0]: Traceback …`)
    # the tail of vLLM's own prefix when a paste cut its head (` [multiproc_executor.py:852]   File "…"`): the
    # traceback under it is still one
    r"|\s{0,4}\[[\w.-]+\.py:\d+\]\s(?=\s*File \"|Traceback |\s{2,}\S|[A-Za-z_][\w.]*(?:Error|Exception|Exit)\b)"
    r")+"
)
# what makes a line worth parsing at all, besides the failure table's needles (lower-case)
# pydantic's `N validation error(s) for XConfig`: the lines under it say what failed — a field's name, then its
# error (`  Value error, <vLLM's message> [type=value_error, …]`); the scanner hands the parser the next lines
PYDANTIC_NEEDLE = "validation error"
PYDANTIC_LINES = 2
MAX_LOOSE = 40
_CARETS = frozenset("^~ ")
_PYDANTIC_DETAIL_RE = re.compile(r"^\s*(?:(?P<kind>Value|Assertion) error, )?(?P<msg>.*?) \[type=(?P<type>\w+)")
_PYDANTIC_HEAD_RE = re.compile(r"^\d+ validation errors? for (?P<cls>\w+)")
_FIELD_LINE_RE = re.compile(r"^(?P<field>[a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*)$")
PARSE_NEEDLES: tuple[str, ...] = (
    "metrics: ", "avg prompt throughput", "mean acceptance length", "per-position acceptance",
    "draft acceptance rate", "accepted throughput", "number of accepted tokens", "version", "non-default args",
    "starting vllm", "serving model", "model ", "llm engine (v", "speculativeconfig(", "accepted: ",
    "acceptance", "num_accepted_tokens", "system efficiency", "compiled graph",
)
# what makes a line a problem line (lower-case): a level, an exception, a traceback and its frames
PROBLEM_NEEDLES: tuple[str, ...] = ("warning", "error", "critical", "exception", "traceback", 'file "', "vllm/",
                                    PYDANTIC_NEEDLE)
PARSE_NEEDLES = (*PARSE_NEEDLES, *PROBLEM_NEEDLES)
# the same words as vLLM and Python print them: the casings a case-sensitive first pass must look for
PARSE_CASINGS: tuple[str, ...] = (
    "SpecDecoding metrics: ", "Speculative metrics: ", "Avg prompt throughput", "Mean acceptance length",
    "Per-position acceptance", "Draft acceptance rate", "Accepted throughput", "Number of accepted tokens",
    "vLLM server version", "version", "non-default args", "Starting vLLM", "serving model", "model ",
    "LLM engine (v", "SpeculativeConfig(", "Accepted: ", "acceptance", "num_accepted_tokens", "System efficiency",
    "WARNING", "Warning", "warning", "ERROR", "Error", "error", "CRITICAL", "critical", "Exception", "exception",
    "Traceback", "traceback", 'File "', 'file "', "vllm/", "compiled graph",
)
PROBLEM_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL"})
_TRACEBACK_HEAD = "Traceback (most recent call last)"
# a frame, also one whose head a paste or an excerpt cut (`/lib/python3.11/…/vllm/config.py", line 1062, in f`)
_FRAME_RE = re.compile(r'^\s*(?:File "|(?=[\w./-]*\.py", line ))(?P<file>[^"]+)", line (?P<line>\d+)'
                       r'(?:, in (?P<func>\S+))?')
# the condensed form some tools and people paste: `vllm/v1/worker/gpu_model_runner.py:301 get_output`
_FRAME_SHORT_RE = re.compile(
    r"^\s*(?P<file>(?:[\w.-]+/)+[\w.-]+\.py):(?P<line>\d+)(?:\s+(?:in\s+)?(?P<func>[\w.<>]+))?\s*$")
# IPython's (Jupyter's) frames: `File ~/venv/lib/python3.11/site-packages/vllm/lora/x.py:160, in Cls.f(self, y)`
_FRAME_IPY_RE = re.compile(r"^\s*File (?P<file>[~/.\w-][^:\s]{0,400}\.py):(?P<line>\d+), in (?P<func>[\w.<>]+)")
_EXCEPTION_RE = re.compile(
    r"^(?P<cls>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning)"
    # torch.compile's own exceptions, named without the suffix (`torch._dynamo.exc.BackendCompilerFailed`)
    r"|torch\._(?:dynamo|inductor)\.exc\.[A-Z]\w*)(?::\s*(?P<msg>.*))?$"
    # an exception's repr, as a worker logs what it caught: ValueError("type fp8e4nv not supported …")
    r"|^(?P<rcls>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception))\((?P<q>[\"'])(?P<rmsg>.*)(?P=q)\)$")
# pytest's report of a failure: the exception under an `E` gutter (`E       AssertionError: …`), then where it was
# raised (`vllm/v1/core/sched/scheduler.py:558: AssertionError`); outer frames end `path.py:N: in func`
_PYTEST_E_RE = re.compile(r"^E {2,}(?=\S)")
_PYTEST_WHERE_RE = re.compile(r"^(?P<file>[^\s:\"]+\.py):(?P<line>\d+): (?:in (?P<func>[\w.<>]+)|"
                              r"(?P<cls>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)))$")
# Python's `warnings` print `file.py:N: SomeWarning: message` and, when the message spans lines, its rest below
# (`RuntimeWarning: Failed to read commit hash:` then `No module named 'vllm._version'`): that rest is the warning's
_PY_WARNING_HEAD = re.compile(r"\.py:\d+[^\s]{0,300}?:\s+[A-Z]\w{0,60}Warning:\s[^\n]{0,2000}:\s*$")
# a pasted list of errors (`1. ImportError: …`, `- KeyError: …`): the marker is the paste's, the line the exception's
_LIST_MARKER_RE = re.compile(r"^(?:\d{1,3}[.)]|[-*•])\s+(?=(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception):)")
MAX_EXC_MESSAGE = 2000  # an exception message joined over its lines stops growing here
_PROC_TAG_RE = re.compile(r"^\s*\(\w[\w-]{0,60}(?: rank=\d+)?(?: pid=\d+)?\)")
# a frame line cut inside its path (`File "/usr/lib/python3.12/dist-packages/vllm/v1/w`) and the rest of it on the
# next line (`orker/gpu_worker.py", line 276, in execute_model`)
_FRAME_HEAD_CUT_RE = re.compile(r'\bFile "[^"\s]{1,400}$')
_FRAME_TAIL_RE = re.compile(r'^[\w./\\-]{1,400}\.py", line \d+')
_PY_WARNING_LINE_RE = re.compile(r"\.py:\d+: [A-Z]\w{0,60}Warning:")
# what Python (and its multiprocessing and threading) print after an exception that is not its message
_NOT_A_MESSAGE = ("The above exception", "During handling of the above exception", "Process ", "Exception in ",
                  "^", "~", "Traceback")
_RECORD_LEVEL_RE = re.compile(r"^\s*(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b")
_CONTINUATION_RE = re.compile(r"^\s*(?:(?:nan|\d*\.\d+|\d+)\s*(?:[,/]|$)|(?:Avg Draft|Per-position|Accepted|Drafted|"
                              r"Mean acceptance|Draft acceptance)\b)", re.IGNORECASE)


def _wordy(text: str) -> bool:
    """Long enough, and enough words, to be a message rather than a value or a stray token."""
    return len(text) >= 24 and text.count(" ") >= 3


# Ray's log deduplication appends how often a line repeated across the cluster: the line is the same without it
_RAY_REPEATED_RE = re.compile(r" ?\[repeated \d{1,9}x across cluster\]\s*$")


def strip_outer_prefix(text: str) -> str:
    m = OUTER_PREFIX_RE.match(text)
    text = text[m.end():] if m else text
    return _RAY_REPEATED_RE.sub("", text) if text.endswith("]") and "across cluster" in text else text


class LineParser:
    """Turns lines into samples, events and clues. Feed it lines one at a time (streaming).

    A SpecDecoding line a terminal wrapped, or a fragment pasted over several lines, is held until the
    next line shows it is complete, so `result` flushes what is pending before it answers."""

    def __init__(self, table: FailureTable | None = None, k_hint: int | None = None, keep: int | None = None) -> None:
        self._result = ParsedLog()
        self.table = table or default_table()
        self.k_hint = k_hint
        self.keep = keep  # a bounded parse (the whole-log scan) keeps only the last `keep` samples
        self._pending: tuple[str, Origin, dict[str, str]] | None = None
        self._tracebacks: dict[tuple[str | None, int | None], int] = {}  # open traceback per process
        self._pydantic: tuple[str, int | None, str | None] | None = None  # (config class, traceback, field)
        self._exact: str | None = None  # the pending text whose fields are exactly the pending fields
        self._warning_open = False  # the line before was a Python warning whose message goes on below
        self._frame_indent: dict[tuple[str | None, int | None], int] = {}  # the last frame's indent per process
        self._exc_open: ProblemLine | None = None  # the exception line just read: its message may go on below
        self._held: tuple[str, int | None, int | None] | None = None  # a frame line a terminal cut inside its path

    @property
    def result(self) -> ParsedLog:
        if self._held is not None:
            held, self._held = self._held, None
            self._read(*held)
        self._flush()
        bound_problems(self._result.problems)
        return self._result

    def feed(self, raw: bytes | str, line_no: int | None = None, offset: int | None = None) -> None:
        stats = self._result.stats
        stats.lines += 1
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                stats.undecodable += 1
                text = raw.decode("utf-8", errors="replace")
        else:
            text = raw
        text = strip_ansi(text.rstrip("\r\n")).replace("\r", "")
        if len(text) > 200_000:  # nothing vLLM prints is this long: garbage, do not regex it
            stats.skip(text)
            return
        text = strip_outer_prefix(text)
        if '\\"' in text and 'File \\"' in text:
            # a traceback copied out of a JSON string keeps its escaped quotes (`File \"/usr/…/core.py\", line 336`)
            text = text.replace('\\"', '"')
        if self._held is not None:
            held, self._held = self._held, None
            if _FRAME_TAIL_RE.match(text) and not _PROC_TAG_RE.match(text) and PREFIX_RE.search(text) is None:
                # a pasted traceback hard-wrapped at the terminal's width: the path goes on at the next line's start
                text, line_no, offset = held[0] + text, held[1], held[2]
            else:
                self._read(*held)
        if 'File "' in text and _FRAME_HEAD_CUT_RE.search(text):
            self._held = (text, line_no, offset)
            return
        self._read(text, line_no, offset)

    def _read(self, text: str, line_no: int | None, offset: int | None) -> None:
        stats = self._result.stats
        if self._warning_open and self._warning_rest(text):
            self._warning_open = False
            stats.skip(text)
            return
        exc, self._exc_open = self._exc_open, None
        if exc is not None and self._message_cut(exc, text):
            # an exception line a terminal wrapped inside a bracket: the rest is the bare line below it
            exc.message = f"{exc.message}{text.strip()}"[:MAX_EXC_MESSAGE]
            self._exc_open = exc if exc.origin.level is None else None
            return
        if exc is not None and self._message_goes_on(exc, text):
            # Python prints a message of several lines as it is: the lines below the exception's are its own
            exc.tight = f"{exc.tight or exc.message}{text.strip()}"[:MAX_EXC_MESSAGE]
            exc.message = f"{exc.message} {text.strip()}"[:MAX_EXC_MESSAGE]
            self._exc_open = exc
            return
        self._warning_open = "Warning:" in text and _PY_WARNING_HEAD.search(text) is not None
        self._classify(text, line_no, offset)

    def _message_goes_on(self, exc: ProblemLine, text: str) -> bool:
        """A bare line right below an exception line: no record of its own (vLLM's prefix, a level), no frame, no other
        exception, nothing the failure table knows — the rest of the exception's message (pydantic's errors are read
        field by field, not joined)."""
        body = _LIST_MARKER_RE.sub("", text.strip(), count=1)
        # (vLLM's logger prefixes every line of a message: a bare line below a logged exception is someone else's)
        return (exc.origin.level is None and exc.exception != "ValidationError" and len(exc.message) < MAX_EXC_MESSAGE
                and self._warning_rest(body) and not body.startswith(_NOT_A_MESSAGE)
                and _PYTEST_WHERE_RE.match(body) is None and _FRAME_SHORT_RE.match(body) is None
                and _PROC_TAG_RE.match(text) is None and PREFIX_RE.search(text) is None
                and _PY_WARNING_LINE_RE.search(text) is None and self.table.match(text) is None)

    def _message_cut(self, exc: ProblemLine, text: str) -> bool:
        """A bare line that closes a bracket the exception's message left open (`… from shape (4` then
        `,) into shape (3,)`): the message was hard-wrapped, not ended."""
        msg = exc.message
        open_round, open_square = msg.count("(") - msg.count(")"), msg.count("[") - msg.count("]")
        if not (open_round > 0 or open_square > 0) or _PROC_TAG_RE.match(text) or PREFIX_RE.search(text):
            return False
        body = text.strip()
        closes = (open_round > 0 and body.count(")") > body.count("(")) or \
            (open_square > 0 and body.count("]") > body.count("["))
        return closes and len(body) < 400 and self._warning_rest(body)

    @staticmethod
    def _warning_rest(text: str) -> bool:
        """The rest of a warning's message: no record, frame, traceback or exception line of its own."""
        body = text.strip()
        return bool(body) and not (_EXCEPTION_RE.match(body) or _FRAME_RE.match(body) or _RECORD_LEVEL_RE.match(body)
                                   or body.startswith(_TRACEBACK_HEAD))

    def feed_continuation(self, raw: bytes, line_no: int | None = None, offset: int | None = None) -> None:
        """A line the scanner found no needle in, read only as the possible rest of a wrapped SpecDecoding line:
        anything else in it is nothing the parser wants, so it is counted, not classified."""
        bad = False
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError:
            decoded, bad = raw.decode("utf-8", errors="replace"), True
        text = strip_outer_prefix(strip_ansi(decoded.rstrip("\r\n")).replace("\r", ""))
        if TOKEN_RATE_RE.match(text) or (self._pending is not None and self._continues(text)):
            self.feed(raw, line_no, offset)
            return
        self._result.stats.lines += 1
        self._result.stats.undecodable += bad

    def _flush(self) -> None:
        if self._pending is None:
            return
        msg, origin, fields = self._pending
        self._pending = None
        out = self._result
        exact, self._exact = self._exact is msg, None  # fields computed for this very text: not again
        sample = parse_spec_message(msg, origin, self.k_hint, fields if exact else None)
        if sample is None:
            out.stats.skip(origin.text or msg)
            return
        self._add_sample(sample)
        out.stats.parsed += 1
        if origin.source_file and origin.source_file.endswith("metrics.py") and origin.source_line:
            out.clues.append(ContextClue("metrics_hint", origin.source_line, origin))

    def _add_sample(self, sample: SpecDecodeSample) -> None:
        out = self._result
        out.samples.append(sample)
        out.stats.samples_seen += 1
        if sample.counts_known and not sample.cumulative:
            out.stats.accepted_seen += sample.accepted
            out.stats.drafts_seen += sample.num_drafts or 0.0
        if self.keep is not None and len(out.samples) > 2 * self.keep + 64:
            out.trim(self.keep)

    def _continues(self, text: str) -> bool:
        """Is `text` the rest of the pending SpecDecoding line (wrapped, or pasted over lines)?"""
        if self._pending is None or PREFIX_RE.match(text) or "SpecDecoding metrics" in text:
            return False
        if not _CONTINUATION_RE.match(text):
            return False
        return not (set(spec_fields(text)) & set(self._pending[2]))  # a field again: the next interval

    def _classify(self, text: str, line_no: int | None, offset: int | None) -> None:
        tm = TOKEN_RATE_RE.match(text)
        if tm:  # one position per line: they build one per-position list
            self._add_position(tm["v"], text, line_no, offset)
            return
        pending = self._pending
        if pending is not None and self._continues(text):
            msg, origin, fields = pending
            joined = msg.rstrip() + (" " if msg.rstrip().endswith(",") else ", ") + text.strip()
            self._pending = (joined, origin, fields | spec_fields(text))
            return
        if pending is not None:  # (most lines have nothing pending: no call for them)
            self._flush()
        lowered = text.lower()
        looks_spec = looks_like_spec(text)
        looks_engine = "avg prompt throughput" in lowered
        could_fail = self.table.could_match(text)
        if not (looks_spec or looks_engine or could_fail or any(n in lowered for n in PARSE_NEEDLES)):
            self._needleless(text, line_no, offset)
            return
        origin, msg = split_prefix(text)
        origin.line_no, origin.offset = line_no, offset
        if looks_spec and not looks_engine:
            if PREFIX_RE.search(msg):  # another record's prefix inside this one: two lines interleaved
                self._result.stats.skip(text)
                return
            self._pending = (msg, origin, spec_fields(msg))
            self._exact = msg
            return
        if looks_engine and self._engine_line(msg, origin, text, looks_spec):
            return
        self._clues(msg, origin)
        self._problem(msg, origin, self._failure(text, origin) if could_fail else None)

    def _add_position(self, value: str, text: str, line_no: int | None, offset: int | None) -> None:
        """`acceptance at token N: v`: one more rate for the pending line's per-position list (a new line if none)."""
        pending = self._pending
        if pending is not None and pending[2].get("pp_lines"):
            msg, origin, fields = pending
            self._pending = (f"{msg}, {value}", origin, fields)
            return
        if pending is None:
            origin, _ = split_prefix(text)
            origin.line_no, origin.offset = line_no, offset
            pending = ("", origin, {})
        msg, origin, fields = pending
        self._pending = (f"{msg}, Per-position acceptance rate: {value}", origin,
                         fields | {"pp": value, "pp_lines": "1"})

    def _needleless(self, text: str, line_no: int | None, offset: int | None) -> None:
        """A line with no needle: the field name under a pydantic header, a line that shows startup or serving going
        on (a pasted log: the scan of a file hands the parser only lines with needles), or a loose line the atlas
        may know."""
        progress = "serving" if SERVING_PROGRESS_RE.search(text) else (
            "startup" if STARTUP_PROGRESS_RE.search(text) else None)
        if progress is not None:
            origin, _ = split_prefix(text)
            origin.line_no, origin.offset = line_no, offset
            self._result.clues.append(ContextClue("progress", progress, origin))
            return
        if self._pydantic is not None and _FIELD_LINE_RE.match(text.strip()):
            origin, msg = split_prefix(text)
            origin.line_no, origin.offset = line_no, offset
            self._pydantic_detail(msg.strip(), origin, None)
        elif len(self._result.loose) < MAX_LOOSE and _wordy(text):
            origin = Origin(line_no=line_no, offset=offset, text=text)
            self._result.loose.append(ProblemLine("loose", origin, text.strip()))

    def _engine_line(self, msg: str, origin: Origin, text: str, looks_spec: bool) -> bool:
        """An Engine line (and the SpecDecoding line an interleaving put in front of it): False if it is not one."""
        out = self._result
        if looks_spec:
            cut = msg.find("Engine")
            sample = parse_spec_message(msg[:cut] if cut > 0 else msg, origin, self.k_hint)
            if sample is not None:
                self._add_sample(sample)
                out.stats.parsed += 1
        eng = parse_engine_message(msg, origin)
        if eng is not None:
            out.engine.append(eng)
            if self.keep is not None and len(out.engine) > 2 * self.keep + 64:
                out.trim(self.keep)
            out.stats.parsed += 1
            return True
        if "Engine" in msg:
            out.stats.skip(text)
            return True
        return False

    def _failure(self, text: str, origin: Origin) -> str | None:
        """The failure-table signature the line matches, recorded as an event; None if none does."""
        fm = self.table.match(text)
        if fm is None:
            return None
        out = self._result
        out.events.append(LogEvent(fm.signature.id, origin, fm.detail))
        if self.keep is not None and len(out.events) > 2 * MAX_EVENTS:
            out.trim(self.keep)
        out.stats.parsed += 1
        return fm.signature.id

    def _pydantic_detail(self, body: str, origin: Origin, explained: str | None) -> bool:
        """The lines under pydantic's `N validation error(s) for XConfig`: a field's name, then its error. vLLM's
        own checks arrive as `Value error, <vLLM's message>`: that message is the exception worth placing."""
        assert self._pydantic is not None
        cls, tb, field_name = self._pydantic
        fm = _FIELD_LINE_RE.match(body)
        if fm and field_name is None:
            self._pydantic = (cls, tb, fm["field"])
            return True
        dm = _PYDANTIC_DETAIL_RE.match(body)
        if dm is None:
            self._pydantic = None
            return False
        exc = {"Value": "ValueError", "Assertion": "AssertionError"}.get(dm["kind"] or "", "ValidationError")
        message = dm["msg"].strip() if dm["kind"] else (f"{field_name}: " if field_name else "") + dm["msg"].strip()
        self._result.problems.append(ProblemLine(
            "exception", origin, message, exception=exc, explained_by=explained, traceback_id=tb,
            config_field=f"{cls}.{field_name}" if field_name else None))
        self._result.stats.problems_seen += 1
        self._pydantic = (cls, tb, None)
        return True

    def _problem(self, msg: str, origin: Origin, explained: str | None) -> None:
        """Keep the line if it says something went wrong: a level, an exception, a traceback frame."""
        body = _LIST_MARKER_RE.sub("", msg.strip(), count=1)
        key = (origin.proc, origin.pid)
        if self._pydantic is not None and self._pydantic_detail(body, origin, explained):
            return
        indent = len(msg) - len(msg.lstrip())
        if key in self._tracebacks and indent and not _FRAME_RE.match(body) and not _FRAME_SHORT_RE.match(body) \
                and not (indent < self._frame_indent.get(key, 0) and _EXCEPTION_RE.match(body)):
            # (a whole traceback pasted indented: its exception line sits left of its frames, not under one)
            self._frame_source(body, self._tracebacks[key])
            return
        problem = self._problem_of(body, origin, explained, key)
        if problem is not None and problem.kind == "frame":
            self._frame_indent[key] = indent
        if problem is None:
            # a needle but no level or class ("Value error, …" pasted alone): a loose line the atlas may know
            loose = self._result.loose
            if len(loose) < MAX_LOOSE and _wordy(body) and not body.startswith(_TRACEBACK_HEAD):
                loose.append(ProblemLine("loose", origin, body, explained_by=explained))
            return
        if problem.exception == "ValidationError" and (head := _PYDANTIC_HEAD_RE.match(problem.message)):
            self._pydantic = (head["cls"], problem.traceback_id, None)
        problems = self._result.problems
        problems.append(problem)
        if problem.kind == "exception":
            self._exc_open = problem
        self._result.stats.problems_seen += 1
        if len(problems) > 2 * (PROBLEMS_FIRST + PROBLEMS_LAST):
            bound_problems(problems)

    def _frame_source(self, body: str, traceback_id: int) -> None:
        """The source line under a frame (`    raise ...`): part of the frame, not a problem of its own."""
        last = self._result.problems[-1] if self._result.problems else None
        if last is not None and last.kind == "frame" and last.source is None \
                and last.traceback_id == traceback_id and not set(body) <= _CARETS:
            last.source = body[:300]

    def _problem_of(self, body: str, origin: Origin, explained: str | None,
                    key: tuple[str | None, int | None]) -> ProblemLine | None:
        """The line as a frame, an exception or a level record; None if it is none of them (a traceback's
        header opens the traceback of its process and is kept as nothing else)."""
        # where the line is, to tie a traceback's lines together
        here = origin.offset if origin.offset is not None else (origin.line_no if origin.line_no is not None else -1)
        if body.startswith(_TRACEBACK_HEAD):
            self._tracebacks[key] = here
            return None
        gutter = _PYTEST_E_RE.match(body)
        if gutter is not None:
            body = body[gutter.end():]
        elif (where := _PYTEST_WHERE_RE.match(body)) is not None and where["cls"]:
            self._pytest_raised_at(where, origin, explained, here)
            return None
        fr = _FRAME_RE.match(body) or _FRAME_SHORT_RE.match(body) or _PYTEST_WHERE_RE.match(body) \
            or _FRAME_IPY_RE.match(body)
        if fr is not None:
            tb = self._tracebacks.setdefault(key, here)  # a frame without its header opens the traceback
            return ProblemLine("frame", origin, body, frame_file=fr["file"], frame_line=int(fr["line"]),
                               frame_function=fr["func"], explained_by=explained, traceback_id=tb)
        ex = _EXCEPTION_RE.match(body)
        if ex is not None:
            return ProblemLine("exception", origin, (ex["msg"] or ex["rmsg"] or "").strip(),
                               exception=(ex["cls"] or ex["rcls"]).rsplit(".", 1)[-1], explained_by=explained,
                               traceback_id=self._tracebacks.pop(key, None))
        if origin.level in PROBLEM_LEVELS:
            return ProblemLine("level", origin, body, explained_by=explained)
        return None

    def _pytest_raised_at(self, where: re.Match[str], origin: Origin, explained: str | None, here: int) -> None:
        """pytest names where the exception it just printed was raised after it: that place becomes the last frame of
        the exception's traceback (its function is not printed)."""
        problems = self._result.problems
        cls = where["cls"].rsplit(".", 1)[-1]
        at = next((n for n in range(len(problems) - 1, max(-1, len(problems) - 4), -1)
                   if problems[n].kind == "exception" and problems[n].exception == cls), None)
        if at is None:
            return
        exc = problems[at]
        tb = exc.traceback_id if exc.traceback_id is not None else here
        exc.traceback_id = tb
        problems.insert(at, ProblemLine("frame", origin, where.group(0), frame_file=where["file"],
                                        frame_line=int(where["line"]), explained_by=explained, traceback_id=tb))

    def _clues(self, msg: str, origin: Origin) -> None:
        out = self._result
        if COMPILE_CACHE_LOAD_RE.search(msg):
            out.clues.append(ContextClue("compile_cache", msg.strip()[:200], origin))
        if SERVING_PROGRESS_RE.search(msg):
            out.clues.append(ContextClue("progress", "serving", origin))
        elif STARTUP_PROGRESS_RE.search(msg):
            out.clues.append(ContextClue("progress", "startup", origin))
        sc = SPEC_CONFIG_RE.search(msg)
        if sc:
            out.clues.append(ContextClue("engine_spec_config", {
                "method": sc["method"], "model": sc["model"], "num_speculative_tokens": int(sc["k"])}, origin))
        for rx in VERSION_RES:
            vm = rx.search(msg)
            if vm:
                out.clues.append(ContextClue("version", vm["v"], origin))
                if "model" in vm.groupdict() and vm["model"]:
                    out.clues.append(ContextClue("model", vm["model"], origin))
                return
        am = ARGS_RE.search(msg)
        if am:
            args = _parse_args_literal(am["args"])
            if args is not None:
                out.clues.append(ContextClue("args", args, origin))
            return
        if START_RE.search(msg):
            out.clues.append(ContextClue("start", msg.strip(), origin))
            return
        lv = LOGO_VERSION_RE.search(msg)
        if lv and origin.level == "INFO":
            out.clues.append(ContextClue("logo_version", lv["v"], origin))
            return
        lm = LOGO_MODEL_RE.search(msg)
        if lm and origin.level == "INFO" and "/" in lm["model"]:
            out.clues.append(ContextClue("model", lm["model"], origin))


def parse_lines(lines: Iterable[bytes | str], first_line_no: int = 1) -> ParsedLog:
    parser = LineParser()
    for i, line in enumerate(lines):
        parser.feed(line, first_line_no + i)
    return parser.result


def parse_text(text: str) -> ParsedLog:
    return parse_lines(text.splitlines())


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


# --- Prometheus ---------------------------------------------------------------------------------

@dataclass
class PromSnapshot:
    """The speculative-decoding and health series of one `/metrics` scrape, summed over engines."""

    num_drafts: float = 0.0
    num_draft_tokens: float = 0.0
    num_accepted_tokens: float = 0.0
    accepted_per_pos: dict[int, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    model_names: set[str] = field(default_factory=set)
    has_spec_decode: bool = False
    skipped: int = 0

    def as_sample(self) -> SpecDecodeSample | None:
        """Cumulative since the server started (one scrape)."""
        return window(PromSnapshot(), self, cumulative=True)


_GAUGES = frozenset(n for m in (M.REQUESTS_RUNNING, M.REQUESTS_WAITING, M.KV_CACHE_USAGE) for n in m.names)
_COUNTERS = frozenset(m.name for m in (M.GENERATION_TOKENS, M.PROMPT_TOKENS, M.PREEMPTIONS, M.REQUESTS_FINISHED))
_POSITION = M.SPEC_ACCEPTED_PER_POSITION.labels[0]

# one sample of a scrape: (name, labels, value), as a Prometheus text parser yields it
PromSample = tuple[str, Mapping[str, str], float]


def snapshot(samples: Iterable[PromSample], skipped: int = 0) -> PromSnapshot:
    """The series specops reads, summed over engines. The text itself is parsed outside the core
    (`bot.app.prometheus_text`, by prometheus_client's parser); `skipped` counts what it could not read."""
    snap = PromSnapshot(skipped=skipped)
    for name, labels, value in samples:
        if not name.startswith("vllm:"):
            continue
        if math.isnan(value):
            snap.skipped += 1
            continue
        if "model_name" in labels:
            snap.model_names.add(labels["model_name"])
        # names are matched exactly: `grep spec` also hits "respected" in help text
        if name == M.SPEC_DRAFTS.name:
            snap.num_drafts += value
            snap.has_spec_decode = True
        elif name == M.SPEC_DRAFT_TOKENS.name:
            snap.num_draft_tokens += value
            snap.has_spec_decode = True
        elif name == M.SPEC_ACCEPTED_TOKENS.name:
            snap.num_accepted_tokens += value
            snap.has_spec_decode = True
        elif name == M.SPEC_ACCEPTED_PER_POSITION.name:
            try:
                pos = int(labels.get(_POSITION, ""))
            except ValueError:
                snap.skipped += 1
                continue
            snap.accepted_per_pos[pos] = snap.accepted_per_pos.get(pos, 0.0) + value
            snap.has_spec_decode = True
        elif name in _GAUGES:
            snap.gauges[name] = snap.gauges.get(name, 0.0) + value
        elif name in _COUNTERS:
            snap.counters[name] = snap.counters.get(name, 0.0) + value
    return snap


def window(before: PromSnapshot, after: PromSnapshot, cumulative: bool = False) -> SpecDecodeSample | None:
    """The interval between two scrapes: mean = 1 + Δaccepted/Δdrafts, rate_i = Δper_pos_i/Δdrafts."""
    if not after.has_spec_decode:
        return None
    d_drafts = after.num_drafts - before.num_drafts
    d_tokens = after.num_draft_tokens - before.num_draft_tokens
    d_acc = after.num_accepted_tokens - before.num_accepted_tokens
    if d_drafts < 0 or d_tokens < 0 or d_acc < 0:
        return None  # a counter went down: the server restarted between the scrapes
    positions = sorted(after.accepted_per_pos)
    per_pos = [
        ((after.accepted_per_pos[p] - before.accepted_per_pos.get(p, 0.0)) / d_drafts) if d_drafts else math.nan
        for p in positions
    ]
    return SpecDecodeSample(
        form="prometheus",
        mean_acceptance_length=(1.0 + d_acc / d_drafts) if d_drafts else math.nan,
        accepted=round(d_acc),
        drafted=round(d_tokens),
        per_position=per_pos,
        avg_draft_acceptance_rate=(100.0 * d_acc / d_tokens) if d_tokens else math.nan,
        num_drafts=d_drafts,
        cumulative=cumulative,
    )


def split_scrapes(text: str) -> list[str]:
    """A file may hold several scrapes one after another; each starts again at the first family."""
    blocks: list[list[str]] = [[]]
    seen: set[str] = set()
    for line in text.splitlines():
        m = re.match(r"# (?:HELP|TYPE) (\S+)", line)
        if m and line.startswith("# TYPE"):
            if m[1] in seen:
                blocks.append([])
                seen = set()
            seen.add(m[1])
        blocks[-1].append(line)
    return ["\n".join(b) for b in blocks if any(x.strip() for x in b)]
