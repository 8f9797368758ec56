"""Rules from the fifty-sixth batch's misses, general: a shell given where the server's options belong (a container's
command appended to an image whose entrypoint is the server); an extension's check of the package it extends; a
wrapper quoting a refused call into vLLM's API; a class vLLM removed, imported with no traceback; a plugin's compiled
module a logger could not import; vLLM's parallel state already set up in the process; a TPU held by another
process."""

from __future__ import annotations

from tests.core.triage.reports import claims_of


def test_a_shell_given_as_the_servers_arguments_is_the_containers_command() -> None:
    line = ("api_server.py: error: unrecognized arguments: /bin/bash -c cd / && python3 -m "
            "vllm.entrypoints.openai.api_server --model m --port 80\n")
    found = [f for f in claims_of(line) if f.id == "cli-refused"]
    assert found and "fix-script" in found[0].advice and found[0].owner == "user-script"
    assert "--entrypoint /bin/bash" in found[0].remediation[0]
    # the subcommand given twice keeps its own advice; an unknown word is not a shell
    assert "already runs it" in next(f for f in claims_of("vllm: error: unrecognized arguments: serve m\n")
                                     if f.id == "cli-refused").remediation[0]
    assert not [f for f in claims_of("vllm: error: unrecognized arguments: bashful\n") if f.id == "cli-refused"]


def test_an_extensions_check_of_the_package_it_extends_names_the_pair() -> None:
    line = ("ERROR! Intel® Extension for PyTorch* needs to work with PyTorch 2.6.*, but PyTorch 2.7.0+cpu is found. "
            "Please switch to the matching version and run again.\n")
    found = [f for f in claims_of(line) if f.id == "version-asked:torch"]
    assert found and found[0].deps == ["torch"] and found[0].owner == "other" and found[0].part == "platform"
    # a package asking for a version itself keeps that package as the owner
    asked = [f for f in claims_of("RuntimeError: Please upgrade to torch >= 2.11.0 (found 2.10.0+cu128)\n")
             if f.id.startswith("version-asked:")]
    assert asked and asked[0].owner == "torch" and asked[0].part is None


def test_a_wrapper_quoting_a_refused_api_call_is_the_callers() -> None:
    line = ('gradio.exceptions.Error: "Error in interaction: Error in generating model output:\\nLLM.generate() got '
            "an unexpected keyword argument 'guided_options_request'\"\n")
    found = [f for f in claims_of(line) if f.id == "api-call:LLM.generate"]
    assert found and found[0].owner == "user-script" and set(found[0].advice) == {"fix-script", "pin"}
    assert found[0].inputs == ["guided_options_request"]
    # a call of a class that is not vLLM's API is not placed there
    assert not [f for f in claims_of('gradio.exceptions.Error: "failed:\\nFoo.bar() got an unexpected keyword '
                                     "argument 'x'\"\n") if f.id.startswith("api-call:")]


def test_a_class_vllm_removed_imported_without_frames_says_its_last_release() -> None:
    found = [f for f in claims_of("ImportError: cannot import name 'GuidedDecodingParams' from "
                                  "'vllm.sampling_params'\n") if f.id.startswith("missing-vllm-module:")]
    assert found and "pin" in found[0].advice and "0.11.2" in found[0].summary


def test_a_plugins_compiled_module_a_logger_could_not_import_is_the_plugins() -> None:
    line = ("2025-06-07T08:10:41.790Z ERROR camem: Failed to import vllm_ascend_C:libvllm_ascend_kernels.so: cannot "
            "open shared object file: No such file or directory\n")
    found = [f for f in claims_of(line) if f.id == "below:loader:cannot-open-shared-object"]
    assert found and found[0].owner == "plugin" and "disable-plugin" in found[0].advice
    assert found[0].deps == ["vllm_ascend"]


def test_parallel_state_already_set_up_is_a_second_engine_in_the_process() -> None:
    found = [f for f in claims_of("AssertionError: data parallel group is already initialized\n")
             if f.site is not None]
    assert found and found[0].owner == "user-script" and found[0].advice == ["fix-script"]
    assert found[0].remediation[0].startswith("This process already holds vLLM's parallel state")
    # another check of vLLM's with the same words, outside the parallel state, keeps its own reading
    other = [f for f in claims_of("AssertionError: Attention backends are already initialized\n")
             if f.site is not None]
    assert other and other[0].owner == "vllm"


def test_a_busy_tpu_device_is_held_by_another_process() -> None:
    line = ("RuntimeError: Unable to initialize backend 'tpu': UNKNOWN: TPU initialization failed: open(/dev/vfio/0): "
            "Device or resource busy: Device or resource busy; Couldn't open iommu group /dev/vfio/0\n")
    found = [f for f in claims_of(line) if f.id == "tpu-device-held-by-another-process"]
    assert found and "device-visibility" in found[0].host
