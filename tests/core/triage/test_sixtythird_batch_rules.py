"""Rules from the sixty-third batch's misses, general: a sentence that runs on into a short template's words is no
foreign prefix; a check the next releases rewrote (same message, another condition) says so with the upgrade; a check
of nothing but the class of what the caller passed is the caller's to fix; a SamplingParams refusal in a traceback
without a server handler was built by a program; the container runtime finding no program on the image's PATH is the
image tag's; argparse left with words (a path split at a space, a flag written as a keyword); a framework's checkout
that drives vLLM is that framework's; a compiled kernel indexing past a table of N rows while the server admits more
positions; an attention backend refusing what the model's layers pass it."""

from __future__ import annotations

from bot.core.atlas import load_atlas
from bot.core.atlas_words import after_foreign_prefix
from bot.core.owners import of_path
from bot.core.template_match import Template
from tests.core.triage.reports import claims_of

_SLIDING = ("ValueError: Sliding window for some but all layers is not supported. This model uses sliding window but "
            "max_window_layers = 28 is less than num_hidden_layers = 48. Please open an issue to discuss this feature.")


def test_a_sentence_running_into_a_templates_words_is_no_prefix() -> None:
    tmpl = Template.of(["sliding window ", "size", ""])
    assert after_foreign_prefix(tmpl, "sliding window ", "This model uses sliding window 4096") is None
    # a pod's and its container's names (kubectl, stern) end in a lowercase word and are a prefix all the same
    assert after_foreign_prefix(tmpl, "sliding window ", "vllm-7d9f-abcde vllm sliding window 4096")
    # a container's or a logger's prefix still is one
    assert after_foreign_prefix(tmpl, "sliding window ", "2024-05-01T10:00:00Z stdout F sliding window 4096")
    assert after_foreign_prefix(tmpl, "sliding window ", "[worker-3] sliding window 4096")


def test_a_message_without_its_quotes_is_placed_at_its_own_site_not_a_shorter_one() -> None:
    m = load_atlas().match(_SLIDING, version="0.7.3")
    assert m is not None and m.site.file == "vllm/model_executor/models/qwen2.py"


def test_a_check_rewritten_in_a_later_release_says_so_with_the_upgrade() -> None:
    m = load_atlas().match(_SLIDING, version="0.7.3")
    assert m is not None and m.check_changed is not None and m.check_changed[0] == "0.9.2"
    assert m.compare_url == "https://github.com/vllm-project/vllm/compare/v0.7.3...v0.9.2"
    (found,) = [f for f in claims_of(_SLIDING + "\n", version="0.7.3") if f.site is not None]
    assert "upgrade" in found.advice and any("rewrote this check" in r for r in found.remediation)
    # the newest release's check is unchanged after it: nothing to say
    newest = load_atlas().match(_SLIDING, version="0.33.0")
    assert newest is not None and newest.check_changed is None


def test_a_check_rewritten_in_other_words_only_is_the_same_check() -> None:
    from bot.core.atlas import _read_names

    assert _read_names("self.x is not None and y > 1") == _read_names("x is not None and y > 1 (where x = z.x)")
    assert _read_names("cache_config.sliding_window is not None") != _read_names("len(set(config.layer_types)) > 1")


def test_a_check_of_the_callers_class_is_the_callers_to_fix() -> None:
    for line, version in (("ValueError: Either SamplingParams or PoolingParams must be provided.\n", "0.7.3"),
                          ("TypeError: params must be either SamplingParams or PoolingParams, but got "
                           "BeamSearchParams\n", "0.20.1")):
        (found,) = [f for f in claims_of(line, version=version) if f.site is not None]
        assert "request" in found.inputs and "fix-script" in found.advice, line
        assert "upgrade" not in found.advice, line
    # a check that reads more than the class is not one; nor one whose message does not name the class it wants
    # (a feature refused), nor vLLM's own plumbing handing itself another object
    for line, version in (("ValueError: This model does not support generation\n", "0.20.1"),
                          ("ValueError: Pooling is not supported in V1\n", "0.8.5.post1")):
        other = [f for f in claims_of(line, version=version) if f.site is not None]
        assert all("fix-script" not in f.advice for f in other), line


