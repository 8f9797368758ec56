"""Parsing every documented form of vLLM's metrics lines, failure strings and /metrics text."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

import pytest

from bot.core.logparse import LineParser, parse_lines, parse_text
from bot.core.metrics_lines import parse_engine_message, parse_spec_message
from bot.core.parsed_log import Stamp, resolve_log_years, resolve_years

MTP_0201 = (
    "(APIServer pid=13026) INFO 05-08 16:26:29 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 4.74, "
    "Accepted throughput: 98.70 tokens/s, Drafted throughput: 158.40 tokens/s, Accepted: 987 tokens, Drafted: 1584 "
    "tokens, Per-position acceptance rate: 0.917, 0.837, 0.648, 0.538, 0.451, 0.348, Avg Draft acceptance rate: 62.3%"
)
NGRAM_0320 = (
    "(APIServer pid=26966) INFO 11-29 18:09:16 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.61, "
    "Accepted throughput: 16.72 tokens/s, Drafted throughput: 30.41 tokens/s, Accepted: 177 tokens, Drafted: 322 "
    "tokens, Per-position acceptance rate: 0.809, 0.509, 0.291, Avg Draft acceptance rate: 55.0%"
)
ENGINE_0320 = (
    "(APIServer pid=26966) INFO 11-29 18:09:16 [loggers.py:335] Engine 000: Avg prompt throughput: 10.7 tokens/s, "
    "Avg generation throughput: 46.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.0%, "
    "Prefix cache hit rate: 0.0%"
)


def test_form_b_real_line() -> None:
    s = parse_text(MTP_0201).samples[0]
    assert s.form == "B"
    assert s.mean_acceptance_length == 4.74
    assert (s.accepted, s.drafted) == (987, 1584)
    assert s.per_position == [0.917, 0.837, 0.648, 0.538, 0.451, 0.348]
    assert s.avg_draft_acceptance_rate == 62.3
    assert s.num_drafts == 264  # drafted / k
    assert s.origin is not None and s.origin.pid == 13026 and s.origin.proc == "APIServer"
    assert s.origin.source_file == "metrics.py" and s.origin.source_line == 101


def test_form_a() -> None:
    line = ("INFO 06-01 10:00:00 [metrics.py:87] SpecDecoding metrics: Draft acceptance rate: 50.0%, "
            "Mean acceptance length: 2.50, Accepted: 300 tokens, Drafted: 600 tokens, "
            "Per-position acceptance rate: 0.800, 0.500, 0.200")
    s = parse_text(line).samples[0]
    assert s.form == "A" and s.mean_acceptance_length == 2.5 and s.per_position == [0.8, 0.5, 0.2]


def test_form_a_085_without_bonus_token_is_normalised() -> None:
    # 0.8.5 printed accepted/drafts (no "1 +"): 1.50 == sum of the rates
    line = ("INFO 04-01 10:00:00 [metrics.py:82] SpecDecoding metrics: Draft acceptance rate: 50.0%, "
            "Mean acceptance length: 1.50, Accepted: 300 tokens, Drafted: 600 tokens, "
            "Per-position acceptance rate: 0.800, 0.500, 0.200")
    s = parse_text(line).samples[0]
    assert s.mean_acceptance_length == pytest.approx(2.5)


def test_v0_speculative_metrics() -> None:
    line = ("INFO 01-10 10:00:00 [metrics.py:455] Speculative metrics: Draft acceptance rate: 0.651, "
            "System efficiency: 0.570, Number of speculative tokens: 4, Number of accepted tokens: 2604, "
            "Number of draft tokens: 4000, Number of emitted tokens: 3420.")
    s = parse_text(line).samples[0]
    assert s.form == "V0" and s.cumulative
    assert s.avg_draft_acceptance_rate == pytest.approx(65.1)
    assert s.mean_acceptance_length == pytest.approx(1 + 2604 / 1000)


def test_nan_rate_when_nothing_drafted() -> None:
    line = ("SpecDecoding metrics: Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, Drafted "
            "throughput: 0.00 tokens/s, Accepted: 0 tokens, Drafted: 0 tokens, Per-position acceptance rate: "
            "0.000, 0.000, Avg Draft acceptance rate: nan%")
    s = parse_text(line).samples[0]
    assert math.isnan(s.avg_draft_acceptance_rate or 0.0)


def test_ansi_colour_and_debug_paths_and_prefix() -> None:
    coloured = ("\x1b[36m(APIServer pid=5)\x1b[0m \x1b[32mDEBUG\x1b[0m 05-08 16:26:29 "
                "[v1/spec_decode/metrics.py:101] " + MTP_0201.split("] ", 1)[1])
    r = parse_text(coloured)
    assert r.samples and r.samples[0].origin is not None
    assert r.samples[0].origin.source_file == "v1/spec_decode/metrics.py"
    prefixed = "myhost " + MTP_0201  # VLLM_LOGGING_PREFIX
    assert parse_text(prefixed).samples[0].mean_acceptance_length == 4.74
    untagged = MTP_0201.split(") ", 1)[1]  # VLLM_CONFIGURE_LOGGING=0 drops the process tag
    assert parse_text(untagged).samples[0].origin.pid is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("body", "expect"),
    [
        # 0.8.5-0.11.0
        ("Engine 000: Avg prompt throughput: 5.0 tokens/s, Avg generation throughput: 124.5 tokens/s, Running: 1 "
         "reqs, Waiting: 0 reqs, GPU KV cache usage: 7.4%, Prefix cache hit rate: 0.0%",
         {"generation_tps": 124.5, "running": 1, "kv_cache_usage": 7.4, "kv_cache_device": "GPU", "engine": 0}),
        # 0.20+: Deferred and Preemptions only when > 0
        ("Engine 001: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 88.1 tokens/s, Running: 9 "
         "reqs, Waiting: 3 reqs, Deferred: 2 reqs, Preemptions: 4, GPU KV cache usage: 97.5%, Prefix cache hit "
         "rate: 12.5%", {"running": 9, "waiting": 3, "engine": 1, "kv_cache_usage": 97.5}),
        # 0.30+ CPU, 0.31+ without prefix cache part, 0.33 KV fetch
        ("Engine 000: Avg prompt throughput: 10.7 tokens/s, Avg generation throughput: 46.0 tokens/s, Running: 0 "
         "reqs, Waiting: 0 reqs, CPU KV cache usage: 0.0%, KV fetch: 3 blocks in 0.2 s",
         {"kv_cache_device": "CPU", "prefix_cache_hit_rate": None}),
        # data-parallel aggregated
        ("2 Engines Aggregated: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 200.0 tokens/s, "
         "Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 10.0%, Prefix cache hit rate: 0.0%",
         {"engines_aggregated": 2, "engine": None, "generation_tps": 200.0}),
        # V0
        ("Avg prompt throughput: 3.0 tokens/s, Avg generation throughput: 40.0 tokens/s, Running: 2 reqs, "
         "Swapped: 0 reqs, Pending: 1 reqs, GPU KV cache usage: 5.5%, CPU KV cache usage: 0.0%.",
         {"kv_cache_usage": 5.5, "kv_cache_device": "GPU", "running": 2}),
    ],
)
def test_engine_line_variants(body: str, expect: dict[str, object]) -> None:
    e = parse_engine_message(body)
    assert e is not None
    for key, value in expect.items():
        assert getattr(e, key) == value, key


def test_real_cpu_lines() -> None:
    r = parse_text(ENGINE_0320 + "\n" + NGRAM_0320)
    assert r.engine[0].kv_cache_device == "CPU" and r.engine[0].generation_tps == 46.0
    assert r.samples[0].per_position == [0.809, 0.509, 0.291]


def test_context_clues() -> None:
    text = "\n".join([
        "(APIServer pid=18263) INFO 11-29 17:51:04 [api_utils.py:286] non-default args: {'model_tag': "
        "'/srv/models/tiny-model', 'host': '127.0.0.1', 'port': 18000, 'model': '/srv/models/tiny-model', "
        "'speculative_config': {'method': 'ngram', 'num_speculative_tokens': 3}}",
        "(EngineCore pid=18712) INFO 11-29 17:51:16 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: "
        "model='/srv/models/tiny-model', speculative_config=SpeculativeConfig(method='ngram', model=None, "
        "num_spec_tokens=3), ...",
        "(APIServer pid=18263) INFO 11-29 17:51:42 [entry.py:140] Starting vLLM server on http://127.0.0.1:18000",
        "(APIServer pid=1) INFO 05-09 11:38:02 [api_server.py:1] vLLM server version 0.20.1, serving model "
        "Qwen/Qwen3.6-27B",
    ])
    clues = {c.kind: c.value for c in parse_text(text).clues}
    assert clues["version"] == "0.20.1" or clues["version"] == "0.32.0"
    assert isinstance(clues["args"], dict) and clues["args"]["port"] == 18000
    assert clues["engine_spec_config"] == {"method": "ngram", "model": None, "num_speculative_tokens": 3}
    assert "start" in clues and clues["model"] == "Qwen/Qwen3.6-27B"


def test_args_are_never_evaluated() -> None:
    line = "INFO 11-29 17:51:04 [api_utils.py:286] non-default args: {'x': __import__('os').system('false')}"
    assert not [c for c in parse_text(line).clues if c.kind == "args"]


def test_failure_strings_become_typed_events_with_line_numbers(fixtures: Path) -> None:
    r = parse_lines(fixtures.joinpath("failures.log").read_text().splitlines())
    kinds = {e.kind: e for e in r.events}
    # one line per failure string of the reference, each to its knowledge-base entry (one failure table)
    assert [e.kind for e in sorted(r.events, key=lambda e: e.origin.line_no or 0)] == [
        "spec-config-json-split", "main-guard-missing", "spawn-forced", "cuda-out-of-memory-with-drafter",
        "no-available-memory-cache-blocks", "kv-cache-smaller-than-max-model-len", "nvidia-smi-no-devices",
        "nvidia-kernel-driver-not-loaded", "nccl-unhandled-system-error", "p2p-disabled", "dflash-mixed-swa-refused",
        "dflash-mixed-swa-refused", "dflash-swa-no-window", "eagle3-target-missing-supportseagle3", "gated-repo",
        "address-in-use", "spec-config-no-model", "spec-method-unknown", "shutdown"]
    assert kinds["spec-config-json-split"].origin.line_no == 1
    assert kinds["spec-config-json-split"].detail["value"] == "{method:"
    assert kinds["kv-cache-smaller-than-max-model-len"].detail == {"max_seq_len": "262144", "max_len": "45872"}
    assert kinds["cuda-out-of-memory-with-drafter"].detail["size"] == "1.50 GiB"
    assert kinds["shutdown"].origin.line_no == 21


def test_main_guard_message_split_over_lines_is_recognised() -> None:
    text = ("RuntimeError: \n        An attempt has been made to start a new process before the\n"
            "        current process has finished its bootstrapping phase.\n")
    assert [e.kind for e in parse_text(text).events] == ["main-guard-missing"]


@pytest.mark.parametrize(
    "line",
    [
        MTP_0201[:-40],  # truncated inside the per-position list
        MTP_0201[:150] + "(EngineCore_DP0 pid=7) INFO 05-08 16:26:29 [core.py:1] x" + MTP_0201[150:],  # interleaved
        MTP_0201.replace("0.837, 0.648", "0.648, 0.837"),  # rates that increase: garbled
        MTP_0201.replace("4.74", "3.10"),  # identity mean-1 = sum(rates) broken
    ],
)
def test_broken_lines_are_skipped_and_counted(line: str) -> None:
    r = parse_text(line)
    assert r.samples == [] and r.stats.skipped == 1


def test_non_utf8_is_counted_not_fatal() -> None:
    p = LineParser()
    p.feed(b"\xff\xfe garbage \x80\n")
    p.feed(MTP_0201.encode())
    assert p.result.stats.undecodable == 1 and len(p.result.samples) == 1


def test_years_inferred_with_new_year_wrap() -> None:
    stamps = [Stamp(12, 31, 23, 59, 50), Stamp(12, 31, 23, 59, 59), Stamp(1, 1, 0, 0, 5)]
    resolve_years(stamps, reference=datetime(2026, 1, 2))
    assert [s.year for s in stamps] == [2025, 2025, 2026]


def test_year_of_a_stamp_after_the_reference_day_is_the_year_before() -> None:
    stamps = [Stamp(11, 30, 10, 0, 0)]
    resolve_years(stamps, reference=datetime(2026, 3, 1))
    assert stamps[0].year == 2025


def test_resolve_log_years_sets_datetimes() -> None:
    r = parse_text(MTP_0201)
    resolve_log_years(r, datetime(2026, 11, 29))
    assert r.samples[0].origin is not None and r.samples[0].origin.stamp is not None
    assert r.samples[0].origin.stamp.as_datetime() == datetime(2026, 5, 8, 16, 26, 29)


def test_spec_message_finds_metrics_anywhere() -> None:
    assert parse_spec_message("garbage before " + MTP_0201.split("] ", 1)[1]) is not None
