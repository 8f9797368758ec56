"""Lines no knowledge-base entry knows, placed by the message atlas in vLLM's own source.

The logs in tests/fixtures/atlas/ are real: `vllm serve` of the vLLM 0.32.0 CPU build, refused at config
validation by five wrong flags (tests/realvllm/test_atlas_refusals.py makes the same lines live). Only
`bot.core` is imported: this is the pure pipeline.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "atlas"


def report_of(text: str, **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags(**flags))))  # type: ignore[arg-type]


# (fixture, part, file, function, a flag the report names)
REAL = [
    ("vllm-0.32.0-max-model-len-over-derived.log", "model-loading", "vllm/config/model.py",
     "_get_and_verify_max_len", "--max-model-len"),
    ("vllm-0.32.0-ngram-lookup-min-over-max.log", "spec-config", "vllm/config/speculative.py",
     "SpeculativeConfig.__post_init__", "--speculative-config"),
    ("vllm-0.32.0-tp-does-not-divide-heads.log", "model-loading", "vllm/config/model.py",
     "ModelConfig.verify_with_parallel_config", "--tensor-parallel-size"),
]


@pytest.mark.parametrize(("name", "part", "file", "function", "knob"), REAL, ids=[r[0] for r in REAL])
def test_a_real_refusal_is_placed_with_its_part_site_and_knob(name: str, part: str, file: str, function: str,
                                                              knob: str) -> None:
    r = report_of((FIXTURES / name).read_text(), vllm_version="0.32.0")
    assert r.verdict == "failing"
    top = r.findings[0]
    assert top.part == part and top.site is not None
    assert (top.site.file, top.site.function) == (file, function)
    assert top.site.url.startswith(f"https://github.com/vllm-project/vllm/blob/v0.32.0/{file}#L")
    assert knob in top.knobs
    assert any(knob in step for step in top.remediation)  # the flag with its help, in words
    # the catch-all gives way, and says why, under "considered"
    assert "engine-crashed" not in [f.id for f in r.findings]
    assert any(c.id == "engine-crashed" and c.status == "ruled-out" for c in r.considered)
    assert any(c.id == top.id and c.status == "fits" for c in r.considered)


def test_a_fields_own_constraint_names_the_flag_that_sets_it() -> None:
    r = report_of((FIXTURES / "vllm-0.32.0-gpu-memory-utilization-over-1.log").read_text(), vllm_version="0.32.0")
    top = r.findings[0]
    assert top.id == "config-field:CacheConfig.gpu_memory_utilization"
    assert top.part == "kv-cache" and top.knobs == ["--gpu-memory-utilization"]


def test_an_entry_that_explains_the_line_wins_and_the_atlas_says_where() -> None:
    r = report_of((FIXTURES / "vllm-0.32.0-batched-tokens-below-max-model-len.log").read_text(),
                  vllm_version="0.32.0")
    top = r.findings[0]
    assert top.id == "max-num-batched-tokens-below-max-model-len"  # the knowledge base's entry
    assert not any(f.id.startswith("atlas:") and f.severity == "critical" for f in r.findings)


def test_a_message_later_releases_no_longer_print_advises_the_upgrade() -> None:
    line = ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla "
            "V100-SXM2-32GB GPU has compute capability 7.0. You can use float16 instead by explicitly setting the "
            "`dtype` flag in CLI, for example: --dtype=half.")
    r = report_of(line, vllm_version="0.6.6.post1", gpu="Tesla V100-SXM2-32GB")
    top = r.findings[0]
    assert top.site is not None and top.part in ("worker", "platform")
    assert "--dtype" in top.knobs
    # the GPU beside the check it fails: generation and compute capability
    assert any("Volta, compute capability 7.0" in step and "≥ 8.0" in step for step in top.remediation)


def test_a_traceback_cut_before_its_exception_still_names_the_part() -> None:
    text = "\n".join([
        'File "vllm/v1/spec_decode/eagle.py", line 545, in propose',
        'File "vllm/v1/attention/backends/flash_attn.py", line 817, in build',
    ])
    r = report_of(text, method="eagle3", num_speculative_tokens=3)
    top = r.findings[0]
    assert top.severity == "critical" and top.part == "attention"


def test_a_crash_inside_the_proposer_suggests_a_smaller_k_meanwhile() -> None:
    text = 'File "/usr/lib/python3/site-packages/vllm/v1/spec_decode/eagle.py", line 545, in propose'
    r = report_of(text, method="mtp", num_speculative_tokens=3)
    top = r.findings[0]
    assert top.part == "drafter" and "lower-k" in top.advice


def test_no_smaller_k_where_k_is_not_known() -> None:
    # a traceback through the proposer says speculation runs, not how many tokens it drafts
    text = 'File "/usr/lib/python3/site-packages/vllm/v1/spec_decode/eagle.py", line 545, in propose'
    r = report_of(text)
    assert "lower-k" not in r.findings[0].advice


def test_an_environment_variable_vllm_cannot_read_is_named_with_its_help() -> None:
    text = "\n".join([
        "ERROR 11-26 09:29:11 engine.py:366]     lambda: int(os.getenv('VLLM_PORT', '0'))",
        "ERROR 11-26 09:29:11 engine.py:366] ValueError: invalid literal for int() with base 10: 'tcp://127.0.0.1:80'",
    ])
    r = report_of(text, vllm_version="0.6.4")
    top = r.findings[0]
    assert top.id == "env-var-collision" and top.knobs == ["VLLM_PORT"]
    assert any("VLLM_PORT" in step for step in top.remediation)


def test_a_gpu_generation_requirement_is_put_beside_the_host_gpu() -> None:
    r = report_of("RuntimeError: FlashAttention only supports Ampere GPUs or newer.", gpu="Tesla T4")
    top = r.findings[0]
    assert top.id == "gpu-too-old" and top.part == "attention"
    assert any("Turing, compute capability 7.5" in step for step in top.remediation)


def test_a_warning_under_a_check_of_vllms_is_current_only_while_serving() -> None:
    # vLLM warns here because its own check failed (the fd limit could not be raised). Printed at startup with
    # nothing after it, it is a notice, not a degraded server (the verdict is about now: issue 35); printed after
    # the server served, and not followed by more serving, it is current
    line = ("(APIServer pid=19548) WARNING 12-01 18:40:07 [system_utils.py:255] Found ulimit of 20000 and failed to "
            "automatically increase with error current limit exceeds maximum limit. This can cause fd limit errors "
            "like `OSError: [Errno 24] Too many open files`. Consider increasing with ulimit -n")
    r = report_of(line, vllm_version="0.32.0")
    placed = [f for f in r.findings if f.site is not None]
    assert placed and placed[0].site is not None and placed[0].site.condition
    assert placed[0].severity == "info" and r.verdict != "degraded"
    assert "Not current" in placed[0].summary and placed[0].remediation  # a note keeps its advice
    serving = ("(APIServer pid=19548) INFO 12-01 18:39:07 [loggers.py:271] Engine 000: Avg prompt throughput: 5.0 "
               "tokens/s, Avg generation throughput: 124.5 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache "
               "usage: 7.4%, Prefix cache hit rate: 0.0%")
    r = report_of(f"{serving}\n{line}", vllm_version="0.32.0")
    placed = [f for f in r.findings if f.site is not None]
    assert placed[0].severity == "warning" and r.verdict == "degraded"
    r = report_of(f"{line}\n{serving}", vllm_version="0.32.0")
    assert next(f for f in r.findings if f.site is not None).severity == "info" and r.verdict != "degraded"


def test_a_line_not_from_vllm_is_not_placed() -> None:
    r = report_of("ERROR 05-08 16:26:29 [foo.py:12] the coffee machine is out of beans again today")
    assert not any(f.site is not None for f in r.findings)
