"""Lines nobody explains: levels, exceptions and traceback frames kept with where they came from, and the
two-pass scanner that finds them (and everything else) at the cost of a memory scan (issue 19)."""

from __future__ import annotations

from pathlib import Path

import ahocorasick_rs

from bot.core.logparse import parse_text
from bot.core.logread import Scanner, anchor_patterns, choose_anchors, default_scanner, parse_bytes
from bot.core.parsed_log import PROBLEMS_FIRST, PROBLEMS_LAST, ParsedLog, ProblemLine
from tests.support.core_views import innermost_vllm_frame, spans

ROOT = Path(__file__).resolve().parents[2]
E = "(EngineCore_DP0 pid=412) ERROR 05-08 16:26:29 [core.py:700] "
SITE = "/usr/lib/python3/site-packages"
TB = "".join(f"{E}{line}\n" for line in (
    "EngineCore failed to start.",
    "Traceback (most recent call last):",
    f'  File "{SITE}/vllm/v1/engine/core.py", line 691, in run_engine_core',
    "    engine_core = EngineCoreProc(*args, **kwargs)",
    f'  File "{SITE}/vllm/v1/worker/gpu_model_runner.py", line 301, in get_output',
    f'  File "{SITE}/torch/nn/modules/module.py", line 1751, in _call_impl',
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
)) + "(APIServer pid=1) WARNING 05-08 16:26:30 [api_server.py:88] Something odd happened, continuing\n"


def kinds(parsed: ParsedLog) -> list[str]:
    return [p.kind for p in parsed.problems]


def test_a_traceback_is_grouped_with_the_exception_that_ends_it() -> None:
    parsed = parse_text(TB)
    assert kinds(parsed) == ["level", "frame", "frame", "frame", "exception", "level"]
    first, *frames, exc, warn = parsed.problems
    assert first.origin.level == "ERROR" and first.origin.source_file == "core.py" and first.origin.source_line == 700
    assert first.message == "EngineCore failed to start."
    assert exc.exception == "OutOfMemoryError" and exc.message.startswith("CUDA out of memory")
    assert exc.traceback_id is not None and {f.traceback_id for f in frames} == {exc.traceback_id}
    assert frames[1].frame_file and frames[1].frame_file.endswith("vllm/v1/worker/gpu_model_runner.py")
    assert (frames[1].frame_line, frames[1].frame_function) == (301, "get_output")
    inner = innermost_vllm_frame(parsed.problems, exc.traceback_id)
    assert inner is frames[1]  # torch's frame is deeper, but not vLLM's
    assert warn.origin.level == "WARNING" and warn.traceback_id is None


def test_the_failure_table_claims_what_it_explains() -> None:
    parsed = parse_text(TB)
    oom = parsed.problems[4]
    assert oom.explained_by is not None and oom.explained_by in {e.kind for e in parsed.events}
    assert parsed.problems[-1].explained_by is None


def test_condensed_frames_and_bare_exceptions() -> None:
    text = ("vllm/v1/worker/gpu_model_runner.py:301 get_output\n"
            "vllm/v1/attention/backends/flash_attn.py:88 forward\n"
            "KeyError: 'model.layers.0.mlp'\n"
            "  raise KeyError(name)\n")
    parsed = parse_text(text)
    assert kinds(parsed) == ["frame", "frame", "exception"]
    assert parsed.problems[1].frame_file == "vllm/v1/attention/backends/flash_attn.py"
    assert parsed.problems[2].exception == "KeyError"
    assert parsed.problems[2].traceback_id == parsed.problems[0].traceback_id is not None


def test_tracebacks_of_two_processes_do_not_mix() -> None:
    a = '(EngineCore_DP0 pid=1) ERROR 05-08 16:26:29 [core.py:7] '
    b = '(Worker pid=2) ERROR 05-08 16:26:29 [w.py:9] '
    text = (f"{a}Traceback (most recent call last):\n{b}Traceback (most recent call last):\n"
            f'{a}  File "/x/vllm/a.py", line 1, in f\n{b}  File "/x/vllm/b.py", line 2, in g\n'
            f"{b}ValueError: from b\n{a}RuntimeError: from a\n")
    p = parse_text(text).problems
    by = {x.message: x.traceback_id for x in p if x.kind == "exception"}
    frames = {x.frame_file: x.traceback_id for x in p if x.kind == "frame"}
    assert by["from a"] == frames["/x/vllm/a.py"] != by["from b"] == frames["/x/vllm/b.py"]


