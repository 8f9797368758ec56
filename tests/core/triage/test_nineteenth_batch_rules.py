"""The general rules the nineteenth blind batch's first sight asked for (issue 35): an exception message a terminal
wrapped inside a word is read whole; vLLM's compile backend failing names the compile, or its cache when what it
raised says an artifact is corrupt; a raise site without a traceback offers its part's switch; PyTorch's check of
Triton's minimum capability is a GPU requirement; a debugger's hooks are neither the user's program nor vLLM; a
container that ran a flag as its program, and a command given twice, are the launch's; the interpreter that cannot
import vLLM is not vLLM's words. Lines as the programs print them, none of them a line of the evaluation cases."""

from __future__ import annotations

from bot.core import owners
from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings


def report(lines: list[str], **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text("\n".join(lines)), flags=Flags(**flags))))


def test_a_message_wrapped_inside_a_word_is_still_placed() -> None:
    # vLLM's own compile failure (vllm/compilation/compiler_interface.py), hard-wrapped inside "corrupted"
    r = report(["RuntimeError: vLLM failed to compile the model. The most likely reason for this is that a previous "
                "compilation failed, leading to a corr",
                "upted compilation artifact. We recommend trying to remove ~/.cache/vllm/torch_compile_cache and try "
                "again to see the real issue."])
    f = next(f for f in r.findings if f.severity == "critical" and f.id.startswith("atlas:"))
    assert "compiler_interface.py" in f.id and f.part == "compilation"
    assert any("compilation-config" in x or "enforce-eager" in x for x in f.remediation)  # the part's switch


def test_the_compile_backend_failing_on_a_corrupt_artifact_names_the_cache() -> None:
    # Dynamo's wrapper naming vLLM's backend (torch/_dynamo/exc.py), then what the backend raised
    r = report(["torch._dynamo.exc.BackendCompilerFailed: backend='<vllm.compilation.backends.VllmBackend object at "
                "0x7f00>' raised:",
                "RuntimeError: Bytes object is corrupted, checksum does not match."])
    f = next(f for f in r.findings if f.id == "vllm-compile-backend-failed")
    assert "VLLM_DISABLE_COMPILE_CACHE" in f.knobs and f.part == "compilation"
    plain = report(["torch._dynamo.exc.BackendCompilerFailed: backend='<vllm.compilation.backends.VllmBackend object "
                    "at 0x7f00>' raised:", "AssertionError: expected a tensor"])
    assert "VLLM_DISABLE_COMPILE_CACHE" not in next(f for f in plain.findings
                                                   if f.id == "vllm-compile-backend-failed").knobs


def test_tritons_minimum_capability_is_a_gpu_requirement() -> None:
    # PyTorch's check before Inductor uses Triton (torch/_inductor)
    r = report(["RuntimeError: Found Quadro P6000 which is too old to be supported by the triton GPU compiler, which "
                "is used as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is "
                "of CUDA capability 6.1"])
    f = next(f for f in r.findings if f.id == "gpu-too-old")
    assert "gpu" in f.inputs and "gpu" in f.host


def test_a_debuggers_frames_are_the_debuggers() -> None:
    assert owners.of_path("_pydevd_bundle/pydevd_frame.py").name == "debugger"
    assert owners.of_path("/home/me/.vscode/extensions/ms-python.debugpy/bundled/libs/debugpy/_vendored/x.py").name \
        == "debugger"


def test_a_container_that_ran_a_flag_as_its_program() -> None:
    # the runtime's error (Go's exec.LookPath, as Docker reports it)
    r = report(['docker: Error response from daemon: failed to create task: exec: "--port": executable file not '
                'found in $PATH'])
    f = next(f for f in r.findings if f.id == "container-command-is-a-flag")
    assert f.owner == "user-script" and "fix-script" in f.advice


def test_a_command_given_twice_is_the_launchs() -> None:
    r = report(["vllm: error: unrecognized arguments: serve Qwen/Qwen3-8B"])
    f = next(f for f in r.findings if f.id == "cli-refused")
    assert f.owner == "user-script" and "fix-script" in f.advice


def test_the_interpreter_that_cannot_import_vllm_is_not_vllms_words() -> None:
    # CPython's runpy error for `python3 -m vllm.entrypoints.openai.api_server`
    r = report(["/opt/conda/bin/python3.11: Error while finding module specification for "
                "'vllm.entrypoints.openai.api_server' (ModuleNotFoundError: No module named 'vllm')"])
    f = next(f for f in r.findings if f.severity == "critical")
    assert f.id == "vllm-not-importable" and not any(g.id.startswith("atlas:") and g.severity == "critical"
                                                    for g in r.findings)
