"""Rules from the fifty-second batch's misses, general: a class no vLLM release registers is an out-of-tree model
(registered where the engine runs), and an entry about drafters alone is a guess when speculation is not shown on; a
message that defers its cause to other lines is a low claim; a logger's bracketed fields before a traceback; the
prefix-prefill kernel's switch is prefix caching; a KV cache below one request of max_model_len; torch_npu's fork
refusal is CUDA's; the front end's word that the engine core died while starting is a failure."""

from __future__ import annotations

from tests.core.triage.reports import claims_of, report_of

_UNSUPPORTED = ("ValueError: Model architectures ['{}'] are not supported for now. Supported architectures: "
                "dict_keys(['LlamaForCausalLM', 'Qwen2ForCausalLM'])\n")


def test_a_class_no_release_registers_is_an_out_of_tree_model() -> None:
    claims = claims_of(_UNSUPPORTED.format("Qwen2ForCausalLMBiased"))
    found = [f for f in claims if f.id.startswith("architecture-out-of-tree:")]
    assert found and "fix-script" in found[0].advice and found[0].part == "models"
    assert all(f.confidence == "low" for f in claims if f.id == "drafter-architecture-not-registered")
    # a vLLM newer than every release read may register it: said lower
    newer = claims_of(_UNSUPPORTED.format("Qwen2ForCausalLMBiased"), version="99.0.0")
    assert [f.confidence for f in newer if f.id.startswith("architecture-out-of-tree:")] == ["low"]
    # a class some release registers (the installed one is too old), or a drafter's, is not out of tree
    assert not any(f.id.startswith("architecture-out-of-tree:")
                   for f in claims_of(_UNSUPPORTED.format("Qwen2ForCausalLM")))
    assert not any(f.id.startswith("architecture-out-of-tree:")
                   for f in claims_of(_UNSUPPORTED.format("EagleQwen2ForCausalLM")))


def test_a_message_that_defers_its_cause_elsewhere_is_a_low_claim() -> None:
    claims = claims_of("ValueError: Model architectures ['Qwen2_5_VLForConditionalGeneration'] failed to be "
                       "inspected. Please check the logs for more details.\n")
    placed = [f for f in claims if f.id.startswith("atlas:")]
    assert placed and all(f.confidence == "low" for f in placed)


def test_a_loggers_bracketed_fields_before_a_traceback_are_a_prefix() -> None:
    prefix = "[2024-04-17 20:07:13,727] [ERROR] [MainThread] [asyncio] >>> "
    log = "".join(prefix + line + "\n" for line in (
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/attention/ops/prefix_prefill.py", line 639, in '
        "context_attention_fwd", "    assert Lk in {16, 32, 64, 128}", "AssertionError"))
    found = [f for f in claims_of(log) if "prefix_prefill" in f.id]
    assert found and "--no-enable-prefix-caching" in found[0].knobs, [(f.id, f.knobs) for f in claims_of(log)]


def test_a_kv_cache_below_one_request_names_what_sized_it() -> None:
    head = "(EngineCore_DP0 pid=7) INFO 10-19 21:10:01 [kv_cache_utils.py:{}] "
    log = (head.format(772) + "Overriding num_gpu_blocks=125643 with num_gpu_blocks_override=1\n"
           + head.format(1201) + "GPU KV cache size: 16 tokens\n"
           + head.format(1206) + "Maximum concurrency for 2,048 tokens per request: 0.01x\n")
    report = report_of(log)
    found = [f for f in report.findings if f.id == "kv-cache-below-one-request"]
    assert report.verdict == "failing" and found and found[0].inputs == ["--num-gpu-blocks-override"]
    roomy = log.replace("0.01x", "61.35x").replace("Overriding num_gpu_blocks=125643 with num_gpu_blocks_override=1",
                                                    "GPU KV cache size: 125,643 tokens")
    assert not any(f.id == "kv-cache-below-one-request" for f in report_of(roomy).findings)


def test_torch_npus_fork_refusal_is_the_spawn_start_methods() -> None:
    claims = claims_of("(VllmWorkerProcess pid=1743) ERROR 03-25 12:50:16 multiproc_worker_utils.py:242] RuntimeError: "
                       "Cannot re-initialize NPU in forked subprocess. To use NPU with multiprocessing, you must use "
                       "the 'spawn' start method\n")
    assert any(f.id == "cuda-reinit-in-forked-worker" and "VLLM_WORKER_MULTIPROC_METHOD" in f.knobs for f in claims)


def test_the_engine_core_dying_while_starting_is_a_failure() -> None:
    assert report_of("Engine core initialization failed. Failed core proc(s): {}\n").verdict == "failing"
