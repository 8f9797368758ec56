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


def test_the_review_of_the_seventy_third_rules() -> None:
    # a death by a signal (-9: the OOM killer) is a cause of its own; a request's refusal before it is no failure
    request = ("Traceback (most recent call last):\n"
               '  File "/usr/lib/python3/dist-packages/vllm/entrypoints/openai/serving_chat.py", line 9, in create\n'
               "ValueError: This model's maximum context length is 4096 tokens.\n")
    for text in (_ILLEGAL + _DIED.replace("exit code: 1", "exit code: -9"), request + _DIED):
        died = [f for f in report_of(text).findings if "WorkerMonitor" in f.id]
        assert died and died[0].severity != "info", text
    # `Set --flag to <words>`: the flag without a made-up value
    (found,) = [f for f in claims_of("RuntimeError: capture failed. Set --enforce-eager to avoid this error.\n")
                if f.knobs]
    assert "--enforce-eager" in found.knobs and not any("--enforce-eager avoid" in r for r in found.remediation)
    # the CUDA error inside FlashInfer's wording is named, with its own meaning; a sticky one may be earlier's
    sticky = report_of("BatchDecodeWithPagedKVCache failed with error an illegal memory access was encountered\n")
    top = sticky.findings[0]
    assert top.owner == "flashinfer" and "cudaErrorIllegalAddress" in top.summary and "earlier kernel" in top.summary
    # the switch reaches the plan's first step
    plan = report_of("BatchPrefillWithPagedKVCache failed with error invalid argument\n", version="0.22.0").plan
    assert plan and "--attention-backend" in plan[0]


def test_a_switch_told_to_a_release_not_known_spans_each_way_once() -> None:
    from bot.core import switches

    backend = switches.by_id("attention-backend")
    assert backend is not None
    text = backend.advice(None) or ""
    # one range per way, the gaps between read releases not offered as releases without it
    assert text.count("VLLM_ATTENTION_BACKEND") == 1 and "…–0.14.1" in text
    assert "; on vLLM" not in (backend.advice("0.13.0") or "")  # a known release: its own way only
    assert "VLLM_ATTENTION_BACKEND" not in (backend.advice("0.20.1") or "")


def test_a_vllm_object_handed_to_a_library_that_expects_more_of_it() -> None:
    line = ('  File "/venv/lib/python3.12/site-packages/transformers/models/pixtral/processing_pixtral.py", line 124, '
            "in __init__\n    self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)\n"
            "AttributeError: 'MistralTokenizer' object has no attribute 'convert_tokens_to_ids'\n")
    (found,) = [f for f in claims_of(line, version="0.13.0") if f.id.startswith("frame:")]
    assert found.owner == "vllm" and found.part == "tokenizer" and "upgrade" in found.advice
    assert "transformers" in found.deps and found.title.startswith("AttributeError in transformers' code")
    # a library's own class missing an attribute in its own code stays the library's
    other = line.replace("'MistralTokenizer'", "'PreTrainedTokenizerFast'")
    assert all(f.owner == "transformers" for f in claims_of(other, version="0.13.0"))


def test_a_carriage_return_made_visible_ends_its_line() -> None:
    text = ('ERROR 02-05 07:19:46 [core.py:968]   File "/opt/vllm/vllm/v1/engine/core.py", line 486, in '
            "step_with_batch_queue^M\n")
    findings = report_of(text).findings
    assert not any("^M" in f.id or "^M" in f.title for f in findings)


def test_flashinfers_fused_moe_op_without_a_kernel_for_the_dtypes() -> None:
    line = ("RuntimeError: Check failed: (false) is false: Could not construct fused moe op with the requested input "
            "combination Activation: bfloat16, Weight: uint8, Output: bfloat16\n")
    (found,) = claims_of(line)
    assert found.owner == "flashinfer" and found.part == "quantization" and "flashinfer" in found.deps
    assert found.switch is not None and "FlashInfer MoE" in found.switch


def test_a_warning_that_doubts_a_librarys_version_names_the_library() -> None:
    from bot.core.triage.atlas_readers.named_in_words import library_doubted

    assert library_doubted("Failed to import Triton kernels. Please make sure your triton version is compatible.") \
        == "triton"
    assert library_doubted("Please make sure your model version is compatible.") is None  # no library by that name


def test_a_module_path_printed_with_dots_is_its_packages() -> None:
    from bot.core.owners import of_path

    owner = of_path("torch._subclasses/fake_tensor.py")
    assert owner is not None and owner.name == "torch"
    for mine in ("my.torch/x.py", "vllm.v1/x.py", "/home/u/python3.11/x.py", "/work/torch.examples/x.py"):
        found = of_path(mine)
        assert found is not None and found.name == "user-script", mine


def test_the_review_of_the_seventy_fourth_rules() -> None:
    from bot.core import switches
    from bot.core.triage.atlas_readers.named_in_words import named_in_words

    # a way whose ranges say different things of it keeps its own range and note
    for sid, span in (("model-runner-v2", "(vLLM 0.22.0–0.33.0)"), ("v1-engine", "(vLLM 0.8.5.post1–0.10.2)")):
        way = switches.by_id(sid)
        assert way is not None and span in (way.advice(None) or ""), sid
    # a library's own object in its own code (`self.…`) is not vLLM's, whatever vLLM names a class
    own = ('  File "/venv/lib/python3.12/site-packages/transformers/utils/quantization_config.py", line 9, in '
           "post_init\n    if self.bnb_4bit_quant_storage is None:\n"
           "AttributeError: 'BitsAndBytesConfig' object has no attribute 'bnb_4bit_quant_storage'\n")
    assert not [f for f in claims_of(own) if f.owner == "vllm"]
    # asked to check a version: neither "too old" nor "upgrade"
    said = named_in_words("Failed to import Triton kernels. Please make sure your triton version is compatible.",
                          None, None)
    assert said.deps == ["triton"] and not any("too old" in r or "upgrade" in r for r in said.first)
    # an error a kernel left behind inside FlashInfer's wording: the CUDA error's causes, not FlashInfer's release
    sticky = report_of("BatchDecodeWithPagedKVCache failed with error an illegal memory access was encountered\n")
    assert not any("FlashInfer release is at fault" in r for r in sticky.findings[0].remediation)
    # a memory share is no switch to try first
    oom = report_of("BatchPrefillWithPagedKVCache failed with error out of memory\n")
    assert not oom.plan or "attention backend off" not in oom.plan[0]
