"""Reading a vLLM log at the cost of its evidence: one scan per block, a tail that stops on the evidence.

Pure: the bytes come from a `read_at(offset, size)` the caller gives (a local file, an SFTP file), so
the same read serves `specops diagnose --log`, a host over SSH and the benchmark.

**One pass per block.** Every literal a line could be wanted for — the parser's (SpecDecoding, the
start-up banner, arguments) and each failure signature's needles — goes into one Aho-Corasick
automaton (the `ahocorasick_rs` library; a DFA). A block is lower-cased once and scanned once, so
the cost does not grow with the number of signatures. Engine lines are not searched for: vLLM logs
one right before each SpecDecoding line, so the nearest one before each of those is taken, and the
last one in the block — a log of nothing but Engine lines costs what its SpecDecoding lines cost.

**A tail that stops on the evidence.** The head (banner, arguments, launch failures) is read once;
the tail is read backwards in blocks until it holds a window of SpecDecoding samples, or reaches its
byte bound, or has parsed its bound of candidate lines. Whichever bound ends the read is named in
the notes, so a report says what it did not read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

import ahocorasick_rs

from bot.core.failures import FailureTable, default_table
from bot.core.logparse import PARSE_NEEDLES, LineParser, ParsedLog

HEAD_BYTES = 1 << 20  # start-up banner, arguments and launch failures live here
TAIL_BLOCK = 256 << 10  # the tail's first block; each next one is twice as big, up to MAX_TAIL_BLOCK
MAX_TAIL_BLOCK = 2 << 20
DEFAULT_TAIL_BYTES = 8 << 20  # the default bound of the tail: enough for a window at hundreds of requests/s
DEFAULT_GAP_BYTES = 2 << 20  # once samples are found: this much older log without another one ends the read
DEFAULT_MAX_LINES = 50_000  # candidate lines parsed in the tail before it stops (a log of nothing but warnings)
MAX_LINE = 1 << 20

ENGINE_NEEDLE = b"avg prompt throughput"
SPEC_MARK = b"acceptance"  # in every SpecDecoding form; its line may have been wrapped onto the next

ReadAt = Callable[[int, int], bytes]


class Scanner:
    """Finds the lines worth parsing in a block of bytes, in one pass for every needle."""

    def __init__(self, table: FailureTable | None = None) -> None:
        self.table = table or default_table()
        words = {n.lower().encode("utf-8", "replace") for n in (*PARSE_NEEDLES, *self.table.needles)}
        words.discard(ENGINE_NEEDLE)  # Engine lines are found next to SpecDecoding lines, not searched
        self.needles: tuple[bytes, ...] = tuple(sorted(w for w in words if w))
        self._spec = frozenset(i for i, n in enumerate(self.needles) if SPEC_MARK in n or n == b"metrics: ")
        self._automaton = ahocorasick_rs.BytesAhoCorasick(
            list(self.needles), implementation=ahocorasick_rs.Implementation.DFA)

    def spans(self, buf: bytes) -> list[tuple[int, int]]:
        """(start, end) of every line of `buf` to parse, in order: the lines holding a needle, the line after
        a SpecDecoding line (a terminal may have wrapped it), the Engine line before each SpecDecoding line
        and the block's last Engine line."""
        low = buf.lower()
        size = len(low)
        found: dict[int, int] = {}
        spec_lines: list[tuple[int, int]] = []
        line_start, line_end = -1, -1
        for idx, s, _e in self._automaton.find_matches_as_indexes(low):
            if s >= line_end:  # a match in a new line
                line_start = low.rfind(b"\n", 0, s) + 1
                end = low.find(b"\n", s)
                line_end = size if end < 0 else end
                found[line_start] = line_end
            if idx in self._spec and (not spec_lines or spec_lines[-1][0] != line_start):
                spec_lines.append((line_start, line_end))
                if line_end < size:
                    nxt = low.find(b"\n", line_end + 1)
                    found.setdefault(line_end + 1, size if nxt < 0 else nxt)
        prev_end = 0
        for start, end in spec_lines:
            j = low.rfind(ENGINE_NEEDLE, prev_end, start)
            if j >= 0:
                self._line_at(low, j, found)
            prev_end = end
        last = low.rfind(ENGINE_NEEDLE)
        if last >= 0:
            self._line_at(low, last, found)
        return sorted(found.items())

    @staticmethod
    def _line_at(low: bytes, i: int, found: dict[int, int]) -> None:
        end = low.find(b"\n", i)
        found.setdefault(low.rfind(b"\n", 0, i) + 1, len(low) if end < 0 else end)

    def feed(self, parser: LineParser, buf: bytes, base: int, first_line_no: int | None) -> int:
        """Parse the lines of `buf` worth parsing; `base` is its offset in the file. Returns lines fed."""
        line_no = first_line_no
        counted_to = 0
        fed = 0
        for start, end in self.spans(buf):
            if line_no is not None:
                line_no += buf.count(b"\n", counted_to, start)
                counted_to = start
            if end - start > MAX_LINE:
                parser.result.stats.lines += 1
                parser.result.stats.skipped += 1
                continue
            parser.feed(buf[start:end], line_no, base + start)
            fed += 1
        return fed