_BEAM = ("Traceback (most recent call last):\n"
         '  File "/home/u/app/run.py", line 12, in <module>\n'
         "    params = SamplingParams(n=2, use_beam_search=True, best_of=1)\n"
         '  File "/opt/venv/lib/python3.10/site-packages/vllm/sampling_params.py", line 198, in _verify_beam_search\n'
         '    raise ValueError("best_of must be greater than 1 when using beam "\n'
         "ValueError: best_of must be greater than 1 when using beam search. Got 1.\n")


def test_sampling_parameters_refused_without_a_server_handler_were_built_by_a_program() -> None:
    (found,) = [f for f in claims_of(_BEAM, version="0.5.5") if f.site is not None]
    assert "fix-script" in found.advice and "request" in found.advice
    served = _BEAM.replace('"/home/u/app/run.py", line 12, in <module>',
                           '"/opt/venv/lib/python3.10/site-packages/vllm/entrypoints/openai/serving_chat.py", '
                           'line 190, in create_chat_completion')
    (found,) = [f for f in claims_of(served, version="0.5.5") if f.site is not None]
    assert "fix-script" not in found.advice and "request" in found.advice
    # another traceback of the same log (a shutdown's) is not the refusal's
    alone = ("ValueError: best_of must be greater than 1 when using beam search. Got 1.\n"
             "Traceback (most recent call last):\n"
             '  File "/usr/lib/python3.10/asyncio/runners.py", line 44, in run\n'
             "    return loop.run_until_complete(main)\n"
             "KeyboardInterrupt\n")
    (found,) = [f for f in claims_of(alone, version="0.5.5") if f.site is not None]
    assert "fix-script" not in found.advice


def test_the_container_runtime_finding_no_program_on_the_images_path_is_the_tags() -> None:
    for line in ('Error: failed to create containerd task: "vllm": executable file not found in $PATH: unknown\n',
                 'exec: "vllm": executable file not found in $PATH\n'):
        (found,) = [f for f in claims_of(line) if f.id == "below:missing-program:vllm"]
        assert {"pin", "upgrade"} <= set(found.advice), line
    # the OS saying the file is not there is the environment's, not an image tag's
    (found,) = [f for f in claims_of("FileNotFoundError: [Errno 2] No such file or directory: '/usr/bin/vllm'\n")
                if f.id == "below:missing-program:vllm"]
    assert "pin" not in found.advice


def test_argparse_left_with_words_no_argument_takes() -> None:
    (found,) = [f for f in claims_of("vllm: error: unrecognized arguments: /data/Weights/org__model-7b\n")
                if f.id == "cli-refused"]
    assert found.confidence == "medium" and "fix-script" in found.advice and "path" in found.remediation[0]
    # `org/name` is a model id as well as a path's rest: both readings, low
    (repo,) = [f for f in claims_of("api_server.py: error: unrecognized arguments: org/model-7b\n")
               if f.id == "cli-refused"]
    assert repo.confidence == "low" and "--model" in repo.remediation[0]
    (kw,) = [f for f in claims_of("vllm: error: unrecognized arguments: enforce_eager=True\n", version="0.20.1")
             if f.id == "cli-refused"]
    assert kw.knobs == ["--enforce-eager"] and "keyword" in kw.title
    # a refused flag keeps its own reading
    (flag,) = [f for f in claims_of("vllm: error: unrecognized arguments: --no-such-flag\n", version="0.20.1")
               if f.id == "cli-refused"]
    assert "--no-such-flag" in flag.inputs


def test_a_frameworks_checkout_that_drives_vllm_is_the_frameworks() -> None:
    owner = of_path("/home/u/code/skyrl/skyrl/workers/rollout/engine_vllm.py")
    assert owner is not None and (owner.name, owner.package) == ("other", "skyrl")
    for path in ("/home/u/myproj/myproj/train.py", "/home/u/myproj/myproj/run_vllm.py"):
        mine = of_path(path)
        assert mine is not None and mine.name == "user-script", path


_ASSERT = ("/opt/venv/lib/python3.12/site-packages/torch/_inductor/runtime/compile_tasks.py:45: <module>: block: "
           "[12,0,0], thread: [5,0,0] Assertion `index out of bounds: 0 <= tmp7 < 32768` failed.\n"
           "RuntimeError: CUDA error: device-side assert triggered\n")


def _args(length: int) -> str:
    return (f"(APIServer pid=7) INFO 03-01 10:00:00 [utils.py:326] non-default args: {{'model': 'org/m', "
            f"'max_model_len': {length}}}\n")


