"""Rules from the sixty-second batch's misses, general: a wait of vLLM's that ran out names its own timeout variable
(from the variables' help text in the user's release), before any part's switch; a compiled module named alone
belongs to the package it is named for; the hybrid KV cache manager off for a hybrid model (what turns it off in the
release; a connector refusing it on, then the failure with it off); argparse's refusal quoted without the program;
PyTorch's own C++ source is not vLLM's; the code a checkpoint ships (trust_remote_code) is the checkpoint's."""

from __future__ import annotations

from tests.core.triage.reports import claims_of, report_of


def test_a_wait_that_ran_out_names_vllms_own_timeout_variable_first() -> None:
    line = "vllm.v1.engine.exceptions.EngineDeadError: RPC call to execute_model timed out\n"
    found = [f for f in claims_of(line, version="0.26.0") if "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" in f.knobs]
    assert found and "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" in found[0].remediation[0]
    assert "VLLM_RPC_TIMEOUT" not in found[0].knobs
    # a release without the variable names none; nor does a wait whose words no timeout variable's help shares alone
    assert not [f for f in claims_of(line, version="0.8.5.post1") if "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" in f.knobs]
    other = "TimeoutError: Timed out waiting for the engine core to process the request\n"
    assert not [f for f in claims_of(other, version="0.26.0") for k in f.knobs if "TIMEOUT" in k]


def test_a_compiled_module_named_alone_belongs_to_its_package() -> None:
    line = ("ImportError: .../flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so: undefined symbol: "
            "_ZN3c104cuda9SetDevice\n")
    found = [f for f in claims_of(line) if f.id.startswith("below:loader")]
    assert found and "flash-attn" in found[0].deps
    # a library of no known package stays as it was named
    for other in ("ImportError: /opt/app/libthing.so: undefined symbol: _ZN3foo3barEv\n",
                  "ImportError: /opt/app/my_ext_cuda.so: undefined symbol: _ZN3foo3barEv\n"):
        named = {x for f in claims_of(other) for x in (*f.deps, f.owner or "")}
        assert not named & {"libthing", "my-ext", "my_ext", "my-ext-cuda"}, (other, named)


_UNIFY = ("ValueError: Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one unified "
          "type.\n")


def test_a_hybrid_model_with_the_manager_off_names_what_turns_it_off_in_the_release() -> None:
    found = [f for f in claims_of(_UNIFY, version="0.24.0") if f.site is not None
             and f.site.function.endswith("unify_hybrid_kv_cache_specs")]
    assert found and "--kv-transfer-config" in found[0].knobs


def test_a_connector_refusing_the_manager_then_the_failure_without_it_is_that_pair() -> None:
    text = ("ValueError: Connector AcmeConnector does not support HMA but HMA is enabled. Please set "
            "`--disable-hybrid-kv-cache-manager`.\n" + _UNIFY)
    claims = claims_of(text, version="0.24.0")
    assert not [f for f in claims if "--disable-hybrid-kv-cache-manager" in f.knobs]
    (failed,) = [f for f in claims if f.site is not None and f.site.function.endswith("unify_hybrid_kv_cache_specs")]
    assert "AcmeConnector" in failed.remediation[0] and "disable-plugin" in failed.advice
    # the refusal alone keeps its own advice
    alone = claims_of(text.splitlines()[0] + "\n", version="0.24.0")
    assert any("--disable-hybrid-kv-cache-manager" in f.knobs for f in alone)


def test_argparse_quoted_without_its_program_is_a_refusal_and_its_reading_is_hedged() -> None:
    (found,) = [f for f in claims_of("unrecognized arguments: --served-model-name\n") if f.id == "cli-refused"]
    assert found.confidence == "medium" and "--served-model-name" in found.inputs
    assert any("vllm serve --help" in r for r in found.remediation)
    # named by vLLM's own program, it is that release's parser
    named = [f for f in claims_of("vllm: error: unrecognized arguments: --served-model-name\n")
             if f.id == "cli-refused"]
    assert named and named[0].confidence == "high"


def test_pytorchs_own_cpp_source_is_not_vllms() -> None:
    line = ("/venv/lib/python3.10/site-packages/torch/nn/modules/transformer.py:20: UserWarning: Failed to initialize "
            "NumPy: No module named 'numpy' (Triggered internally at ../torch/csrc/utils/tensor_numpy.cpp:84.)\n")
    assert not [f for f in report_of(line).findings if f.id.startswith("below:source:")]
    # a kernel library's tree in the same shape still names its source
    kernel = line.replace("../torch/csrc/utils/tensor_numpy.cpp:84", "../flashinfer/csrc/sampling.cu:84")
    assert [f for f in report_of(kernel).findings if f.id.startswith("below:source:")]


def test_the_code_a_checkpoint_ships_is_the_checkpoints() -> None:
    text = ("Traceback (most recent call last):\n"
            '  File "/root/.cache/huggingface/modules/transformers_modules/acme/tiny-model/0123abcd/modeling_tiny.py", '
            "line 12, in <module>\n"
            "    from transformers.utils import is_flash_attn_available\n"
            "ImportError: cannot import name 'is_flash_attn_available' from 'transformers.utils'\n")
    found = [f for f in claims_of(text) if f.owner == "remote-code"]
    assert found and "checkpoint" in found[0].inputs and "transformers" in found[0].deps
    assert "acme/tiny-model" in " ".join(found[0].remediation)