def test_problems_keep_the_first_and_the_last() -> None:
    text = "\n".join(f"(APIServer pid=1) WARNING 05-08 16:26:29 [x.py:1] warning number {i}" for i in range(1000))
    parsed = parse_text(text)
    assert parsed.stats.problems_seen == 1000
    assert len(parsed.problems) == PROBLEMS_FIRST + PROBLEMS_LAST
    assert parsed.problems[0].message.endswith(" 0") and parsed.problems[-1].message.endswith(" 999")
    assert parsed.problems[PROBLEMS_FIRST].message.endswith(f" {1000 - PROBLEMS_LAST}")


def test_info_lines_are_not_problems() -> None:
    parsed = parse_text("(APIServer pid=1) INFO 05-08 16:26:29 [x.py:1] vLLM server version 0.20.1, serving model m")
    assert parsed.problems == [] and isinstance(ProblemLine, type)


def test_the_scanner_finds_the_problem_lines_too() -> None:
    access = b'(APIServer pid=1) INFO:     127.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    parsed = parse_bytes(access * 1000 + TB.encode() + access * 1000)
    assert kinds(parsed) == kinds(parse_text(TB))


# --- the two passes find exactly what one pass over the lower-cased text found ---------------------------

def one_pass_lines(sc: Scanner, buf: bytes) -> set[bytes]:
    """The reference: every needle over the lower-cased block (the scanner before issue 19)."""
    automaton = ahocorasick_rs.BytesAhoCorasick(list(sc.needles))
    low = buf.lower()
    out = set()
    for _i, s, _e in automaton.find_matches_as_indexes(low):
        start = buf.rfind(b"\n", 0, s) + 1
        end = buf.find(b"\n", s)
        out.add(buf[start:len(buf) if end < 0 else end])
    return out


def two_pass_lines(sc: Scanner, buf: bytes) -> set[bytes]:
    return {buf[s:e] for s, e in spans(sc, buf)}


def test_every_needle_holds_an_anchor() -> None:
    sc = default_scanner()
    needles = [n.decode() for n in sc.needles]
    assert all(any(a in n for a in sc.anchors) for n in needles)
    assert len(sc.anchors) <= len(needles)


def test_anchors_avoid_the_bulk_of_a_log() -> None:
    anchors = choose_anchors(("avg prompt throughput and something rare", "post /v1/chat/completions zebra"))
    assert not any(a in "avg prompt throughput post /v1/chat/completions" for a in anchors)


def test_two_passes_find_every_line_one_pass_found_on_real_lines() -> None:
    sc = default_scanner()
    texts = [p.read_bytes() for p in sorted((ROOT / "tests" / "fixtures" / "kb").glob("*.txt"))]
    texts += [p.read_bytes() for p in sorted((ROOT / "tests" / "cases").glob("*/log.txt"))]
    assert len(texts) > 50
    for buf in texts:
        missing = one_pass_lines(sc, buf) - two_pass_lines(sc, buf)
        assert not missing, missing


def test_two_passes_in_other_casings() -> None:
    """The first pass looks for each anchor as its needles are printed (the knowledge base's lines, vLLM's and
    Python's words) and lower-cased; the level words in every casing."""
    sc = default_scanner()
    lines = [b"RuntimeError: CUDA error: an illegal memory access was encountered",
             b"Traceback (most recent call last):", b"torch.OutOfMemoryError: CUDA out of memory.",
             b"ValueError: Speculative decoding with draft model is not supported yet"]
    for line in lines:
        for variant in (line, line.lower()):
            assert variant in two_pass_lines(sc, b"x\n" + variant + b"\ny\n"), variant
    for word in (b"ERROR", b"Error", b"error", b"WARNING", b"Warning", b"warning", b"CRITICAL", b"critical"):
        line = b"something " + word + b" here"
        assert line in two_pass_lines(sc, b"x\n" + line + b"\ny\n"), line


def test_one_simd_automaton_takes_the_first_pass() -> None:
    assert len(default_scanner()._first) == 1


def test_over_the_automatons_budget_the_casings_seen_stay() -> None:
    # `vLLM` is none of lower, Capitalised or UPPER: past the budget it must still be looked for
    over = anchor_patterns(["vllm", "rare"], ("vLLM server version", "RARE thing"), budget=1)
    assert b"vLLM" in over and b"vllm" in over and b"RARE" in over
