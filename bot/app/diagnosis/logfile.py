"""Reading vLLM logs from disk: head + tail by default (`bot.core.logread`), a full scan on request.

The default read costs what the head and the evidence in the tail cost, not the file. The full scan
(`--all`) maps the file and scans it in blocks through the same one-pass scanner, split across the cores,
and aggregates as it goes: memory stays flat in the file's size and in the number of matching lines.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from bot.core.logread import (
    DEFAULT_MAX_LINES,
    DEFAULT_TAIL_BYTES,
    HEAD_BYTES,
    MAX_LINE,
    ReadAt,
    read_head,
    read_tail,
    scan_mapped,
    scan_range,
)
from bot.core.parsed_log import ParsedLog, resolve_log_years

PARALLEL_SCAN_MIN = 64 << 20
SCAN_WORKERS: int | None = None  # None: up to 4, by the machine's cores
SCAN_BLOCK = 8 << 20  # the whole-log scan reads this much at a time


@dataclass
class LogRead:
    path: str
    size: int
    mode: str  # "whole", "head+tail", "all"
    bytes_read: int
    parsed: ParsedLog
    notes: list[str] = field(default_factory=list)


def reader(f: BinaryIO) -> ReadAt:
    def read_at(offset: int, size: int) -> bytes:
        f.seek(offset)
        return f.read(size)
    return read_at


def read_log(path: str | os.PathLike[str], *, samples: int = 30, full: bool = False,
             tail_budget: int = DEFAULT_TAIL_BYTES, max_lines: int = DEFAULT_MAX_LINES,
             reference: datetime | None = None) -> LogRead:
    """Read what a diagnosis needs. Raises OSError for a missing or unreadable file."""
    p = Path(path)
    st = p.stat()
    size = st.st_size
    if reference is None:
        reference = datetime.fromtimestamp(st.st_mtime)
    with open(p, "rb") as f:
        if full and size > 2 * HEAD_BYTES:
            result = _read_all(f, str(p), size, keep=samples)
        else:
            t = read_tail(reader(f), size, samples=samples, tail_bytes=tail_budget, max_lines=max_lines)
            result = LogRead(str(p), size, t.mode, t.bytes_read, t.parsed, t.notes)
    resolve_log_years(result.parsed, reference)
    return result


def _scan_range(args: tuple[str, int, int, int]) -> ParsedLog:
    """Parse every candidate line that *starts* in [start, end) of the file, keeping the last `keep` samples and
    every count (a bounded ParsedLog: constant memory in the number of matching lines)."""
    path, start, end, keep = args
    with open(path, "rb") as f:
        return scan_range(reader(f), start, end, keep=keep)


def _scan_mapped_range(args: tuple[str, int, int, int]) -> ParsedLog:
    """Worker: `_scan_range` through the file's mapping, which spares a copy of every block."""
    path, start, end, keep = args
    with open(path, "rb") as f:
        try:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # a file system that cannot map it: read it
            return scan_range(reader(f), start, end, keep=keep)
        with mapped:
            return scan_mapped(mapped, start, end, keep=keep, size_now=lambda: os.fstat(f.fileno()).st_size,
                               release=_releaser(mapped, start))


def _releaser(mapped: mmap.mmap, start: int) -> Callable[[int], None]:
    """Unmaps the pages scanned so far (they stay in the page cache): a mapped page counts as the process's own
    memory while it is mapped, and a scan's memory must stay flat in the size of the file."""
    dontneed = getattr(mmap, "MADV_DONTNEED", None)
    done = start - start % mmap.PAGESIZE

    def release(upto: int) -> None:
        nonlocal done
        upto -= upto % mmap.PAGESIZE
        if dontneed is not None and upto > done:
            mapped.madvise(dontneed, done, upto - done)
            done = upto

    return release


def _read_all(f: BinaryIO, path: str, size: int, keep: int = 30) -> LogRead:
    head, head_end = read_head(reader(f), size)
    workers = SCAN_WORKERS or max(1, min(4, os.cpu_count() or 1))
    span = size - head_end
    if span >= PARALLEL_SCAN_MIN and workers > 1:
        from concurrent.futures import ProcessPoolExecutor  # ~10 ms of imports only the scan pays
        from concurrent.futures.process import BrokenProcessPool

        step = span // workers
        ranges = [(path, head_end + i * step, size if i == workers - 1 else head_end + (i + 1) * step, keep)
                  for i in range(workers)]
        # every range in a worker, none in this process: a range is scanned through the file's mapping, and a
        # file cut short under a mapping kills the process reading it (SIGBUS). This one then reads them again
        try:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                parts = list(pool.map(_scan_mapped_range, ranges))
        except BrokenProcessPool:
            parts = [_scan_range(r) for r in ranges]
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
    with open(path, "rb") as f:
        for origin in pending:
            target = origin.offset or 0
            while pos < target:
                chunk = f.read(min(SCAN_BLOCK, target - pos))
                if not chunk:
                    break
                line_no += chunk.count(b"\n")
                pos += len(chunk)
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