@lru_cache(maxsize=1)
def default_scanner() -> Scanner:
    return Scanner()


def parse_bytes(buf: bytes, first_line_no: int = 1, scanner: Scanner | None = None) -> ParsedLog:
    """A whole text (a small log, a paste, what a remote step collected) through the scanner."""
    parser = LineParser()
    (scanner or default_scanner()).feed(parser, buf, 0, first_line_no)
    parser.result.stats.lines = buf.count(b"\n") + (0 if buf.endswith(b"\n") or not buf else 1)
    return parser.result


@dataclass
class TailRead:
    size: int
    mode: str  # "whole", "head+tail"
    bytes_read: int
    parsed: ParsedLog
    notes: list[str] = field(default_factory=list)
    stopped_by: str = ""  # "window" | "gap" | "bytes" | "lines" | "start of the log" | "" (read whole)


def mb(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB"


def read_head(read_at: ReadAt, size: int, head_bytes: int = HEAD_BYTES,
              scanner: Scanner | None = None) -> tuple[ParsedLog, int]:
    """The head's lines, numbered from 1, and where the head ends (after its last whole line)."""
    head = read_at(0, head_bytes)
    head_end = head.rfind(b"\n") + 1 if len(head) < size else len(head)
    parser = LineParser()
    (scanner or default_scanner()).feed(parser, head[:head_end], 0, 1)
    parser.result.stats.lines = head.count(b"\n", 0, head_end)
    return parser.result, head_end


def read_tail(read_at: ReadAt, size: int, *, samples: int = 30, tail_bytes: int = DEFAULT_TAIL_BYTES,
              max_lines: int = DEFAULT_MAX_LINES, gap_bytes: int = DEFAULT_GAP_BYTES, head_bytes: int = HEAD_BYTES,
              scanner: Scanner | None = None) -> TailRead:
    """What a diagnosis needs of a log of `size` bytes: the head, and the tail back to the evidence."""
    sc = scanner or default_scanner()
    if size <= head_bytes + min(tail_bytes, TAIL_BLOCK):
        buf = read_at(0, size)
        return TailRead(size, "whole", len(buf), parse_bytes(buf, scanner=sc))
    parsed, head_end = read_head(read_at, size, head_bytes, sc)
    blocks: list[ParsedLog] = []
    pos, carry, found, fed = size, b"", 0, 0
    oldest = -1  # offset of the oldest SpecDecoding sample found
    read = head_end
    stopped_by = "start of the log"
    block_size = TAIL_BLOCK
    while pos > head_end:
        if found >= samples:
            stopped_by = "window"
            break
        if size - pos >= tail_bytes:
            stopped_by = "bytes"
            break
        if found and oldest - pos >= gap_bytes:
            stopped_by = "gap"
            break
        if fed >= max_lines:
            stopped_by = "lines"
            break
        step = min(block_size, pos - head_end, tail_bytes - (size - pos))
        if found:
            step = min(step, max(TAIL_BLOCK, gap_bytes - (oldest - pos)))
        block_size = min(2 * block_size, MAX_TAIL_BLOCK)
        pos -= step
        chunk = read_at(pos, step) + carry
        read += step
        if pos > head_end:
            nl = chunk.find(b"\n")
            if nl < 0:  # one endless line is not vLLM output: drop it
                carry = b"" if len(chunk) > MAX_LINE else chunk
                continue
            carry, chunk = chunk[: nl + 1], chunk[nl + 1:]
            base = pos + nl + 1
        else:
            carry, base = b"", pos
        block = LineParser()
        fed += sc.feed(block, chunk, base, None)
        block.result.stats.lines = chunk.count(b"\n")
        found += len(block.result.samples)
        for sample in block.result.samples[:1]:
            if sample.origin is not None and sample.origin.offset is not None:
                oldest = sample.origin.offset
        blocks.append(block.result)
    for block_log in reversed(blocks):
        parsed.extend(block_log)
    notes: list[str] = []
    if pos > head_end:
        plural = "s" if found != 1 else ""
        why = {"window": f"the last {min(found, samples)} SpecDecoding samples, a window",
               "gap": f"{found} SpecDecoding sample{plural}, and none in the {mb(gap_bytes)} before",
               "bytes": "the tail's bound",
               "lines": f"the bound of {max_lines} lines worth parsing"}.get(stopped_by, stopped_by)
        notes.append(f"read the first {mb(head_end)} and the last {mb(size - pos)} of {mb(size)} ({why}); "
                     "--all reads the whole history")
        if found == 0:
            notes.append(f"no SpecDecoding metrics in the last {mb(size - pos)}")
    parsed.trim(samples)
    return TailRead(size, "head+tail", read, parsed, notes, stopped_by)
