"""Rules from the fifty-fourth batch's misses, general: a `VLLM_*` variable vLLM reports unknown that earlier
releases read is a setting this release dropped (and the flag of its words took its place); a C++/CUDA file a message
names behind an elided path is placed when every release's copy of it is in one part (`csrc/libtorch_stable/` read as
the tree it mirrors); vLLM's CUTLASS scaled-mm kernels switch with the linear-kernel backend."""

from __future__ import annotations

from bot.core.atlas import load_atlas
from bot.core.parts import part_of
from tests.core.triage.reports import claims_of, report_of


def test_a_variable_earlier_releases_read_is_a_dropped_setting() -> None:
    line = ("WARNING 05-06 01:55:26 [envs.py:2096] Unknown vLLM environment variable detected: "
            "VLLM_ATTENTION_BACKEND\n")
    report = report_of(line + "INFO 05-06 01:55:30 [cuda.py:1] Using AttentionBackendEnum.FLASH_ATTN backend.\n")
    found = [f for f in report.findings if f.id == "dropped-variable:VLLM_ATTENTION_BACKEND"]
    assert found and found[0].severity == "warning" and found[0].knobs == ["--attention-backend"]
    assert report.verdict == "degraded"
    # a variable with no flag of its words (V1's switch, once V1 was the only engine) is a note
    gone = [f for f in report_of(line.replace("VLLM_ATTENTION_BACKEND", "VLLM_USE_V1")).findings
            if f.id == "dropped-variable:VLLM_USE_V1"]
    assert gone and gone[0].severity == "info"
    # a name no release reads (a typo, a Service's link variable) is not a dropped setting
    assert not any(f.id.startswith("dropped-variable:") for f in report_of(line.replace(
        "VLLM_ATTENTION_BACKEND", "VLLM_ATENTION_BAKEND")).findings)


def test_a_source_file_behind_an_elided_path_is_placed_in_its_part() -> None:
    assert part_of("csrc/libtorch_stable/quantization/w8a8/cutlass/scaled_mm_c2x.cu") == "quantization"
    assert load_atlas().source_path("scaled_mm_c2x.cu") is not None
    claims = claims_of("RuntimeError: cutlass_scaled_mm_sm80_epilogue, .../scaled_mm_c2x.cu:89\n")
    found = [f for f in claims if f.id.startswith("below:source:")]
    assert found and found[0].part == "quantization" and any(k.startswith("--linear-backend") for k in found[0].knobs)
