"""What a starting vLLM server is doing, from the end of its log: the line to show beside
"wait for /health" (loading weights, compiling, profiling memory, KV cache size).

The message after vLLM's prefix is shown as logged; no wording is assumed, because it changes
from release to release. A progress bar (tqdm: "Loading safetensors checkpoint shards: 50% ...")
counts: its percentage is the estimate vLLM gives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from bot.core.line_kinds import split_prefix, strip_ansi
from bot.core.parsed_log import Stamp

_PERCENT_RE = re.compile(r"(?<![\d.])(\d{1,3})% ?(?:\||Completed)")
_NOISE = ("DEBUG", )
MAX_CHARS = 110


def is_progress_bar(message: str) -> bool:
    return bool(_PERCENT_RE.search(message))


def last_activity(text: str) -> str | None:
    """The last INFO/WARNING message (or progress bar) of `text`, without its prefix, shortened."""
    for raw in reversed(text.replace("\r", "\n").splitlines()[-200:]):
        line = strip_ansi(raw).strip()
        if not line:
            continue
        origin, message = split_prefix(line)
        if origin.level in _NOISE:
            continue
        message = message.strip()
        is_bar = bool(_PERCENT_RE.search(message))
        if origin.level is None and not is_bar:
            continue  # a traceback line, a bare print: not progress
        if len(message) > MAX_CHARS:
            message = message[: MAX_CHARS - 1].rstrip() + "…"
        return message or None
    return None


# --- startup phases ------------------------------------------------------------------------------
#
# What a starting vLLM goes through, in order, each told by the lines vLLM itself logs (matched on their
# stable words; the numbers and file:line change between releases). A phase begins at its first line and
# ends where the next begins — or at its own closing line ("Loading weights took …", "Graph capturing
# finished …"), the time after which belongs to what comes next. A phase is entered once: a drafter's own
# weights (its "Loading … checkpoint shards" bar), an EAGLE head's torch.compile after the profiling run,
# stay in the phase they happen in instead of flapping back; the order itself may differ between releases
# (the V2 model runner captures CUDA graphs before it sizes the KV cache). The real lines these come from
# and where they were seen: tests/core/test_startup_phases.py.


@dataclass(frozen=True)
class Phase:
    key: str
    label: str  # what is happening, for "now: …"
    short: str  # its name in a summary


PHASES = (
    Phase("start", "starting (imports, config, engine process)", "start"),
    Phase("weights", "loading weights", "weights"),
    Phase("drafter", "loading the drafter", "drafter"),
    Phase("compile", "torch.compile", "compile"),
    Phase("kv_cache", "profiling memory, sizing the KV cache", "KV cache"),
    Phase("cudagraph", "capturing CUDA graphs", "CUDA graphs"),
    Phase("api", "starting the API server", "API server"),
)
_BY_KEY = {p.key: p for p in PHASES}

_STARTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((key, re.compile(rx)) for key, rx in (
    ("weights", r"^Starting to load model\b"),
    ("weights", r"^Loading \w+ checkpoint shards:"),  # tqdm: safetensors, fastsafetensors, pt
    ("drafter", r"^Loading drafter model\b"),
    ("compile", r"for vLLM's torch\.compile$"),  # "Using cache directory: … for vLLM's torch.compile"
    ("compile", r"^Dynamo bytecode transform time:"),
    ("compile", r"^Compiling a graph for\b"),
    ("compile", r"^Directly load the compiled graph"),
    ("compile", r"^Warming up model for the compilation"),  # the CPU build
    ("kv_cache", r"^Memory profiling takes\b"),
    ("kv_cache", r"^Profiling CUDA graph memory:"),
    ("kv_cache", r"^Estimated CUDA graph memory:"),
    ("kv_cache", r"^Available KV cache memory:"),
    ("kv_cache", r"^[A-Z]+ KV cache size: [\d,]+ tokens"),  # GPU …, CPU …
    ("kv_cache", r"^Maximum concurrency for\b"),
    ("kv_cache", r"GiB for KV cache\b"),  # the CPU build: "Explicitly set (1.0/9.09) GiB for KV cache on node 0."
    ("cudagraph", r"^Capturing CUDA graph"),  # tqdm: "Capturing CUDA graphs (decode, FULL): 43%|…"
    ("cudagraph", r"^Capturing cudagraphs for decoding"),
    ("api", r"^init engine \(profile, create kv cache, warmup model\) took"),
    ("api", r"^Starting vLLM (?:API )?server\b"),
    ("api", r"^Available routes are:"),
))
_ENDS: tuple[tuple[frozenset[str], re.Pattern[str]], ...] = tuple((frozenset(keys), re.compile(rx)) for keys, rx in (
    # the target's weights, then (with a drafter) the drafter's: "Model loading took" closes both
    (("weights", "drafter"), r"^Loading weights took [\d.]+ s"),
    (("weights", "drafter"), r"^Model loading took [\d.]+ GiB"),
    (("compile",), r"^torch\.compile (?:takes|took) [\d.]+ s in total"),
    (("compile",), r"^Warming up done\b"),
    (("cudagraph",), r"^Graph capturing finished in\b"),
))
_READY_RE = re.compile(r"^(?:INFO:\s+)?Application startup complete\b")  # uvicorn's own line
_YEAR = 366 * 86400.0


def _seconds(stamp: Stamp) -> float | None:
    """A year-less log stamp as seconds into a leap year (differences are what count)."""
    try:
        at = datetime(2000, stamp.month, stamp.day, stamp.hour, stamp.minute, stamp.second)
    except ValueError:
        return None
    return (at - datetime(2000, 1, 1)).total_seconds()


@dataclass
class _Span:
    key: str
    start: float
    ended: float | None = None  # its own closing line
    end: float | None = None  # where the next phase began (or the server was ready)


@dataclass(frozen=True)
class PhaseTime:
    phase: Phase
    seconds: float
    running: bool


@dataclass(frozen=True)
class StartupRun:
    """One start that reached ready: its phases' durations in order, and the wait until /health answered."""

    ready_seconds: float
    phases: tuple[tuple[str, float], ...]


