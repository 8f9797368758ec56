"""Rules from the seventy-third batch's misses, general: a process reported dead after a failure found above it is
that failure's consequence; a missing package that serves one part of vLLM names that part; ModelScope's hub
refusing a model id; a message that says `Set --flag to …`; FlashInfer's attention kernels returning a CUDA error."""

from __future__ import annotations

from bot.core.catalogs import load_catalogs
from bot.core.parts import part_of_package
from tests.core.triage.reports import claims_of, report_of

_ILLEGAL = ("CUDA error (/workspace/.deps/vllm-flash-attn-src/hopper/flash_fwd_launch_template.h:161): an illegal "
            "memory access was encountered\n")
_DIED = "ERROR 05-01 05:31:52 [multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 220 died, exit code: 1\n"


def test_a_death_reported_after_a_failure_is_its_consequence() -> None:
    report = report_of(_ILLEGAL + _DIED)
    died = [f for f in report.findings if "WorkerMonitor" in f.id]
    assert died and all(f.severity == "info" and f.confidence == "low" for f in died)
    assert "likely the cause, not this line" in died[0].summary
    assert report.findings[0].id.startswith("below:cuda")
    # alone, the death is what the log says: it stays a claim
    alone = [f for f in claims_of(_DIED) if "WorkerMonitor" in f.id]
    assert alone and alone[0].severity in ("warning", "critical")


def test_a_missing_package_names_the_part_it_serves() -> None:
    assert part_of_package("bitsandbytes.functional") == "quantization"
    assert part_of_package("xgrammar") == "structured-output"
    assert part_of_package("flashinfer") is None  # several parts: none named
    (found,) = [f for f in claims_of("ModuleNotFoundError: No module named 'bitsandbytes'\n") if f.deps]
    assert found.part == "quantization" and "bitsandbytes" in found.deps
    (other,) = [f for f in claims_of("ModuleNotFoundError: No module named 'somepkg'\n") if f.deps]
    assert other.part is None


def test_modelscope_refusing_a_model_id() -> None:
    lines = ("2025-08-03 19:16:47,111 - modelscope - ERROR - The request model: Qwen3-30B-A3B does not exist!\n"
             "ERROR 08-03 19:16:47 [config.py:114] Error retrieving file list: The request model: Qwen3-30B-A3B "
             "does not exist!, retrying 1 of 2\n")
    (found,) = [f for f in claims_of(lines) if f.id == "modelscope-model-not-found"]
    assert found.knobs[0] == "--model" and found.inputs == ["--model"] and "namespace" in found.summary
    assert found.sources[0].startswith("https://github.com/modelscope/modelscope/")
    namespaced = claims_of("The request model: org/model-x does not exist!\n")
    assert [f for f in namespaced if f.id == "modelscope-model-not-found" and "namespace/name" not in f.summary]
    # a local path vLLM's lookups asked about: read from the path, no such finding
    assert not [f for f in claims_of("The request model: /models/q does not exist!\n")
                if f.id == "modelscope-model-not-found"]


def test_a_message_that_says_set_a_flag_to_a_value() -> None:
    line = ("ValueError: TT-LLama8B and TT-Llama11B do not support max_model_len greater than 32768 on N150 "
            "(received 65536). Set --max_model_len to 32768 or lower in vLLM.\n")
    (found,) = [f for f in claims_of(line) if f.knobs]
    assert found.knobs == ["--max-model-len"] and found.inputs == ["--max-model-len"]
    # a flag no vLLM release has is never taken from the words
    assert not [f for f in claims_of("ValueError: bad. Set --no-such-flag-here to 3.\n") if f.knobs]


def test_flashinfers_attention_kernel_returning_a_cuda_error() -> None:
    (found,) = claims_of("BatchPrefillWithPagedKVCache failed with error invalid argument\n", version="0.22.0")
    assert found.owner == "flashinfer" and found.part == "attention" and "flashinfer" in found.deps
    assert "--attention-backend" in found.knobs and found.summary.startswith("FlashInfer printed this")
    # FlashInfer's wording first, the CUDA error inside it named after
    hits = load_catalogs().hits("BatchDecodeWithPagedKVCache failed with error an illegal memory access was "
                                "encountered")
    assert hits[0].entry.owner == "flashinfer" and any(h.entry.name == "cudaErrorIllegalAddress" for h in hits[1:])
    # the bare CUDA error is still the runtime's
    (bare,) = claims_of("RuntimeError: CUDA error: invalid argument\n")
    assert bare.owner != "flashinfer" and bare.part != "attention"


def test_a_release_unknown_hears_every_way_to_switch_a_part_off() -> None:
    from bot.core import switches

    moe = switches.by_id("flashinfer-moe")
    assert moe is not None
    unknown = moe.advice(None) or ""
    assert "`--moe-backend triton`" in unknown and "VLLM_USE_FLASHINFER_MOE_FP8=0" in unknown
    known = moe.advice("0.10.2") or ""
    assert "VLLM_USE_FLASHINFER_MOE_FP8=0" in known and "--moe-backend" not in known
    # before --moe-backend, FlashInfer's opt-in variables moved a quantized MoE layer's kernels
    backend = switches.by_id("moe-kernel-backend")
    assert backend is not None and "VLLM_USE_FLASHINFER_MOE_FP4=1" in (backend.advice("0.15.1") or "")


_CAPTURE = ('(EngineCore_0 pid=5) ERROR 08-05 11:23:25 [core.py:632] Traceback (most recent call last):\n'
            '(EngineCore_0 pid=5) ERROR 08-05 11:23:25 [core.py:632]   File '
            '"/usr/lib/python3.10/site-packages/torch_npu/npu/graphs.py", line 210, in capture_begin\n'
            "(EngineCore_0 pid=5) ERROR 08-05 11:23:25 [core.py:632]     super().capture_begin(pool=pool)\n"
            "(EngineCore_0 pid=5) ERROR 08-05 11:23:25 [core.py:632] RuntimeError: capture_begin: NPU function error: "
            "AclmdlRICaptureBegin, error code is 207005\n")


def test_a_graph_capture_that_ran_short_captures_fewer() -> None:
    short = _CAPTURE + ("(EngineCore_0 pid=5) ERROR 08-05 11:23:25 [core.py:632] EL0006: The resources are "
                        "insufficient.\n")
    (found,) = [f for f in claims_of(short, version="0.9.1") if f.id.startswith("frame:")]
    assert found.part == "compilation" and "--enforce-eager" in found.knobs
    assert "--compilation-config" in found.knobs and any("cudagraph_capture_sizes" in r for r in found.remediation)
    # a capture that failed for another reason: the switch, not the shorter list
    (other,) = [f for f in claims_of(_CAPTURE, version="0.9.1") if f.id.startswith("frame:")]
    assert other.part == "compilation" and not any("cudagraph_capture_sizes" in r for r in other.remediation)
