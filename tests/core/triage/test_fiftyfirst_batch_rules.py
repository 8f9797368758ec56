"""Rules from the fifty-first batch's misses, general: a refusal's flags read in the releases that print it when the
log does not say its release; a log of only Python's own warnings is only notices; a multimodal check of what one
request sent is the request's; an undefined symbol of torch's C++ is torch's; a platform's list of quantization
methods names the checkpoint and the GPU; nvcc not knowing the build's architecture is the toolkit's; Python
refusing a call to a Hugging Face processor's constructor is transformers'."""

from __future__ import annotations

from tests.core.triage.reports import claims_of, report_of


def test_a_refusals_flag_is_read_in_the_releases_that_print_it() -> None:
    claims = claims_of("ValueError: Too large swap space. 4.00 GiB out of the 4.30 GiB total CPU memory is allocated "
                       "for the swap space.\n")
    assert any("--swap-space" in f.knobs for f in claims), [(f.id, f.knobs) for f in claims]


def test_a_log_of_only_pythons_own_warnings_is_only_notices() -> None:
    warned = report_of("/opt/venv/lib/python3.12/site-packages/vllm/entrypoints/openai/protocol.py:346: "
                       "SyntaxWarning: invalid escape sequence '\\e'\n")
    assert warned.verdict == "healthy"
    crashed = report_of("/opt/venv/lib/python3.12/site-packages/vllm/x.py:8: RuntimeWarning: something\n"
                        "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert crashed.verdict == "failing"


def test_a_multimodal_check_of_one_request_is_the_requests() -> None:
    claims = claims_of("ValueError: At most 8 image(s) may be provided in one prompt. Set `--limit-mm-per-prompt` "
                       "to increase this limit.\n")
    assert any("request" in f.inputs and "--limit-mm-per-prompt" in f.knobs for f in claims)


def test_an_undefined_symbol_of_torchs_cpp_is_torchs() -> None:
    torch = claims_of("ImportError: /opt/venv/lib/python3.11/site-packages/vllm/_C.cpython-311-x86_64-linux-gnu.so: "
                      "undefined symbol: _ZN2at4_ops15to_dtype_layout4callERKNS_6TensorE\n")
    assert any(f.owner == "torch" and "torch" in f.deps for f in torch)
    other = claims_of("ImportError: /opt/venv/lib/python3.11/site-packages/vllm/_C.cpython-311-x86_64-linux-gnu.so: "
                      "undefined symbol: cuTensorMapEncodeTiled\n")
    assert not any(f.owner == "torch" for f in other)


def test_a_platforms_list_of_quantization_methods_names_the_checkpoint_and_the_gpu() -> None:
    claims = claims_of("ValueError: fbgemm_fp8 quantization is currently not supported in ROCm.\n")
    found = [f for f in claims if "checkpoint" in f.advice]
    assert found and "gpu" in found[0].inputs


def test_nvcc_not_knowing_the_builds_architecture_is_the_toolkits() -> None:
    claims = claims_of("      nvcc fatal   : Unsupported gpu architecture 'compute_90'\n")
    assert any("cuda-toolkit" in f.host and "gpu" in f.inputs for f in claims), [(f.id, f.host) for f in claims]


def test_python_refusing_a_call_to_a_processors_constructor_is_transformers() -> None:
    claims = claims_of("TypeError: Qwen2_5_VLProcessor.__init__() got multiple values for argument "
                       "'image_processor'\n")
    found = [f for f in claims if f.id.startswith("library-class:processor:")]
    assert found and found[0].owner == "transformers" and "transformers" in found[0].deps
    assert not any(f.id.startswith("library-class:processor:")
                   for f in claims_of("TypeError: LLM.__init__() got an unexpected keyword argument 'foo'\n"))