_DERIVED = ("(APIServer pid=7) WARNING 03-01 10:00:01 [config.py:3500] User-specified max_model_len (65536) is greater "
            "than the derived max_model_len (max_position_embeddings=32768 or model_max_length=None in model's "
            "config.json).\n")


def test_a_kernel_indexing_past_a_table_while_the_server_admits_more_positions() -> None:
    # the log ties the bound to the model's positions: medium
    (found,) = [f for f in claims_of(_args(65536) + _DERIVED + _ASSERT) if f.id == "index-past-positions"]
    assert found.confidence == "medium" and "--max-model-len" in found.knobs and "65536" in found.title
    # the positions fit the table: another table's bound, nothing said
    assert not [f for f in claims_of(_args(16384) + _ASSERT) if f.id == "index-past-positions"]
    # nothing ties the bound to positions (a vocabulary's size is a table too): both readings, low
    for text in (_ASSERT, _args(65536) + _ASSERT):
        (low,) = [f for f in claims_of(text) if f.id == "index-past-positions"]
        assert low.confidence == "low" and "If 32768" in low.summary and "vocabulary" in low.summary


def _type_error(cls: str) -> str:
    return ("Traceback (most recent call last):\n"
            '  File "/opt/venv/lib/python3.12/site-packages/vllm/model_executor/model_loader/base_loader.py", '
            "line 49, in load_model\n"
            "    model = initialize_model(vllm_config=vllm_config, model_config=model_config)\n"
            f"TypeError: {cls}.__init__() got an unexpected keyword argument 'sparse_cfg'\n")


def test_an_attention_backend_refusing_what_the_layers_pass_is_the_backend_choice() -> None:
    (found,) = [f for f in claims_of(_type_error("FlashInferImpl"), version="0.10.2") if f.id.startswith("frame:")]
    assert found.part == "attention" and "VLLM_ATTENTION_BACKEND" in found.knobs
    assert found.switch is not None and "attention backend" in found.switch
    # another class refusing an argument is not the backend's
    (other,) = [f for f in claims_of(_type_error("LlamaModel"), version="0.10.2") if f.id.startswith("frame:")]
    assert "VLLM_ATTENTION_BACKEND" not in other.knobs


def test_a_kernel_librarys_own_csrc_layout_is_that_librarys() -> None:
    line = ("RuntimeError: Failed: Assertion error csrc/jit_kernels/impls/sm90_fp8_gemm_1d2d.hpp:88 "
            "'n % 64 == 0'\n")
    (found,) = [f for f in claims_of(line) if f.id.startswith("below:source:")]
    assert found.owner == "deep-gemm" and "deep-gemm" in found.deps and "VLLM_USE_DEEP_GEMM" in found.knobs
    assert not any("None" in r for r in found.remediation)
    # a file of vLLM's own csrc/ stays vLLM's
    own = [f for f in claims_of("RuntimeError: Assertion error csrc/attention/attention_kernels.cuh:120 'x'\n")
           if f.id.startswith("below:source:")]
    assert all(f.owner == "vllm" for f in own)


_OPS = ("WARNING 03-02 09:00:00 [_custom_ops.py:20] Failed to import from vllm._C with ImportError(\"/src/vllm/vllm/"
        "_C.abi3.so: undefined symbol: _Z16fp8_scaled_mm_xxRN2at6TensorERKS0_\")\n"
        "AttributeError: '_OpNamespace' '_C_cache_ops' object has no attribute 'reshape_and_cache'\n")


def test_vllms_module_built_without_one_of_its_own_kernels_is_the_trees_build() -> None:
    (found,) = [f for f in claims_of(_OPS) if f.id == "unregistered-op:_C_cache_ops"]
    assert {"upgrade", "pin"} <= set(found.advice) and "`fp8_scaled_mm_xx`" in found.remediation[0]
    # a missing symbol of torch's own namespaces is not a kernel of vLLM's the build left out
    torch_sym = _OPS.replace("_Z16fp8_scaled_mm_xxRN2at6TensorERKS0_", "_ZN3c104cuda9SetDeviceEi")
    (other,) = [f for f in claims_of(torch_sym) if f.id == "unregistered-op:_C_cache_ops"]
    assert "pin" not in other.advice
