"""The one-pass scanner and the tail that stops on the evidence (bot.core.logread)."""

from __future__ import annotations

import pytest

from bot.core.logread import DEFAULT_GAP_BYTES, Scanner, default_scanner, parse_bytes, read_tail
from tests.support.core_views import spans

ACCESS = b'(APIServer pid=1) INFO:     127.0.0.1:49754 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
ENGINE = (b"(APIServer pid=1) INFO 05-08 16:26:29 [loggers.py:271] Engine 000: Avg prompt throughput: 5.0 tokens/s, "
          b"Avg generation throughput: 124.5 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 7.4%, "
          b"Prefix cache hit rate: 0.0%\n")
SPEC = (b"(APIServer pid=1) INFO 05-08 16:26:29 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
        b"2.00, Accepted: 100 tokens, Drafted: 200 tokens, Per-position acceptance rate: 0.600, 0.400, "
        b"Avg Draft acceptance rate: 50.0%\n")
NCCL = (b"RuntimeError: NCCL error in: x.cpp:1, unhandled system error (run with NCCL_DEBUG=INFO for details)\n")


class Source:
    """An in-memory file that counts what is read of it."""

    def __init__(self, data: bytes) -> None:
        self.data, self.read = data, 0

    def __call__(self, offset: int, size: int) -> bytes:
        self.read += size
        return self.data[offset:offset + size]


def lines_of(buf: bytes) -> list[bytes]:
    return [buf[s:e] for s, e in spans(default_scanner(), buf)]


def test_the_line_under_a_frame_or_an_exception_is_read_as_its_rest() -> None:
    frame = b'  File "/usr/lib/python3.12/site-packages/vllm/entrypoints/llm.py", line 212, in __init__\n'
    code = b"    engine_args = EngineArgs(\n"
    tail = b"TypeError: EngineArgs.__init__() got an unexpected keyword argument 'worker_use_ray'\n"
    parsed = parse_bytes(ACCESS * 5000 + b"Traceback (most recent call last):\n" + frame + code + tail)
    frames = [p for p in parsed.problems if p.kind == "frame"]
    assert len(frames) == 1 and frames[0].source == "engine_args = EngineArgs("
    # and an access line after a needled one is counted, never classified
    assert not parsed.loose


def test_engine_lines_come_only_beside_specdecoding_lines_and_last() -> None:
    buf = ENGINE * 50 + SPEC + ACCESS + ENGINE * 50 + ACCESS * 10 + ENGINE + SPEC + ACCESS + ENGINE * 3 + ACCESS
    got = lines_of(buf)
    e, s, a = ENGINE.rstrip(b"\n"), SPEC.rstrip(b"\n"), ACCESS.rstrip(b"\n")
    # the line after a SpecDecoding line comes too: a terminal may have wrapped it
    assert got == [e, s, a, e, s, a, e]


def test_a_failure_line_is_found_in_one_pass_whatever_the_case() -> None:
    got = lines_of(ACCESS * 100 + NCCL.replace(b"NCCL error", b"nccl ERROR") + ACCESS)
    # the line under it comes too, offered as its rest (a frame's code, a message going on), read only for that
    assert len(got) == 2 and b"unhandled system error" in got[0] and got[1] == ACCESS.rstrip(b"\n")
    parsed = parse_bytes(ACCESS * 3 + NCCL + SPEC)
    assert [e.kind for e in parsed.events] == ["nccl-unhandled-system-error"] and len(parsed.samples) == 1
    assert parsed.events[0].origin.line_no == 4


def test_every_needle_of_the_table_is_in_the_automaton() -> None:
    sc = Scanner()
    assert {n.encode() for n in sc.table.needles} <= set(sc.needles)


def test_the_tail_stops_on_a_window_of_samples() -> None:
    src = Source(ACCESS * 30_000 + (ENGINE + SPEC) * 200)
    t = read_tail(src, len(src.data), samples=30)
    assert t.stopped_by == "window" and len(t.parsed.samples) == 30 and len(t.parsed.engine) == 30
    assert src.read < (1 << 20) + (300 << 10)  # the head and one small block
    assert "the last 30 SpecDecoding samples, a window" in t.notes[0]


def test_the_tail_stops_on_a_gap_after_its_samples() -> None:
    src = Source(SPEC * 5 + ACCESS * 200_000 + ENGINE + SPEC)  # ~18 MB, one sample at the end
    t = read_tail(src, len(src.data))
    assert t.stopped_by == "gap" and len(t.parsed.samples) == 6  # five in the head, one in the tail
    assert src.read < (1 << 20) + DEFAULT_GAP_BYTES + (512 << 10)
    assert "1 SpecDecoding sample, and none in the 2.0 MB before" in t.notes[0]


def test_the_tail_stops_at_its_byte_bound_and_says_so() -> None:
    src = Source(SPEC + ACCESS * 200_000 + NCCL + ACCESS)
    t = read_tail(src, len(src.data), tail_bytes=4 << 20)
    assert t.stopped_by == "bytes" and t.parsed.samples[0].origin is not None  # the head's sample
    assert [e.kind for e in t.parsed.events] == ["nccl-unhandled-system-error"]
    assert any("no SpecDecoding metrics in the last 4.0 MB" in n for n in t.notes)
    assert "the tail's bound" in t.notes[0]


def test_the_tail_stops_at_its_bound_of_lines_parsed() -> None:
    src = Source(ACCESS * 20_000 + NCCL * 100_000)
    t = read_tail(src, len(src.data), max_lines=5_000)
    assert t.stopped_by == "lines" and "5000 lines worth parsing" in t.notes[0]
    assert t.parsed.stats.parsed >= 5_000 and 0 < len(t.parsed.events) <= 2_000  # events kept: first and last


@pytest.mark.parametrize("size", [0, 10, 5000])
def test_a_small_log_is_read_whole(size: int) -> None:
    src = Source((ACCESS * 100 + SPEC)[:size])
    t = read_tail(src, size)
    assert t.mode == "whole" and src.read == size
