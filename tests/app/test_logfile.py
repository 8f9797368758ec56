"""Reading logs from disk: head + tail, the full scan, streaming and following a growing file."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bot.app.diagnosis.logfile as logfile
from bot.app.diagnosis.logfile import LineAssembler, read_log
from bot.core.logparse import LineParser, parse_text

ACCESS = '(APIServer pid=13026) INFO:     127.0.0.1:49754 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
ARGS = ("(APIServer pid=13026) INFO 05-08 16:00:00 [api_utils.py:1] non-default args: {'model': 'Qwen/Qwen3.6-27B', "
        "'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 2}}\n")


def spec(i: int, mean_tenths: int = 25) -> str:
    # k = 2, rates r0 >= r1 with r0 + r1 = mean - 1
    mean = mean_tenths / 10
    r0 = min(1.0, (mean - 1) * 0.6)
    r1 = (mean - 1) - r0
    drafts = 100
    acc = round((mean - 1) * drafts)
    return (f"(APIServer pid=13026) INFO 05-08 16:{i // 60 % 60:02d}:{i % 60:02d} [metrics.py:101] SpecDecoding "
            f"metrics: Mean acceptance length: {mean:.2f}, Accepted throughput: 1.00 tokens/s, Drafted throughput: "
            f"2.00 tokens/s, Accepted: {acc} tokens, Drafted: {2 * drafts} tokens, Per-position acceptance rate: "
            f"{r0:.3f}, {r1:.3f}, Avg Draft acceptance rate: {100 * acc / (2 * drafts):.1f}%\n")


def engine(i: int) -> str:
    return (f"(APIServer pid=13026) INFO 05-08 16:{i // 60 % 60:02d}:{i % 60:02d} [loggers.py:271] Engine 000: Avg "
            "prompt throughput: 1.0 tokens/s, Avg generation throughput: 70.0 tokens/s, Running: 1 reqs, Waiting: "
            "0 reqs, GPU KV cache usage: 5.0%, Prefix cache hit rate: 0.0%\n")


def build_log(path: Path, filler_bytes: int, middle: list[str], tail: list[str]) -> None:
    block = ACCESS * 1000
    with open(path, "w") as f:
        f.write(ARGS)
        written = 0
        half = filler_bytes // 2
        while written < half:
            f.write(block)
            written += len(block)
        f.writelines(middle)
        while written < filler_bytes:
            f.write(block)
            written += len(block)
        f.writelines(tail)


@pytest.fixture
def big_log(tmp_path: Path) -> Path:
    path = tmp_path / "vllm.log"
    middle = [engine(1) + spec(1, 30), "RuntimeError: NCCL error in: x.cpp:1, unhandled system error (run with "
              "NCCL_DEBUG=INFO for details)\n"]
    tail = [engine(i) + spec(i, 20 + i % 5) for i in range(10, 50)]
    build_log(path, 6 << 20, middle, tail)
    return path


def test_head_and_tail_read_costs_the_tail_not_the_file(big_log: Path) -> None:
    r = read_log(big_log, samples=5)
    assert r.mode == "head+tail"
    assert len(r.parsed.samples) == 5
    assert r.bytes_read < 2 * logfile.HEAD_BYTES  # 6 MiB file: head + a block or two of tail
    assert [s.mean_acceptance_length for s in r.parsed.samples] == [2.0 + (i % 5) / 10 for i in range(45, 50)]
    assert any(c.kind == "args" for c in r.parsed.clues)  # from the head
    assert r.parsed.samples[-1].origin is not None and r.parsed.samples[-1].origin.stamp is not None
    assert r.parsed.samples[-1].origin.stamp.year is not None
    assert any("--all" in n for n in r.notes)


def test_full_scan_finds_the_middle_with_line_numbers(big_log: Path) -> None:
    r = read_log(big_log, full=True, samples=50)
    assert r.mode == "all"
    means = [s.mean_acceptance_length for s in r.parsed.samples]
    assert means[0] == 3.0 and len(means) == 41
    assert len(r.parsed.engine) == 41
    nccl = [e for e in r.parsed.events if e.kind == "nccl-unhandled-system-error"]
    assert len(nccl) == 1
    lines = big_log.read_bytes().split(b"\n")
    assert nccl[0].origin.line_no is not None
    assert b"NCCL error" in lines[nccl[0].origin.line_no - 1]


def test_full_scan_in_parallel_matches_in_process(big_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serial = read_log(big_log, full=True)
    monkeypatch.setattr(logfile, "PARALLEL_SCAN_MIN", 1 << 20)
    monkeypatch.setattr(logfile, "SCAN_WORKERS", 2)  # parallel even on a one-core machine
    pools: list[int] = []
    import concurrent.futures

    real_pool = concurrent.futures.ProcessPoolExecutor

    def counting_pool(*args: object, **kwargs: object) -> object:
        pools.append(1)
        return real_pool(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", counting_pool)
    parallel = read_log(big_log, full=True)
    assert pools, "the parallel scan did not run"
    assert [s.mean_acceptance_length for s in parallel.parsed.samples] == [
        s.mean_acceptance_length for s in serial.parsed.samples]
    assert [e.origin.line_no for e in parallel.parsed.events] == [e.origin.line_no for e in serial.parsed.events]


def test_no_metrics_in_the_tail_budget_says_so(tmp_path: Path) -> None:
    path = tmp_path / "idle.log"
    build_log(path, 4 << 20, [], [])
    r = read_log(path, tail_budget=1 << 20)
    assert r.parsed.samples == []
    assert any("no SpecDecoding metrics in the last" in n for n in r.notes)
    assert r.bytes_read < 3 << 20


def test_small_file_is_read_whole_with_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "small.log"
    path.write_text(ARGS + ACCESS + spec(1))
    r = read_log(path)
    assert r.mode == "whole" and r.parsed.samples[0].origin is not None
    assert r.parsed.samples[0].origin.line_no == 3


def test_endless_line_without_newline_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "endless.log"
    with open(path, "wb") as f:
        f.write(ARGS.encode())
        f.write(b"x" * (3 << 20))
        f.write(b"\n" + spec(7).encode())
    r = read_log(path)
    assert len(r.parsed.samples) == 1


def test_line_assembler_bounds_partial_lines() -> None:
    a = LineAssembler(max_line=10)
    assert a.feed(b"abc") == []
    assert a.feed(b"def\nxy") == [b"abcdef"]
    assert a.feed(b"z" * 20) == [] and a.dropped == 1
    assert a.flush() == []


TEXT = ARGS + ACCESS + engine(3) + spec(3) + "garbage \xff line\n" + spec(4, 28) + engine(5) + spec(5, 12)


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(TEXT.encode())), max_size=12))
def test_chunks_from_a_channel_give_the_same_result_for_any_chunking(cuts: list[int]) -> None:
    data = TEXT.encode()
    assembler, parser = LineAssembler(), LineParser()
    prev = 0
    for cut in [*sorted(cuts), len(data)]:
        for line in assembler.feed(data[prev:cut]):
            parser.feed(line)
        prev = cut
    for line in assembler.flush():
        parser.feed(line)
    whole = parse_text(TEXT)
    assert [s.mean_acceptance_length for s in parser.result.samples] == [
        s.mean_acceptance_length for s in whole.samples]
    assert len(whole.samples) == 3



def test_the_whole_log_scan_keeps_the_last_samples_and_counts_all(tmp_path: Path) -> None:
    """Memory flat in the number of matching lines: the counts of every sample, the last ones kept."""
    path = tmp_path / "many.log"
    with open(path, "w") as f:
        f.write(ARGS)
        for i in range(20_000):
            f.write(spec(1 + i % 3, 25))
        f.write("RuntimeError: NCCL error in: x.cpp:1, unhandled system error\n")
    r = read_log(path, full=True, samples=30)
    assert len(r.parsed.samples) == 30 and r.parsed.stats.samples_seen == 20_000
    assert any("20000 SpecDecoding samples in the whole log" in n for n in r.notes)
    assert [e.kind for e in r.parsed.events] == ["nccl-unhandled-system-error"]