class StartupPhases:
    """The phases of one start, from its log, fed as it grows (whole lines; `peek` looks at the partial
    last one, where a progress bar redraws itself with \\r until it ends)."""

    def __init__(self) -> None:
        self.spans: list[_Span] = []
        self.last_stamp: float | None = None
        self.ready = False
        self._unstamped: str | None = None  # a phase begun before any stamped line (a log cut mid-bar)

    def feed(self, text: str) -> None:
        for raw in text.replace("\r", "\n").split("\n"):
            self._line(raw)

    def peek(self, partial: str) -> None:
        """A line still being written (a bar mid-way): only whether a phase began matters."""
        for raw in partial.replace("\r", "\n").split("\n"):
            message = split_prefix(strip_ansi(raw).strip())[1].strip()
            key = _start_of(message)
            if key is not None and self.last_stamp is not None:
                self._begin(key, self.last_stamp)

    def _line(self, raw: str) -> None:
        line = strip_ansi(raw).strip()
        if not line or self.ready:
            return
        origin, message = split_prefix(line)
        message = message.strip()
        if origin.stamp is not None:
            self._stamp(origin.stamp)
        at = self.last_stamp
        key = _start_of(message)
        if at is None:
            # vLLM's first lines are stamped; a log cut in the middle may begin with a bar: its phase
            # begins at the first stamp
            self._unstamped = key or self._unstamped
            return
        if not self.spans:
            first = key or self._unstamped
            self.spans.append(_Span(first or "start", at))
        if _READY_RE.search(message):
            self._close(at)
            self.ready = True
            return
        if key is not None:
            self._begin(key, at)
            return
        current = self.spans[-1]
        if any(current.key in keys and rx.search(message) for keys, rx in _ENDS):
            current.ended = at

    def _stamp(self, stamp: Stamp) -> None:
        seconds = _seconds(stamp)
        if seconds is None:
            return
        if self.last_stamp is not None and seconds < self.last_stamp - _YEAR / 2:
            seconds += _YEAR  # 12-31 23:59:59, then 01-01 00:00:00
        self.last_stamp = seconds if self.last_stamp is None else max(self.last_stamp, seconds)

    def _begin(self, key: str, at: float) -> None:
        if not self.spans:
            self.spans.append(_Span(key, at))
            return
        current = self.spans[-1]
        if any(span.key == key for span in self.spans) or current.key == "api":
            return
        begins = current.ended if current.ended is not None else at
        current.end = begins
        self.spans.append(_Span(key, begins))

    def _close(self, at: float) -> None:
        current = self.spans[-1]
        current.end = current.ended if current.ended is not None else at

    def launched(self, at: float) -> None:
        """The server was started at `at` (the log's clock), before its first line: the start phase covers
        the imports that print nothing."""
        if not self.spans or self.spans[0].start <= at:
            return
        first = self.spans[0]
        if first.key == "start":
            first.start = at
        else:
            self.spans.insert(0, _Span("start", at, end=first.start))

    def current(self) -> Phase | None:
        return _BY_KEY[self.spans[-1].key] if self.spans and not self.ready else None

    def _now(self, host_now: float | None, start: float) -> float:
        return host_now if host_now is not None else (self.last_stamp or start)

    def times(self, host_now: float | None = None) -> list[PhaseTime]:
        """Each phase so far with its duration; the running one up to `host_now` (the log's clock). A
        phase that logged its closing line is done: the time after it is the next one's (`between`)."""
        out: list[PhaseTime] = []
        for span in self.spans:
            end = span.end if span.end is not None else span.ended
            running = end is None
            if end is None:
                end = self._now(host_now, span.start)
            out.append(PhaseTime(_BY_KEY[span.key], max(0.0, end - span.start), running))
        return out

    def between(self, host_now: float | None = None) -> float | None:
        """How long since the last phase logged its end, while the next has not begun (None: a phase runs)."""
        if not self.spans or self.ready or self.spans[-1].ended is None or self.spans[-1].end is not None:
            return None
        ended = self.spans[-1].ended
        return max(0.0, self._now(host_now, ended) - ended)

    def run(self, ready_seconds: float) -> StartupRun:
        return StartupRun(ready_seconds, tuple((t.phase.key, t.seconds) for t in self.times()))


