"""General readings added after the first-sight scores: each with a real line from a public thread (the URL beside
it), none of them a line of the evaluation cases. Only `bot.core` is imported."""

from __future__ import annotations

from bot.core.atlas import load_atlas
from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings


def report_of(text: str, **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags(**flags))))  # type: ignore[arg-type]


# transformers' refusal as transformers raises it (src/transformers/dynamic_module_utils.py)
TRUST = ("ValueError: Loading OpenGVLab/InternVL2-8B requires you to execute the configuration file in that repo on "
         "your local machine. Make sure you have read the code there to avoid malicious use, then set the option "
         "`trust_remote_code=True` to remove this error.")


def test_a_line_that_lost_its_case_and_quotes_is_still_placed() -> None:
    folded = TRUST.lower().replace("`", "\u2019")
    exact, retyped = load_atlas().match(TRUST), load_atlas().match(folded)
    assert exact is not None and retyped is not None
    assert (retyped.site.file, retyped.site.function) == (exact.site.file, exact.site.function)
    assert retyped.exact


def test_a_short_template_does_not_claim_a_folded_line() -> None:
    # "Not support {x}" is all hole: a line that merely contains "not support" is not its site
    line = "this flash attention build does not support headdim not being a multiple of 32."
    m = load_atlas().match(line)
    assert m is None or "Not support" not in m.site.template


def test_a_librarys_message_names_the_vllm_flag_and_is_no_upgrade() -> None:
    r = report_of(TRUST, vllm_version="0.8.5")
    top = r.findings[0]
    assert top.part == "transformers" and "--trust-remote-code" in top.knobs
    assert "upgrade" not in top.advice
    # the library's release is its own, not vLLM's
    assert top.site is not None and top.site.url.startswith("https://github.com/huggingface/transformers/blob/v4.")


def test_a_missing_attribute_on_a_drafter_class_is_a_release_bug_with_an_upgrade() -> None:
    # https://github.com/vllm-project/vllm/issues/43298
    text = ('  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/deepseek_v2.py", line 1355, '
            'in load_weights\n'
            "AttributeError: 'EagleMistralLarge3Model' object has no attribute 'use_mha'\n")
    r = report_of(text, vllm_version="0.21.0", method="eagle", num_speculative_tokens=3)
    top = r.findings[0]
    assert top.id == "missing-attribute:EagleMistralLarge3Model.use_mha"
    assert top.part == "drafter" and "upgrade" in top.advice
    assert any("compare/v0.21.0...v" in step for step in top.remediation)
    assert "engine-crashed" not in [f.id for f in r.findings]


def test_an_attribute_error_on_anything_else_is_not_called_a_model_bug() -> None:
    r = report_of("AttributeError: 'NoneType' object has no attribute 'shape'\n")
    assert not any(f.id.startswith("missing-attribute") for f in r.findings)


def test_the_wrapper_that_restates_an_exception_is_not_a_second_finding() -> None:
    # https://github.com/vllm-project/vllm/issues/43298 (the worker's exception, then the executor's wrapper)
    text = ("AttributeError: 'EagleMistralLarge3Model' object has no attribute 'use_mha'\n"
            "RuntimeError: Worker failed with error ''EagleMistralLarge3Model' object has no attribute 'use_mha'', "
            "please check the stack trace above for the root cause\n")
    r = report_of(text, vllm_version="0.21.0")
    assert [f.id for f in r.findings if f.severity == "critical"] == [
        "missing-attribute:EagleMistralLarge3Model.use_mha"]


def test_an_fp8_format_the_gpu_lacks_names_the_kv_cache_dtype() -> None:
    # triton's refusal, as quoted in https://github.com/1CatAI/1Cat-vLLM/issues/27
    text = ("(Worker_TP0 pid=60352) ERROR 05-06 06:47:41 [multiproc_executor.py:852] ValueError(\"type fp8e4nv not "
            "supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')\")\n")
    r = report_of(text, gpu="V100")
    top = r.findings[0]
    assert top.id == "gpu-too-old" and "--kv-cache-dtype" in top.knobs and "--dtype" not in top.knobs
    assert any("fp8_e5m2" in step for step in top.remediation)


