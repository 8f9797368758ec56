"""Rules from the fifty-eighth batch's misses, general: a prompt over `--limit-mm-per-prompt` is the request's (and a
limit of 0 the model's implementation); vLLM's own cache path read as a repository; a checkout holding the package of
its own name; a module-level function vLLM added or removed, imported by another's code; a V1 fallback for a
variable's value; a one-dash flag; a request's sampling parameter given as a server flag; a backend named by its enum;
a kernel's GPU requirement pasted alone; a query and a KV cache of different dtypes; a method of vLLM's internals
called with an argument it does not take; the KV cache's scales as checkpoint tensors."""

from __future__ import annotations

from bot.core import owners
from tests.core.triage.reports import claims_of, report_of


def test_media_items_over_the_limit_are_the_requests() -> None:
    found = [f for f in claims_of("ValueError: You set video=10 (or defaulted to 1) in `--limit-mm-per-prompt`, but "
                                  "found 26 items in the same prompt.\n", version="0.7.3") if f.site is not None]
    assert found and found[0].inputs[0] == "request" and "request" in found[0].advice
    assert found[0].confidence == "medium"
    none = [f for f in claims_of("openai.BadRequestError: Error code: 400 - {'error': {'message': 'At most 0 video(s) "
                                 "may be provided in one prompt. None'}}\n") if f.site is not None]
    assert none and "upgrade" in none[0].advice and "no video input" in none[0].remediation[0]


def test_vllms_own_cache_path_read_as_a_repository_is_the_loaders() -> None:
    line = ("Value error, Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
            "'/root/.cache/vllm/assets/model_streamer/83f77f2c'. Use `repo_type` argument if needed.\n")
    found = [f for f in claims_of(line) if f.id == "hub-name-not-a-repository"]
    assert found and found[0].confidence == "medium" and found[0].advice == ["upgrade"]
    assert not [f for f in claims_of(line) if f.id.startswith("atlas:huggingface_hub:")]
    # a user's own path keeps its reading: the directory is not on the server's machine
    mine = [f for f in claims_of("ValueError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
                                 "'/models/llama'. Use `repo_type` argument if needed.\n")
            if f.id == "hub-name-not-a-repository"]
    assert mine and mine[0].advice == ["checkpoint"]


def test_a_checkout_holding_its_own_package_is_that_packages() -> None:
    assert owners.of_path("/verl/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py") == owners.Owner("other",
                                                                                                          "verl")
    assert owners.of_path("/srv/app/app/main.py").name == "user-script"
    assert owners.of_path("/home/u/vllm/vllm/engine/llm_engine.py").name == "vllm"


def test_a_function_vllm_added_imported_by_another_package_says_the_release() -> None:
    text = ('  File "/verl/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py", line 54, in <module>\n'
            "    from vllm.model_executor.model_loader.utils import process_weights_after_loading\n"
            "ImportError: cannot import name 'process_weights_after_loading' from "
            "'vllm.model_executor.model_loader.utils'\n")
    found = [f for f in claims_of(text, version="0.8.4") if f.id.startswith("stale-import:")]
    assert found and found[0].owner == "other" and found[0].advice == ["upgrade"]


def test_a_variables_value_that_keeps_the_server_on_v0() -> None:
    report = report_of("WARNING 08-04 15:00:03 [arg_utils.py:1771] VLLM_ATTENTION_BACKEND=CUTLASS_MLA_VLLM_V1 is not "
                       "supported by the V1 Engine. Falling back to V0. We recommend to remove it.\n")
    found = [f for f in report.findings if f.id == "v0-fallback:VLLM_ATTENTION_BACKEND"]
    assert found and found[0].knobs == ["VLLM_ATTENTION_BACKEND"] and report.verdict == "degraded"
    assert found[0].remediation[0].startswith("Unset `VLLM_ATTENTION_BACKEND`")


def test_a_one_dash_flag_and_a_sampling_parameter_given_to_the_server() -> None:
    dash = [f for f in claims_of("vllm: error: unrecognized arguments: -port 8000\n") if f.id == "cli-refused"]
    assert dash and dash[0].knobs == ["--port"]
    sampling = [f for f in claims_of("vllm: error: unrecognized arguments: --temperature 0.8\n")
                if f.id == "cli-refused"]
    assert sampling and "fix-script" in sampling[0].advice and "sampling parameter" in " ".join(sampling[0].remediation)
    # an unknown flag that is no sampling parameter is not answered so
    other = [f for f in claims_of("vllm: error: unrecognized arguments: --frobnicate 1\n") if f.id == "cli-refused"]
    assert other and "fix-script" not in other[0].advice


def test_a_backend_named_by_its_enum_offers_the_backends_switch() -> None:
    found = [f for f in claims_of("RuntimeError: Qwen2-VL does not support _Backend.FLASHINFER backend now\n",
                                  version="0.7.3") if f.site is not None]
    assert found and "VLLM_ATTENTION_BACKEND" in found[0].knobs


def test_a_kernels_gpu_requirement_pasted_alone() -> None:
    found = [f for f in claims_of("type fp8e4nv not supported in this architecture\n") if f.id == "gpu-too-old"]
    assert found and "--kv-cache-dtype" in found[0].knobs
    assert not [f for f in claims_of("the weather is not supported in this architecture\n") if f.id == "gpu-too-old"]


def test_a_query_and_a_kv_cache_of_different_dtypes() -> None:
    found = [f for f in claims_of("ERROR 12-19 09:04:11 core.py:270] query and key must have the same dtype\n",
                                  version="0.7.3") if f.id == "attention-dtype-mismatch"]
    assert found and found[0].knobs[0] == "--kv-cache-dtype" and found[0].part == "attention"


def test_a_method_of_vllms_internals_called_with_an_argument_it_does_not_take() -> None:
    line = "TypeError: Worker.reload_weights() got an unexpected keyword argument 'weights_iterator'\n"
    old = [f for f in claims_of(line, version="0.12.0") if f.id == "internal-call:Worker.reload_weights"]
    assert old and old[0].advice == ["upgrade"] and old[0].owner == "other" and old[0].confidence == "medium"
    recent = [f for f in claims_of(line, version="0.33.0") if f.id == "internal-call:Worker.reload_weights"]
    assert recent and recent[0].advice == [] and recent[0].confidence == "low"


def test_the_kv_caches_scales_are_checkpoint_tensors() -> None:
    found = [f for f in claims_of("KeyError: 'transformer.h.0.attn.kv_scale'\n") if f.id == "unknown-weight:kv_scale"]
    assert found and found[0].confidence == "low"