def _start_of(message: str) -> str | None:
    return next((key for key, rx in _STARTS if rx.search(message)), None)


def clock(seconds: float) -> str:
    """0:07, 2:41, 1:02:03."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    mins, secs = divmod(rest, 60)
    return f"{hours}:{mins:02d}:{secs:02d}" if hours else f"{mins}:{secs:02d}"


def about(seconds: float) -> str:
    """A duration as a person estimates it: "40 s", "2 min"."""
    if seconds < 1:
        return "under 1 s"
    if seconds < 90:
        return f"{round(seconds)} s"
    return f"{round(seconds / 60)} min"


def summary(times: list[PhaseTime]) -> str:
    """"start 0:21 · weights 0:01 · compile 0:31 …": the phases in order with their time."""
    return " · ".join(f"{t.phase.short} {clock(t.seconds)}" for t in times)


@dataclass(frozen=True)
class StartupHistory:
    """The earlier starts of one profile on one host (newest first): what to expect of this one."""

    runs: tuple[StartupRun, ...]

    def _median(self, values: list[float]) -> float | None:
        if not values:
            return None
        ordered = sorted(values)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2

    def phase_seconds(self, key: str) -> float | None:
        return self._median([s for run in self.runs for k, s in run.phases if k == key])

    def ready_seconds(self) -> float | None:
        return self._median([run.ready_seconds for run in self.runs])

    def source(self) -> str:
        return "last time" if len(self.runs) == 1 else f"(median of the last {len(self.runs)} starts)"


def expectation(history: StartupHistory | None, phase: Phase | None, waited: float) -> str | None:
    """"weights took 41 s last time; expected ready in ~2 min" — from this profile's earlier starts here."""
    if history is None or not history.runs:
        return None
    ready = history.ready_seconds()
    parts: list[str] = []
    typical = history.phase_seconds(phase.key) if phase is not None else None
    if phase is not None and typical is not None:
        parts.append(f"{phase.short} took {about(typical)} {history.source()}")
    if ready is not None:
        left = ready - waited
        parts.append(f"expected ready in ~{about(left)}" if left >= 1 else
                     f"slower than before (ready after {clock(ready)} {history.source()})")
    return "; ".join(parts) or None


def waiting_line(phases: StartupPhases, host_now: float | None, history: StartupHistory | None,
                 waited: float) -> str | None:
    """The phase now, how long it has run and the ones before it, and what earlier starts say is left."""
    times = phases.times(host_now)
    current = phases.current()
    if current is None or not times:
        return expectation(history, None, waited)
    gap = phases.between(host_now)
    if gap is not None:  # the last phase said it is done; the next has not said it began
        shown, hint = f"now: after {current.short} {clock(gap)} ({summary(times)})", expectation(history, None, waited)
    else:
        shown = f"now: {current.label} {clock(times[-1].seconds)}"
        if len(times) > 1:
            shown += f" (after {summary(times[:-1])})"
        hint = expectation(history, current, waited)
    return shown + (f" · {hint}" if hint else "")
