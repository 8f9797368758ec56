"""Reading a vLLM log at the cost of its evidence: one scan per block, a tail that stops on the evidence.

Pure: the bytes come from a `read_at(offset, size)` the caller gives (a local file, an SFTP file), so
the same read serves `specops diagnose --log`, a host over SSH and the benchmark; the whole-log scan of
a local file reads the buffer the caller mapped it into instead (`scan_mapped`).

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

import heapq
import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import ahocorasick_rs

from bot.core.failures import FailureTable, default_table
from bot.core.line_kinds import PARSE_CASINGS, PARSE_NEEDLES, PYDANTIC_LINES, PYDANTIC_NEEDLE
from bot.core.logparse import LineParser
from bot.core.parsed_log import ParsedLog

HEAD_BYTES = 1 << 20  # start-up banner, arguments and launch failures live here
TAIL_BLOCK = 256 << 10  # the tail's first block; each next one is twice as big, up to MAX_TAIL_BLOCK
MAX_TAIL_BLOCK = 2 << 20
DEFAULT_TAIL_BYTES = 8 << 20  # the default bound of the tail: enough for a window at hundreds of requests/s
DEFAULT_GAP_BYTES = 2 << 20  # once samples are found: this much older log without another one ends the read
DEFAULT_MAX_LINES = 50_000  # candidate lines parsed in the tail before it stops (a log of nothing but warnings)
MAX_LINE = 1 << 20

ENGINE_NEEDLE = b"avg prompt throughput"
# vLLM prints it in this case in every release: found in the raw bytes, never lower-cased
ENGINE_RAW = b"prompt throughput"
SPEC_MARK = b"acceptance"  # in every SpecDecoding form; its line may have been wrapped onto the next

ReadAt = Callable[[int, int], bytes]
if TYPE_CHECKING:
    from typing import Protocol

    from typing_extensions import Buffer

    class Buf(Buffer, Protocol):
        """What the scanner reads: a block read (bytes), or a local file's mapping (`scan_mapped`)."""

        def __len__(self) -> int: ...
        def __getitem__(self, index: slice, /) -> bytes: ...
        def find(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...
        def rfind(self, sub: bytes, start: int = ..., end: int = ..., /) -> int: ...

# Words of the lines a log is mostly made of (Uvicorn access lines, Engine lines, routine INFO lines): an
# anchor of the first pass must not be one of them, or every such line goes through the second pass.
BULK_WORDS = (
    '(apiserver pid=1) info:     127.0.0.1:1 - "post /v1/chat/completions http/1.1" 200 ok '
    '"get /metrics http/1.1" "get /health http/1.1" '
    "engine 000: avg prompt throughput: 5.0 tokens/s, avg generation throughput: 1.0 tokens/s, running: 1 reqs, "
    "waiting: 0 reqs, gpu kv cache usage: 7.4%, prefix cache hit rate: 0.0% "
    "info 05-08 16:26:29 [loggers.py:271] added request chatcmpl-1. finished request"
)
TEDDY_MAX = 64  # patterns per leftmost-first automaton that the SIMD (Teddy) prefilter still takes


def choose_anchors(needles: tuple[str, ...], bulk: str = BULK_WORDS) -> list[str]:
    """A few short words such that every needle holds one, none of them in the bulk of a log: the first pass
    looks for these only (a SIMD search at memory speed), the full automaton then reads the lines they find.

    A greedy set cover over the letter runs (4 letters and more) of the needles; a needle no such run covers
    is its own anchor."""
    # this runs on every start: the needles a word is in as bits, each word's runs cut once
    held: dict[str, int] = {}
    for i, n in enumerate(needles):
        for word in re.findall(r"[a-z]{4,}", n):
            held[word] = held.get(word, 0) | 1 << i
    covers: dict[str, int] = {}  # candidate -> the needles holding it
    for word, bits in held.items():
        for size in range(4, min(len(word), 10) + 1):
            for j in range(len(word) - size + 1):
                a = word[j:j + size]
                covers[a] = covers.get(a, 0) | bits
    in_bulk = {bulk[j:j + k] for k in range(4, 11) for j in range(len(bulk) - k + 1)}  # every candidate's length
    # of the candidates held by the same needles only the first in the greedy's order (longest, then first
    # alphabetically) can be chosen: the others always tie with it, then cover nothing
    best: dict[int, str] = {}
    for a, c in covers.items():
        if a not in in_bulk:
            top = best.get(c)
            if top is None or (-len(a), a) < (-len(top), top):
                best[c] = a
    # lazy greedy: a candidate's count only falls as needles get covered, so a stale top is re-scored, not all
    heap = [(-c.bit_count(), -len(a), a, c) for c, a in best.items()]
    heapq.heapify(heap)
    left = (1 << len(needles)) - 1
    chosen: list[str] = []
    while left and heap:
        _neg, neg_len, a, c = heapq.heappop(heap)
        count = (c & left).bit_count()
        if count == 0:
            continue
        if heap and (-count, neg_len, a) > heap[0][:3]:
            heapq.heappush(heap, (-count, neg_len, a, c))
            continue
        chosen.append(a)
        left &= ~c
    return chosen + sorted(n for i, n in enumerate(needles) if left >> i & 1)


def _variants(anchor: str) -> list[bytes]:
    """The casings a log prints a word in: lower, Capitalised (also inside CamelCase), UPPER."""
    return [v.encode("utf-8", "replace") for v in dict.fromkeys((anchor, anchor.capitalize(), anchor.upper()))]


def anchor_patterns(anchors: list[str], cased: tuple[str, ...], budget: int = TEDDY_MAX) -> list[bytes]:
    """Each anchor in the casings its needles are printed in (`cased`: the knowledge base's patterns and the
    parser's words as written), then — while one SIMD automaton still takes them — Capitalised and UPPER too.
    Over the budget every anchor gets all three casings, in as many automata as that takes."""
    seen: dict[str, set[str]] = {a: {a} for a in anchors}
    for text in cased:
        low = text.lower()
        for a in anchors:
            i = low.find(a)
            while i >= 0:
                seen[a].add(text[i:i + len(a)])
                i = low.find(a, i + 1)
    out = [v for a in anchors for v in sorted(seen[a])]
    if len(out) > budget:
        # (the casings seen stay: `vLLM` is none of lower, Capitalised or UPPER)
        return list(dict.fromkeys(v for a in anchors for v in [*(x.encode("utf-8", "replace") for x in sorted(seen[a])),
                                                                *_variants(a)]))
    for a in anchors:  # the most covering first: `choose_anchors` returns them in that order
        for v in (a.capitalize(), a.upper()):
            if v not in seen[a] and len(out) < budget:
                seen[a].add(v)
                out.append(v)
    return [v.encode("utf-8", "replace") for v in dict.fromkeys(out)]


class Scanner:
    """Finds the lines worth parsing in a block of bytes, in two passes whatever the number of needles.

    First pass: a few anchors (`choose_anchors`) in every casing, on the raw bytes, through leftmost-first
    automata small enough for the SIMD prefilter: memory speed, no lower-casing of the block. Second pass: the
    lines the anchors found, joined and lower-cased once, through the automaton of every needle; only the
    lines that hold a needle are parsed."""

    def __init__(self, table: FailureTable | None = None) -> None:
        self.table = table or default_table()
        words = {n.lower().encode("utf-8", "replace") for n in (*PARSE_NEEDLES, *self.table.needles)}
        words.discard(ENGINE_NEEDLE)  # Engine lines are found next to SpecDecoding lines, not searched
        self.needles: tuple[bytes, ...] = tuple(sorted(w for w in words if w and b"\n" not in w))
        self._spec = frozenset(i for i, n in enumerate(self.needles) if SPEC_MARK in n or n == b"metrics: ")
        # pydantic's detail line: the line before it names the field that failed
        self._detail = frozenset(i for i, n in enumerate(self.needles) if n == PYDANTIC_NEEDLE.encode())
        self._automaton = ahocorasick_rs.BytesAhoCorasick(
            list(self.needles), implementation=ahocorasick_rs.Implementation.DFA)
        self.anchors = choose_anchors(tuple(n.decode("utf-8", "replace") for n in self.needles))
        cased = (*PARSE_CASINGS, *(p for sig in self.table.signatures for p in sig.sources))
        patterns = anchor_patterns(self.anchors, cased)
        self._first = [ahocorasick_rs.BytesAhoCorasick(patterns[i:i + TEDDY_MAX],
                                                       matchkind=ahocorasick_rs.MatchKind.LeftmostFirst)
                       for i in range(0, len(patterns), TEDDY_MAX)]

    def candidates(self, buf: Buf, lo: int = 0, hi: int | None = None) -> list[tuple[int, int]]:
        """(start, end) of every line of buf[lo:hi] holding an anchor, in order (`lo` and `hi` at line starts)."""
        size = len(buf) if hi is None else hi
        found: dict[int, int] = {}
        # only [lo, hi) is searched: `buf` may be a whole file's mapping. No anchor holds a newline, so no match
        # crosses `lo` or `hi` (line starts), and the matches in between are those of the whole buffer
        with memoryview(buf) as whole, whole[lo:size] as view:
            for automaton in self._first:
                line_end = -1
                for _idx, s, _e in automaton.find_matches_as_indexes(view):
                    s += lo
                    if s < line_end:
                        continue
                    start = buf.rfind(b"\n", lo, s) + 1 or lo
                    end = buf.find(b"\n", s, size)
                    line_end = size if end < 0 else end
                    found[start] = line_end
        return sorted(found.items())

    def marked_spans(self, buf: Buf, lo: int = 0, hi: int | None = None) -> list[tuple[int, int, bool]]:
        """`spans`, each with whether it is there only as the possible rest of a wrapped SpecDecoding line:
        such a line is read for that alone, not classified (most are the next access line)."""
        size = len(buf) if hi is None else hi
        cands = self.candidates(buf, lo, size)
        found: dict[int, int] = {}
        needled: set[int] = set()
        after: set[int] = set()
        spec_lines: list[tuple[int, int]] = []
        if cands:
            joined = b"\n".join(buf[s:e] for s, e in cands).lower()
            starts: list[int] = []
            at = 0
            for s, e in cands:
                starts.append(at)
                at += e - s + 1
            last = -1
            for idx, m, _e in self._automaton.find_matches_as_indexes(joined):
                i = bisect_right(starts, m) - 1
                line_start, line_end = cands[i]
                if i != last:
                    found[line_start] = line_end
                    needled.add(line_start)
                    last = i
                    if line_end < size:
                        # the line below a needled one, offered as its continuation (a frame's code line, an
                        # exception's message going on): the parser takes it only when the line above left it open
                        nxt = buf.find(b"\n", line_end + 1, size)
                        found.setdefault(line_end + 1, size if nxt < 0 else nxt)
                        after.add(line_end + 1)
                if idx in self._detail:
                    nxt_start = line_end + 1
                    for _ in range(PYDANTIC_LINES):
                        if nxt_start >= size:
                            break
                        nxt = buf.find(b"\n", nxt_start, size)
                        found.setdefault(nxt_start, size if nxt < 0 else nxt)
                        nxt_start = size if nxt < 0 else nxt + 1
                if idx in self._spec and (not spec_lines or spec_lines[-1][0] != line_start):
                    spec_lines.append((line_start, line_end))
                    if line_end < size:
                        nxt = buf.find(b"\n", line_end + 1, size)
                        found.setdefault(line_end + 1, size if nxt < 0 else nxt)
                        after.add(line_end + 1)
        engines: set[int] = set()
        prev_end = lo
        for start, end in spec_lines:
            j = buf.rfind(ENGINE_RAW, prev_end, start)
            if j >= 0:
                engines.add(self._line_at(buf, j, found, lo, size))
            prev_end = end
        last_engine = buf.rfind(ENGINE_RAW, lo, size)
        if last_engine >= 0:
            engines.add(self._line_at(buf, last_engine, found, lo, size))
        only = after - needled - engines
        return [(s, e, s in only) for s, e in sorted(found.items())]

    @staticmethod
    def _line_at(buf: Buf, i: int, found: dict[int, int], lo: int, hi: int) -> int:
        end = buf.find(b"\n", i, hi)
        start = buf.rfind(b"\n", lo, i) + 1 or lo
        found.setdefault(start, hi if end < 0 else end)
        return start

    def feed(self, parser: LineParser, buf: Buf, base: int, first_line_no: int | None,
             lo: int = 0, hi: int | None = None) -> int:
        """Parse the lines of buf[lo:hi] worth parsing; `base` is the offset of buf[0] in the file and
        `first_line_no` the number of the line at `lo`. Returns lines fed."""
        line_no = first_line_no
        counted_to = lo
        fed = 0
        for start, end, only in self.marked_spans(buf, lo, hi):
            if line_no is not None:
                line_no += (buf.count(b"\n", counted_to, start) if isinstance(buf, bytes)
                            else buf[counted_to:start].count(b"\n"))  # a mapping has no count()
                counted_to = start
            if end - start > MAX_LINE:
                parser.result.stats.lines += 1
                parser.result.stats.skip(buf[start:start + 300].decode("utf-8", "replace"))
                continue
            if only:
                parser.feed_continuation(buf[start:end], line_no, base + start)
            else:
                parser.feed(buf[start:end], line_no, base + start)
            fed += 1
        return fed


@lru_cache(maxsize=1)
def default_scanner() -> Scanner:
    return Scanner()


# a stack dump's thread headers (faulthandler's, py-spy's) and py-spy's frames carry no needle the scanner looks for
_PYSPY_HEAD = re.compile(rb"(?m)^Thread (?:0x[0-9A-Fa-f]{1,16}|\d{1,10}) \((?:active|idle)")


# a text this small (a paste, an attached or short log) is read line by line like a paste (diagnose_text), not
# through the scanner's needles: its report is the one `specops eval` scores, whichever way it arrived. The needles
# pay for themselves on bigger logs, where a line no needle finds (a bare line the atlas knows) is not read
WHOLE_READ_BYTES = 256 << 10


def parse_bytes(buf: bytes, first_line_no: int = 1, scanner: Scanner | None = None) -> ParsedLog:
    """A whole text (a small log, a paste, what a remote step collected) through the scanner — or every line of it
    when it holds a stack dump, whose headers the scanner's needles do not find (someone is chasing a hang or a
    crash; the scanner's first pass stays one automaton: no needle is added for them)."""
    parser = LineParser()
    # (the literals first: memchr speed on a big buffer, the regex only where one is)
    if len(buf) <= WHOLE_READ_BYTES or b"most recent call first" in buf or \
            (b"Thread " in buf and _PYSPY_HEAD.search(buf)):
        at = 0
        for n, line in enumerate(buf.split(b"\n"), start=first_line_no):
            if line or at < len(buf):
                parser.feed(line, n, at)
            at += len(line) + 1
    else:
        (scanner or default_scanner()).feed(parser, buf, 0, first_line_no)
    parser.result.stats.lines = buf.count(b"\n") + (0 if buf.endswith(b"\n") or not buf else 1)
    return parser.result


SCAN_BLOCK = 8 << 20  # the whole-log scan reads this much at a time


def scan_range(read_at: ReadAt, start: int, end: int, *, keep: int = 30, scanner: Scanner | None = None,
               block: int = SCAN_BLOCK) -> ParsedLog:
    """Every line worth parsing that *starts* in [start, end) of a file (the line `start` cuts belongs to the
    range before; the line `end` cuts is finished), keeping the last `keep` samples and every count: memory
    stays flat in the number of matching lines. Each block is scanned where it was read, never copied: only
    the one line that straddles two blocks is joined."""
    sc = scanner or default_scanner()
    parser = LineParser(keep=keep)
    pos = start
    if pos > 0 and read_at(pos - 1, 1) != b"\n":
        while True:  # skip the rest of the line the range starts inside
            chunk = read_at(pos, 64 << 10)
            nl = chunk.find(b"\n")
            if not chunk:
                return parser.result
            if nl >= 0:
                pos += nl + 1
                break
            pos += len(chunk)
    carry, carry_at = b"", pos
    while pos < end:
        data = read_at(pos, min(block, end - pos))
        if not data:
            break
        at, pos = pos, pos + len(data)
        lo = 0
        if carry:
            nl = data.find(b"\n")
            if nl < 0:
                carry = b"" if len(carry) + len(data) > MAX_LINE else carry + data  # an endless line: not vLLM's
                continue
            sc.feed(parser, carry + data[:nl + 1], carry_at, None)
            carry, lo = b"", nl + 1
        if pos >= end:
            hi = data.rfind(b"\n") + 1 if not data.endswith(b"\n") else len(data)
            if hi < lo:
                hi = lo
            sc.feed(parser, data, at, None, lo, hi)
            if hi < len(data):  # finish the line the range ends in
                rest = data[hi:]
                while not rest.endswith(b"\n") and len(rest) <= MAX_LINE:
                    more = read_at(at + hi + len(rest), 64 << 10)
                    if not more:
                        break
                    nl = more.find(b"\n")
                    rest += more if nl < 0 else more[:nl + 1]
                sc.feed(parser, rest, at + hi, None)
            break
        hi = data.rfind(b"\n") + 1
        if hi <= lo:
            carry, carry_at = data[lo:], at + lo
            continue
        sc.feed(parser, data, at, None, lo, hi)
        carry, carry_at = data[hi:], at + hi
    if carry:
        sc.feed(parser, carry, carry_at, None)
    parser.result.trim(keep)
    return parser.result


def scan_mapped(buf: Buf, start: int, end: int, *, keep: int = 30, scanner: Scanner | None = None,
                block: int = SCAN_BLOCK, size_now: Callable[[], int] | None = None,
                release: Callable[[int], None] | None = None) -> ParsedLog:
    """`scan_range` over a buffer that holds the whole file (a local file's mapping): the same blocks, the same
    lines, offsets and bounds, but each block is scanned in the page cache instead of read into a copy of it
    first (the copy was a third of the scan's memory traffic; with both cores scanning, memory is what they
    share). `size_now()`: the file's size, asked before each block, so a file truncated under the scan ends it
    there as a short read ends `scan_range` (a mapped page past the end of a file is a SIGBUS, not an error).
    `release(upto)`: told when nothing before file offset `upto` will be read again."""
    sc = scanner or default_scanner()
    parser = LineParser(keep=keep)
    size = min(len(buf), size_now()) if size_now else len(buf)
    pos = start
    if 0 < pos < size and buf[pos - 1:pos] != b"\n":  # skip the rest of the line the range starts inside
        nl = buf.find(b"\n", pos, size)
        if nl < 0:
            return parser.result
        pos = nl + 1
    # the carry (the line a block ends inside) is buf[carry_at:pos] while carrying; scan_range's copy of it
    carrying, carry_at = False, pos
    while pos < end:
        at = pos
        if size_now is not None:
            size = min(len(buf), size_now())
        pos = min(at + block, end, size)
        if pos <= at:
            pos = at
            break
        lo = at
        if carrying:
            nl = buf.find(b"\n", at, pos)
            if nl < 0:
                if pos - carry_at > MAX_LINE:  # an endless line: not vLLM's
                    carrying = False
                continue
            sc.feed(parser, buf, 0, None, carry_at, nl + 1)
            carrying, lo = False, nl + 1
        hi = buf.rfind(b"\n", at, pos) + 1 or at  # after the block's last newline
        if pos >= end:
            hi = max(hi, lo)
            sc.feed(parser, buf, 0, None, lo, hi)
            if hi < pos:  # finish the line the range ends in, as far as scan_range reads for it
                rest_end = pos
                while rest_end - hi <= MAX_LINE:
                    more_end = min(rest_end + (64 << 10), size)
                    if more_end <= rest_end:
                        break
                    nl = buf.find(b"\n", rest_end, more_end)
                    rest_end = more_end if nl < 0 else nl + 1
                    if nl >= 0:
                        break
                sc.feed(parser, buf, 0, None, hi, rest_end)
            break
        if hi <= lo:
            carrying, carry_at = lo < pos, lo
            continue
        sc.feed(parser, buf, 0, None, lo, hi)
        carrying, carry_at = hi < pos, hi
        if release is not None:
            release(carry_at if carrying else pos)
    if carrying and pos <= size:  # unless the file was cut under it
        sc.feed(parser, buf, 0, None, carry_at, pos)
    parser.result.trim(keep)
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
