"""Rules from the seventieth batch's misses, general: a value vLLM's parse function refused is that flag's (not
--speculative-config's); CUDA met in vLLM's own forked child, on a release that checks before it forks, is the
release's; torch.distributed's store client giving up names the address the ranks meet at; writing refused inside an
installed package's own folder is that package's and the folder's owner; FlashInfer's run-time compiler finding no
CUDA toolkit; a `vllm serve` command a launcher printed, with a flag the release does not have and nothing after it."""

from __future__ import annotations

from tests.core.triage.reports import claims_of, report_of
from tests.support.processes import finishes_within


def test_a_value_refused_by_another_flags_parse_function_is_that_flags() -> None:
    line = ("vllm serve: error: argument --limit-mm-per-prompt: Value image=4,audio=1 cannot be converted to "
            "<function loads at 0x7f>\n")
    found = claims_of(line)
    assert not [f for f in found if f.id == "spec-config-json-split"]
    (refused,) = [f for f in found if f.id == "cli-refused"]
    assert refused.knobs == ["--limit-mm-per-prompt"] and "JSON object" in refused.remediation[0]
    # another parse function (`human_readable_int`) is no JSON: no JSON remedy
    other = ("vllm serve: error: argument --max-model-len: Value 32kk cannot be converted to "
             "<function human_readable_int>\n")
    (plain,) = [f for f in claims_of(other) if f.id == "cli-refused"]
    assert not any("JSON" in r for r in plain.remediation)
    # a long run of words before the value is read in bounded time (no quadratic backtracking)
    # (in a forked child with a deadline: a backtracking pattern fails the test instead of hanging it)
    assert finishes_within(60, lambda: claims_of("RuntimeError: cannot be converted to " + "Value " * 16000 + "\n"))
    # the speculative config's own value, named or not, stays that entry's
    for spec in ("vllm serve: error: argument --speculative-config: Value {method: cannot be converted to "
                 "<function loads at 0x7f>\n", "Value {method: cannot be converted to <function loads at 0x7f>\n"):
        assert [f for f in claims_of(spec) if f.id == "spec-config-json-split"]


_FORKED = ("ERROR 03-17 01:09:24 [core.py:337] RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use "
           "CUDA with multiprocessing, you must use the 'spawn' start method\n")


def test_cuda_met_in_vllms_own_forked_child_is_the_releases() -> None:
    (found,) = [f for f in claims_of(_FORKED, version="0.20.1") if f.id == "cuda-reinit-in-forked-worker"]
    assert found.owner == "vllm" and "upgrade" in found.advice and "fix-script" not in found.advice
    assert found.confidence == "medium" and "VLLM_WORKER_MULTIPROC_METHOD" in found.knobs
    # no release given: the same reading, less sure; a release no version reads: not re-read
    (unsure,) = [f for f in claims_of(_FORKED) if f.id == "cuda-reinit-in-forked-worker"]
    assert unsure.owner == "vllm" and unsure.confidence == "low"
    (named,) = [f for f in claims_of(_FORKED, version="main") if f.id == "cuda-reinit-in-forked-worker"]
    assert named.owner is None
    # a release before the check: the script's order may be the cause, as before
    (old,) = [f for f in claims_of(_FORKED, version="0.6.3") if f.id == "cuda-reinit-in-forked-worker"]
    assert old.owner is None and "fix-script" in old.advice
    # no sign the child is vLLM's, or an NPU: the entry as it was
    for line in ("RuntimeError: Cannot re-initialize CUDA in forked subprocess.\n",
                 "ERROR [core.py:337] RuntimeError: Cannot re-initialize NPU in forked subprocess.\n"):
        (plain,) = [f for f in claims_of(line) if f.id == "cuda-reinit-in-forked-worker"]
        assert plain.owner is None


def test_the_store_client_giving_up_names_the_rendezvous_address() -> None:
    line = ("torch.distributed.DistNetworkError: The client socket has timed out after 600s while trying to connect "
            "to (127.0.0.1, 53591).\n")
    (found,) = [f for f in claims_of(line) if f.id.startswith("below:nccl-hint:")]
    assert "network" in found.host and "VLLM_HOST_IP" in " ".join(found.remediation)


def test_writing_refused_inside_an_installed_package() -> None:
    line = ("PermissionError: [Errno 13] Permission denied: "
            "/usr/local/lib/python3.12/dist-packages/flashinfer_cubin/cubins/flashinfer\n")
    (found,) = [f for f in claims_of(line) if f.id.startswith("unwritable-package:")]
    assert found.owner == "flashinfer" and found.host == ["permissions"] and found.severity == "critical"
    # a file or a program in a package (a read or a run refused as often), or NVIDIA's shared namespace: not claimed
    for other in ("'/usr/lib/python3/site-packages/triton/backends/nvidia/bin/ptxas'",
                  "'/usr/lib/python3/site-packages/transformers/models/x/config.json'",
                  "'/usr/lib/python3/dist-packages/nvidia/cuda_nvcc/lib'"):
        assert not [f for f in claims_of(f"PermissionError: [Errno 13] Permission denied: {other}\n")
                    if f.id.startswith("unwritable-package:")]
    # a cache's folder stays the cache's finding; a path outside any package is no package's
    assert not [f for f in claims_of("PermissionError: [Errno 13] Permission denied: '/.triton'\n")
                if f.id.startswith("unwritable-package:")]
    assert not [f for f in claims_of("PermissionError: [Errno 13] Permission denied: '/srv/models/x'\n")
                if f.id.startswith("unwritable-package:")]


