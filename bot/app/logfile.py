"""Reading vLLM logs from disk: head + tail by default, a full scan on request, and following.

Split from `metrics.py` so the parser stays pure. The default read costs what the head and the
tail cost, not the file: the tail is read backwards in blocks until enough samples are found.
Candidate lines are found with `bytes.find` on whole blocks (C speed) instead of a Python loop
per line; only those lines reach the regexes.
"""

from __future__ import annotations

import mmap
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from bot.core.failures import default_table
from bot.core.logparse import PARSE_NEEDLES, LineParser, ParsedLog, resolve_log_years

HEAD_BYTES = 1 << 20  # startup banner, arguments and launch failures live here
TAIL_BLOCK = 1 << 18
DEFAULT_TAIL_BUDGET = 64 << 20  # a log with no metrics in its last 64 MiB: say so, do not read GBs
MAX_LINE = 1 << 20
PARALLEL_SCAN_MIN = 64 << 20
SCAN_WORKERS: int | None = None  # None: up to 4, by the machine's cores


@dataclass
class LogRead:
    path: str
    size: int
    mode: str  # "whole", "head+tail", "all"
    bytes_read: int
    parsed: ParsedLog
    notes: list[str] = field(default_factory=list)


# words that ordinary lines (access logs, Engine lines, INFO chatter) hold: no use as a pre-scan gate
_COMMON = frozenset((
    "info", "http", "post", "chat", "completions", "tokens", "throughput", "engine", "running", "waiting", "cache",
    "prefix", "usage", "model", "models", "request", "requests", "with", "this", "that", "from", "have", "been",
    "your", "when", "will", "were", "load", "loading", "size", "start", "self", "than", "does", "most"))
_WORD = re.compile(r"[a-z][a-z0-9_]{3,}")


def gates(needles: set[str]) -> set[str]:
    """Fewer, shorter literals that every needle contains one of: a greedy set cover by the needles' words.

    The pre-scan costs one `bytes.find` pass per literal, so it stays flat as the knowledge base grows;
    a line a gate finds still has to match a signature's pattern to count."""
    words = {n: {w for w in _WORD.findall(n) if w not in _COMMON} for n in needles}
    out: set[str] = set()
    left = set(needles)
    while left:
        counts: dict[str, int] = {}
        for n in left:
            for w in words[n]:
                counts[w] = counts.get(w, 0) + 1
        best = max(counts, key=lambda w: (counts[w], len(w))) if counts else None
        if best is None or counts[best] < 2:
            out |= left  # the rest: each is its own gate
            break
        out.add(best)
        left = {n for n in left if best not in words[n]}
    return out


@lru_cache(maxsize=1)
def candidate_needles() -> tuple[bytes, ...]:
    """Lower-case literals for the pre-scan: what the parser reads (metrics, Engine lines, clues) and gates
    for every failure signature's needles."""
    words = set(PARSE_NEEDLES) | gates(set(default_table().needles))
    # a needle inside another finds that one's lines too
    kept = [w for w in words if not any(o != w and o in w for o in words)]
    return tuple(sorted(w.encode("utf-8", "replace") for w in kept))


def candidate_lines(buf: bytes, needles: tuple[bytes, ...] | None = None) -> list[tuple[int, int]]:
    """(start, end) of every line in `buf` holding one of `needles` (case-insensitive), in order, without
    duplicates; the line after a SpecDecoding line comes too, in case a terminal wrapped it."""
    low = buf.lower()
    starts: dict[int, int] = {}
    for needle in needles if needles is not None else candidate_needles():
        i = low.find(needle)
        while i >= 0:
            start = low.rfind(b"\n", 0, i) + 1
            end = low.find(b"\n", i)
            if end < 0:
                end = len(low)
            starts[start] = end
            if b"acceptance" in needle and end < len(low):
                nxt = low.find(b"\n", end + 1)
                starts[end + 1] = len(low) if nxt < 0 else nxt
            i = low.find(needle, end)
    return sorted(starts.items())


ENGINE_NEEDLE = b"avg prompt throughput"