STARTED = ("(APIServer pid=1) INFO 05-08 16:26:29 [api_server.py:1000] Starting vLLM API server 0 on "
           "http://127.0.0.1:8000\n"
           "(APIServer pid=1) INFO:     Started server process [1]\n"
           "(APIServer pid=1) INFO:     Waiting for application startup.\n"
           "(APIServer pid=1) INFO:     Application startup complete.\n")


def test_a_clean_startup_without_metrics_is_healthy_and_says_acceptance_is_not_judged() -> None:
    r = report_of(STARTED)
    assert r.verdict == "healthy"
    assert "no acceptance measured yet" in r.headline
    assert "server-started" not in [f.id for f in r.findings]


def test_a_startup_with_an_error_or_no_completion_is_not_healthy() -> None:
    broken = STARTED + "(APIServer pid=1) ERROR 05-08 16:26:40 [core.py:700] EngineCore failed to start.\n"
    assert report_of(broken).verdict != "healthy"
    unfinished = "INFO 05-03 20:21:10 [cuda.py:221] Using Flash Attention backend on V1 engine.\n"
    assert report_of(unfinished).verdict == "unknown"


def test_a_function_named_for_multimodal_input_is_the_multimodal_part() -> None:
    atlas = load_atlas()
    assert atlas.part_of("vllm/model_executor/models/utils.py", "_merge_multimodal_embeddings") == "multimodal"
    assert atlas.part_of("vllm/model_executor/models/utils.py", "maybe_prefix") == "models"


def test_a_capability_refusal_reads_the_gpu_from_the_message_and_keeps_the_site() -> None:
    # the wording of vLLM's own check (`_get_quantization_config`), for a GPU the message itself reads
    text = ("ValueError: The quantization method awq is not supported for the current GPU. Minimum capability: 75. "
            "Current capability: 70.\n")
    r = report_of(text)
    top = r.findings[0]
    assert top.id == "gpu-too-old" and top.part == "quantization" and top.site is not None
    assert any("7.0 (Volta)" in step for step in top.remediation)
    assert "engine-crashed" not in [f.id for f in r.findings]


def test_an_exception_logged_by_its_repr_is_read_as_that_exception() -> None:
    text = "ERROR 03-19 11:54:51 [engine.py:158] AssertionError('Only FlashAttention backend is supported for now.')\n"
    assert report_of(text).verdict == "failing"


def test_a_kv_budget_below_zero_is_the_no_cache_blocks_failure() -> None:
    # vLLM's own line (vllm/v1/worker/gpu_worker.py, `Available KV cache memory: {GiB(...)} GiB`) rendered with a
    # negative value, then the engine's failure
    text = ("(EngineCore_0 pid=5839) INFO 08-20 18:04:22 [gpu_worker.py:276] Available KV cache memory: -0.50 GiB\n"
            "(EngineCore_0 pid=5839) ERROR 08-20 18:04:22 [core.py:700] EngineCore failed to start.\n")
    r = report_of(text)
    assert r.verdict == "failing" and r.findings[0].id == "no-available-memory-cache-blocks"
    fine = "(EngineCore_0 pid=5839) INFO 08-20 18:04:22 [gpu_worker.py:276] Available KV cache memory: 12.57 GiB\n"
    assert "no-available-memory-cache-blocks" not in [f.id for f in report_of(fine).findings]


def test_an_api_error_body_is_placed_with_the_flags_it_names() -> None:
    # the OpenAI server's JSON error, as clients print it
    text = ('{"object":"error","message":"\\"auto\\" tool choice requires --enable-auto-tool-choice and '
            '--tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}\n')
    top = report_of(text).findings[0]
    assert top.part == "entrypoint"
    assert {"--enable-auto-tool-choice", "--tool-call-parser"} <= set(top.knobs)