def test_flashinfers_compiler_without_a_cuda_toolkit() -> None:
    line = "RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist\n"
    (found,) = [f for f in claims_of(line) if f.id.startswith("below:cuda:flashinfer")]
    assert found.owner == "flashinfer" and "cuda-toolkit" in found.host and "flashinfer" in found.deps
    assert found.title.startswith("FlashInfer: ")


_LAUNCHER = ("2025-07-25 10:11:49 - launcher - DEBUG - Run vLLM with arguments: serve /models/m --max-model-len 8192 "
             "--enable-reasoning --reasoning-parser=deepseek_r1 --port 40057\n")


def test_a_printed_command_with_a_flag_the_release_does_not_have() -> None:
    (found,) = [f for f in claims_of(_LAUNCHER, version="0.10.2") if f.id == "launch-flag-unknown"]
    assert found.knobs[0] == "--enable-reasoning" and found.confidence == "medium"
    assert report_of(_LAUNCHER, version="0.10.2").verdict == "failing"
    # a release between the last that has it and the next read: its own help names the removal
    assert [f for f in claims_of(_LAUNCHER, version="0.10.0") if f.id == "launch-flag-unknown"]
    # argparse's own forms (`--no-X`, `--x_y`, `--help`) and the next command's flags after a pipe are no refusal
    for tail in ("--no-enable-prefix-caching --max_model_len 8 --help", "2>&1 | tee --append log",
                 "&& curl --fail x", "; python b.py --num-prompts 3"):
        line = f"+ vllm serve /m --port 8000 {tail}\n"
        assert not [f for f in claims_of(line, version="0.10.2") if f.id == "launch-flag-unknown"]
    # a release between two the atlas read, a pre-release of the removal, or a version no release reads: not guessed
    for version in ("0.11.0", "0.11.1rc2.dev7"):
        line = "+ vllm serve /m --aggregate-engine-logging\n"
        assert not [f for f in claims_of(line, version=version) if f.id == "launch-flag-unknown"]
    for version in ("0.10.0rc1", "0.9.x", "main"):
        assert not [f for f in claims_of(_LAUNCHER, version=version) if f.id == "launch-flag-unknown"]
    # a record of vLLM's after the command: it took it
    went_on = "WARNING 01-01 00:00:00 [arg_utils.py:1] --enable-reasoning is deprecated\n"
    assert not [f for f in claims_of(_LAUNCHER + went_on, version="0.10.0") if f.id == "launch-flag-unknown"]
    # a release that has it, no release given, or vLLM's start after the command: nothing claimed
    for version, after in (("0.9.2", ""), (None, ""),
                           ("0.10.2", "INFO 01-01 00:00:00 [api_server.py:1] non-default args: {'model': 'm'}\n")):
        assert not [f for f in claims_of(_LAUNCHER + after, version=version) if f.id == "launch-flag-unknown"]


def test_an_entry_point_vllms_flashinfer_wrapper_did_not_define() -> None:
    text = ('File ".../vllm/model_executor/kernels/linear/mxfp8/flashinfer.py", line 81, in apply_weights\n'
            "    output = vllm_flashinfer.mm_mxfp8(\n"
            "AttributeError: module 'vllm.utils.flashinfer' has no attribute 'mm_mxfp8'\n")
    (found,) = [f for f in claims_of(text) if f.id.startswith("frame:")]
    assert "cuda-toolkit" in found.host and "flashinfer" in found.deps
    assert "Two readings" in " ".join(found.remediation)  # a name defined unconditionally: files of two versions
    other = text.replace("vllm.utils.flashinfer", "vllm.utils.other")
    (mixed,) = [f for f in claims_of(other) if f.id.startswith("frame:")]
    assert "cuda-toolkit" not in mixed.host


def test_the_second_review_of_these_rules() -> None:
    # a release newer than every one the atlas read: a flag it never read may be that release's own
    line = "+ vllm serve /m --brand-new-flag 1\n"
    for version in ("0.35.0", "0.34.1.dev12+gabc"):
        assert not [f for f in claims_of(line, version=version) if f.id == "launch-flag-unknown"]
    # the next command after `;` (no blank before it) and a unique prefix argparse takes
    for tail in ("--port 8000; curl --fail x", "--max-model 8"):
        assert not [f for f in claims_of(f"+ vllm serve /m {tail}\n", version="0.10.2")
                    if f.id == "launch-flag-unknown"]
    # the next pydantic header's fields are its own
    text = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ChatCompletionRequest\n"
            "messages\n  Field required [type=missing]\n"
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig\n"
            "scale_dtype  Extra inputs are not permitted\n")
    assert not [f for f in claims_of(text) if f.id == "extra-fields:ChatCompletionRequest"]