def paired_engine_lines(buf: bytes, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Of the Engine lines, only those logged right before a SpecDecoding line (vLLM logs the two together
    every interval) and the last one: a log of nothing but Engine lines costs what its samples cost."""
    low = buf.lower()
    engine = [ENGINE_NEEDLE in low[s:e] and b"acceptance" not in low[s:e] for s, e in spans]
    spec = [b"acceptance" in low[s:e] for s, e in spans]
    last_engine = max((i for i, is_engine in enumerate(engine) if is_engine), default=-1)
    return [span for i, span in enumerate(spans)
            if not engine[i] or i == last_engine or (i + 1 < len(spans) and spec[i + 1])]


def _feed_candidates(parser: LineParser, buf: bytes, base: int, first_line_no: int | None,
                     needles: tuple[bytes, ...] | None = None, paired_engine: bool = False) -> None:
    line_no = first_line_no
    counted_to = 0
    spans = candidate_lines(buf, needles)
    if paired_engine:
        spans = paired_engine_lines(buf, spans)
    for start, end in spans:
        if line_no is not None:
            line_no += buf.count(b"\n", counted_to, start)
            counted_to = start
        if end - start > MAX_LINE:
            parser.result.stats.lines += 1
            parser.result.stats.skipped += 1
            continue
        parser.feed(buf[start:end], line_no, base + start)


def parse_bytes(buf: bytes, first_line_no: int = 1) -> ParsedLog:
    parser = LineParser()
    _feed_candidates(parser, buf, 0, first_line_no, paired_engine=True)
    parser.result.stats.lines = buf.count(b"\n") + (0 if buf.endswith(b"\n") or not buf else 1)
    return parser.result


def read_log(path: str | os.PathLike[str], *, samples: int = 30, full: bool = False,
             tail_budget: int = DEFAULT_TAIL_BUDGET, reference: datetime | None = None) -> LogRead:
    """Read what a diagnosis needs. Raises OSError for a missing or unreadable file."""
    p = Path(path)
    size = p.stat().st_size
    if reference is None:
        reference = datetime.fromtimestamp(p.stat().st_mtime)
    with open(p, "rb") as f:
        if size <= 2 * HEAD_BYTES:
            buf = f.read()
            result = LogRead(str(p), size, "whole", len(buf), parse_bytes(buf))
        elif full:
            result = _read_all(f, str(p), size, keep=samples)
        else:
            result = _read_head_tail(f, str(p), size, samples, tail_budget)
    resolve_log_years(result.parsed, reference)
    return result


def _head(f: object, size: int) -> tuple[ParsedLog, int]:
    assert hasattr(f, "read")
    buf: bytes = f.read(HEAD_BYTES)
    cut = buf.rfind(b"\n") + 1 if len(buf) < size else len(buf)
    parser = LineParser()
    _feed_candidates(parser, buf[:cut], 0, 1, paired_engine=True)
    parser.result.stats.lines = buf.count(b"\n", 0, cut)
    return parser.result, cut


def _read_head_tail(f: object, path: str, size: int, samples: int, budget: int) -> LogRead:
    assert hasattr(f, "seek") and hasattr(f, "read")
    head, head_end = _head(f, size)
    blocks: list[ParsedLog] = []
    pos = size
    carry = b""
    found = 0
    read = head_end
    while pos > head_end and found < samples and (size - pos) < budget:
        step = min(TAIL_BLOCK, pos - head_end)
        pos -= step
        f.seek(pos)
        chunk = f.read(step) + carry
        read += step
        if pos > head_end:
            nl = chunk.find(b"\n")
            if nl < 0:
                # one endless line is not vLLM output: drop it
                carry = b"" if len(chunk) > MAX_LINE else chunk
                continue
            carry, chunk = chunk[: nl + 1], chunk[nl + 1:]
            base = pos + nl + 1
        else:
            carry, base = b"", pos
        parser = LineParser()
        _feed_candidates(parser, chunk, base, None, paired_engine=True)
        parser.result.stats.lines = chunk.count(b"\n")
        found += len(parser.result.samples)
        blocks.append(parser.result)
    if carry:
        parser = LineParser()
        _feed_candidates(parser, carry, pos, None)
        blocks.append(parser.result)
    parsed = head
    for block in reversed(blocks):
        parsed.extend(block)
    notes: list[str] = []
    if pos > head_end:
        notes.append(f"read the first {head_end} bytes and the last {size - pos} bytes of {size}; "
                     "use --all for the whole history")
        if found == 0:
            notes.append(f"no SpecDecoding metrics in the last {size - pos} bytes")
    if len(parsed.samples) > samples:
        parsed.samples = parsed.samples[-samples:]
    return LogRead(path, size, "head+tail", read, parsed, notes)


SCAN_BLOCK = 8 << 20  # the whole-log scan reads this much at a time: memory stays flat in the file's size


def _scan_range(args: tuple[str, int, int, int]) -> ParsedLog:
    """Worker: parse every candidate line that *starts* in [start, end) of the file, keeping the last `keep`
    samples and every count (a bounded ParsedLog: constant memory in the number of matching lines)."""
    path, start, end, keep = args
    parser = LineParser(keep=keep)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pos = start
        if pos > 0 and mm[pos - 1:pos] != b"\n":  # the line that straddles `start` belongs to the range before
            nl = mm.find(b"\n", pos, end)
            if nl < 0:
                return parser.result
            pos = nl + 1
        while pos < end:
            stop = min(end, pos + SCAN_BLOCK)
            nl = mm.find(b"\n", stop - 1, min(len(mm), stop + MAX_LINE)) if stop < len(mm) else -1
            stop = len(mm) if nl < 0 else nl + 1  # finish the line the block ends in
            _feed_candidates(parser, mm[pos:stop], pos, None)
            pos = stop
    return parser.result


def _read_all(f: object, path: str, size: int, keep: int = 30) -> LogRead:
    head, head_end = _head(f, size)
    workers = SCAN_WORKERS or max(1, min(4, os.cpu_count() or 1))
    span = size - head_end
    if span >= PARALLEL_SCAN_MIN and workers > 1:
        step = span // workers
        ranges = [(path, head_end + i * step, size if i == workers - 1 else head_end + (i + 1) * step, keep)
                  for i in range(workers)]
        with ProcessPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(_scan_range, ranges))
    else:
        parts = [_scan_range((path, head_end, size, keep))]
    parsed = head
    parsed.trim(keep)
    for part in parts:  # in file order
        parsed.extend(part, keep=keep)
    _number_lines(path, parsed)
    notes = []
    st = parsed.stats
    if st.samples_seen > len(parsed.samples):
        whole = f" (mean acceptance length {1 + st.accepted_seen / st.drafts_seen:.2f} over all of them)" \
            if st.drafts_seen else ""
        notes.append(f"--all: {st.samples_seen} SpecDecoding samples in the whole log{whole}; judged on the last "
                     f"{len(parsed.samples)}")
    return LogRead(path, size, "all", size, parsed, notes)


def _number_lines(path: str, parsed: ParsedLog) -> None:
    """Line numbers for events past the head, counted only as far as the last such event."""
    pending = sorted((ev.origin for ev in parsed.events
                      if ev.origin.line_no is None and ev.origin.offset is not None),
                     key=lambda o: o.offset or 0)
    if not pending:
        return
    line_no, pos = 1, 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for origin in pending:
            target = origin.offset or 0
            while pos < target:
                step = min(target, pos + (8 << 20))
                line_no += mm[pos:step].count(b"\n")
                pos = step
            origin.line_no = line_no


# --- streaming -----------------------------------------------------------------------------------

class LineAssembler:
    """Byte chunks (a file being followed, an SSH channel) -> complete lines, bounded memory."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._partial = b""
        self._max = max_line
        self.dropped = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > self._max:
            self._partial = b""
            self.dropped += 1
        return lines

    def flush(self) -> list[bytes]:
        rest, self._partial = self._partial, b""
        return [rest] if rest else []