def test_a_message_built_in_a_list_and_joined_is_placed() -> None:
    # vllm/lora/peft_helper.py appends each failed check to a list and raises them joined
    m = load_atlas().match("vLLM only supports modules_to_save being None.", version="0.10.2")
    assert m is not None and m.exact
    assert (m.site.file, m.site.function) == ("vllm/lora/peft_helper.py", "PEFTHelper.validate_legal")
    assert m.site.condition == "self.modules_to_save"


def test_an_unknown_flag_is_refused_with_the_flags_that_share_its_words() -> None:
    # argparse's own wording for a flag the release does not have
    r = report_of("vllm: error: unrecognized arguments: --speculative-model x\n", vllm_version="0.20.1")
    top = r.findings[0]
    assert top.id == "cli-refused" and top.part == "config" and r.verdict == "failing"
    assert any("was a flag of vLLM" in step for step in top.remediation)
    assert "--speculative-config" in top.knobs


def test_an_invalid_choice_names_the_flag() -> None:
    r = report_of("vllm serve: error: argument --kv-cache-dtype: invalid choice: 'fp9' (choose from 'auto', "
                  "'fp8')\n", vllm_version="0.20.1")
    top = r.findings[0]
    assert top.id == "cli-refused" and top.knobs == ["--kv-cache-dtype"]


def test_at_a_large_batch_no_k_pays_and_speculation_itself_is_the_cost() -> None:
    engine = ("INFO 06-06 14:20:44 [loggers.py:116] Engine 000: Avg prompt throughput: 100.0 tokens/s, Avg "
              "generation throughput: 826.0 tokens/s, Running: {n} reqs, Waiting: 0 reqs, GPU KV cache usage: 16.3%, "
              "Prefix cache hit rate: 0.6%\n")
    spec = ("INFO 06-06 14:20:44 [metrics.py:86] SpecDecoding metrics: Draft acceptance rate: 48.7%, Mean acceptance "
            "length: 2.46, Accepted: 725 tokens, Drafted: 1488 tokens, Per-position acceptance rate: 0.615, 0.464, "
            "0.383\n")
    busy = report_of((engine.format(n=600) + spec) * 3, method="ngram", num_speculative_tokens=3)
    assert "not-paying-off" in [f.id for f in busy.findings]
    assert not any(f.id.startswith("lower-k") for f in busy.findings)
    quiet = report_of((engine.format(n=1) + spec) * 3, method="ngram", num_speculative_tokens=3)
    assert "not-paying-off" not in [f.id for f in quiet.findings]


def test_a_checkpoint_tensor_the_loader_lacks_is_a_loader_finding_with_the_upgrade() -> None:
    text = ('  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/qwen2.py", line 371, in '
            'load_weights\n'
            "    param = params_dict[name]\n"
            "KeyError: 'layers.0.mlp.down_proj.weight_scale'\n")
    top = report_of(text, vllm_version="0.6.3").findings[0]
    assert top.id == "unknown-weight:weight_scale" and top.part == "quantization" and "upgrade" in top.advice


def test_an_exception_raised_with_several_strings_is_read_as_their_concatenation() -> None:
    # `raise RuntimeError("a ", "b ")` prints the tuple; the capability words are across its pieces
    text = ("RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min capability: 80. ', "
            "'Current capability: 75.')\n")
    r = report_of(text)
    assert r.findings[0].id == "gpu-too-old" and "engine-crashed" not in [f.id for f in r.findings]


def test_an_exception_asking_for_a_backend_vllm_passed_over_says_why() -> None:
    # vLLM's own line when it passes over FlashAttention, then a component that needs it
    text = ("INFO 03-19 11:53:56 [cuda.py:234] Cannot use FlashAttention-2 backend for Volta and Turing GPUs.\n"
            "INFO 03-19 11:53:56 [cuda.py:282] Using XFormers backend.\n"
            "ERROR 03-19 11:54:51 [engine.py:158] AssertionError('Only FlashAttention backend is supported.')\n")
    r = report_of(text)
    top = r.findings[0]
    assert top.id == "gpu-too-old" and top.part == "attention"
    assert "engine-crashed" not in [f.id for f in r.findings]
