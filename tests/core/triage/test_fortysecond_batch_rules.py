"""What the forty-second batch's misses taught, general (issue 35): the OpenAI server's tool and reasoning parsers are
the server's part, switched by their flags, and a parser that catches what it raised degrades answers, not the
server; a check's condition says what it read (a value its message quotes is no input); what a check reads of the
model that no flag sets is the checkpoint's config (`--hf-overrides`); an API the server has no handler for was
never set up for the task it was started with; vLLM's platform probes name the host's platform's reason; an address a
listener could not bind is its component's host or port variable; a package vLLM's KV-connector code calls is a
plugin; AMD SMI's file errors and ROCm's GPU memory faults are read below vLLM. Lines in the shapes public threads
show (tests/cases-fortysecond)."""

from __future__ import annotations

from bot.core.parts import part_of
from bot.core.switches import for_frame
from tests.core.triage.reports import claims_of as _claims
from tests.core.triage.reports import report_of as _report


def test_the_servers_parsers_are_its_part_and_their_flags_switch_them() -> None:
    assert part_of("vllm/tool_parsers/glm4_moe_tool_parser.py") == "entrypoint"
    assert part_of("vllm/reasoning/abs_reasoning_parsers.py") == "entrypoint"
    tool = for_frame("vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py", "extract_tool_calls")
    assert tool is not None and tool.id == "tool-call-parser"
    off = tool.for_release("0.10.2")
    assert off is not None and off.knob == "--tool-call-parser"
    reasoning = for_frame("vllm/reasoning/deepseek_r1_reasoning_parser.py", None)
    assert reasoning is not None and reasoning.id == "reasoning-parser"


_PARSER = (
    "ERROR [glm4_moe_tool_parser.py:123] Failed to extract tool call spec\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/tool_parsers/glm4_moe_tool_parser.py", line 104, in '
    "extract_tool_calls\n"
    "    pairs = self.func_arg_regex.findall(tc_args)\n"
    "TypeError: expected string or buffer\n")


def test_a_traceback_a_parser_caught_and_logged_degrades_answers_not_the_server() -> None:
    r = _report(_PARSER, "0.14.0")
    assert r.verdict == "degraded"
    f = next(c for c in _claims(_PARSER, "0.14.0") if c.id.startswith("frame:"))
    assert f.severity == "warning" and f.part == "entrypoint" and "--tool-call-parser" in f.knobs
    # the same traceback after a serving handler's record: the request was refused, not answered as text
    served = _PARSER.replace("ERROR [glm4_moe_tool_parser.py:123] Failed to extract tool call spec",
                             "ERROR [serving_chat.py:200] Error in preprocessing prompt inputs")
    assert _report(served, "0.14.0").verdict == "failing"
    # and with a later exception of the launch, the server did end
    ended = _PARSER + "RuntimeError: Engine core initialization failed. See root cause above.\n"
    assert _report(ended, "0.14.0").verdict == "failing"


_MATRYOSHKA = ('ValueError: Model "Qwen/Acme-Embedding" does not support matryoshka representation, changing output '
               "dimensions will lead to poor results.\n")


def test_a_property_of_the_models_config_no_flag_sets_is_the_checkpoints_config() -> None:
    f = next(c for c in _claims(_MATRYOSHKA, "0.11.2") if c.site is not None)
    assert "is_matryoshka" in f.inputs and "checkpoint" in f.inputs and "--hf-overrides" in f.knobs
    # the model's name the message quotes is not what the check read
    assert "--served-model-name" not in f.inputs


def test_an_api_the_server_never_set_up_names_the_runner_or_the_task() -> None:
    new = next(c for c in _claims("The model does not support Embeddings API\n", "0.12.0") if c.site is not None)
    assert {"--runner", "--convert"} <= set(new.knobs)
    old = next(c for c in _claims("The model does not support Embeddings API\n", "0.9.2") if c.site is not None)
    assert "--task" in old.knobs or "--runner" in old.knobs


_PROBES = (
    "DEBUG 09-10 18:43:10 [__init__.py:58] Checking if CUDA platform is available.\n"
    "DEBUG 09-10 18:43:10 [__init__.py:82] Exception happens when checking CUDA platform: NVML Shared Library Not "
    "Found\n"
    "DEBUG 09-10 18:43:10 [__init__.py:99] CUDA platform is not available because: NVML Shared Library Not Found\n"
    "DEBUG 09-10 18:43:10 [__init__.py:106] Checking if ROCm platform is available.\n"
    "DEBUG 09-10 18:43:10 [__init__.py:120] ROCm platform is not available because: No module named 'amdsmi'\n"
    "INFO 09-10 18:43:10 [__init__.py:220] No platform detected, vLLM is running on UnspecifiedPlatform\n")


def test_the_platform_probe_of_the_hosts_own_gpu_names_the_cause() -> None:
    amd = _claims(_PROBES, gpu="AMD Instinct MI300X")
    probe = next(f for f in amd if f.id == "platform-probe:rocm")
    assert probe.deps == ["amdsmi"]
    assert not any("nvml" in f.id for f in amd)  # CUDA's reason is what another host would lack
    # an NVIDIA host: CUDA's reason stands, no ROCm claim
    nvidia = _claims(_PROBES, gpu="NVIDIA L4")
    assert any("nvml" in f.id for f in nvidia) and not any(f.id == "platform-probe:rocm" for f in nvidia)
    # the host's kind unknown: no one platform's reason is sure
    unknown = _report(_PROBES).findings
    assert all(f.confidence == "low" for f in unknown if "nvml" in f.id)


def test_the_cpu_build_is_named_when_no_platform_is_found() -> None:
    f = next(c for c in _claims("RuntimeError: Failed to infer device type\n") if c.id == "vllm-platform-not-detected")
    assert "VLLM_TARGET_DEVICE" in " ".join(f.remediation)


_BIND = (
    "zmq.error.ZMQError: Cannot assign requested address (addr='tcp://node-a:34762')\n"
    "Exception in thread nixl_handshake_listener:\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py",'
    " line 409, in _nixl_handshake_listener\n"
    "    with zmq_ctx(zmq.ROUTER, path) as sock:\n")


def test_an_address_a_listener_could_not_bind_is_its_components_host_variable() -> None:
    f = next(c for c in _claims(_BIND, "0.10.2") if c.id.startswith("bind-address:"))
    assert f.knobs == ["VLLM_NIXL_SIDE_CHANNEL_HOST"] and f.part == "kv-cache"
    taken = next(c for c in _claims(_BIND.replace("Cannot assign requested address", "Address already in use"),
                                    "0.10.2") if c.id.startswith("bind-address:"))
    assert taken.knobs == ["VLLM_NIXL_SIDE_CHANNEL_PORT"]
    # no frame of a vLLM component beside it: nothing claimed about vLLM's variables
    assert not any(c.id.startswith("bind-address:") for c in _claims(_BIND.splitlines()[0] + "\n", "0.10.2"))


_OFFLOAD = (
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/kv_offload/worker/worker.py", line 135, in '
    "transfer_async\n"
    "    success = handler.transfer_async(job_id, spec)\n"
    '  File "/usr/local/lib/python3.12/dist-packages/acme_offload/worker.py", line 300, in _build_transfer\n'
    "    assert key == group_idx\n"
    "AssertionError: Expected group_idx=1 but key encodes 0\n")


def test_a_package_vllms_kv_connector_code_calls_is_a_plugin() -> None:
    f = next(c for c in _claims(_OFFLOAD, "0.20.1") if c.id.startswith("frame:"))
    assert f.owner == "plugin"
    # the same package called from vLLM's model code is a library, not a plugin
    other = _OFFLOAD.replace("vllm/v1/kv_offload/worker/worker.py", "vllm/model_executor/models/llama.py")
    g = next(c for c in _claims(other, "0.20.1") if c.id.startswith("frame:"))
    assert g.owner != "plugin"


def test_amd_smi_unable_to_read_the_gpus_files_is_the_devices_access() -> None:
    f = next(c for c in _claims("AmdSmiLibraryException: Error code: 14 | AMDSMI_STATUS_FILE_ERROR\n")
             if "amdsmi" in c.id)
    assert "device-visibility" in f.host and f.inputs == ["HIP_VISIBLE_DEVICES"]


_FAULT = (
    "[aiter] LoadKernel: _ZN5aiter43fmoe_bf16_blockscaleFp8_g1u1_vs_silu_32x384E hsaco: /opt/aiter/fmoe.co\n"
    "Memory access fault by GPU node-3 (Agent handle: 0x13e852f0) on address 0x77d445e00000. Reason: Unknown.\n")


def test_a_rocm_memory_fault_beside_a_librarys_kernel_names_the_switches_that_prove_it() -> None:
    f = next(c for c in _claims(_FAULT, "0.21.0") if c.id == "rocm-gpu-memory-fault")
    assert f.owner == "aiter" and f.knobs[:2] == ["VLLM_ROCM_USE_AITER", "VLLM_ROCM_USE_AITER_MOE"]
    assert f.confidence == "medium"
    bare = next(c for c in _claims(_FAULT.splitlines()[1] + "\n", "0.21.0") if c.id == "rocm-gpu-memory-fault")
    assert bare.owner is None and bare.confidence == "low" and "AMD_SERIALIZE_KERNEL" in bare.knobs


_DECODE = (
    '(APIServer pid=1)   File "/usr/lib/python3.12/json/decoder.py", line 354, in raw_decode\n'
    "(APIServer pid=1)     obj, end = self.scan_once(s, idx)\n"
    "(APIServer pid=1) json.decoder.JSONDecodeError: Unterminated string starting at: line 1 column 14 (char 13)\n")


def test_the_api_server_unable_to_parse_a_requests_text_is_that_request() -> None:
    answered = _DECODE + '(APIServer pid=1) INFO:     127.0.0.1:41890 - "GET /health HTTP/1.1" 200 OK\n'
    r = _report(answered)
    f = next(c for c in r.findings if c.id == "api-server-request-decode")
    assert r.verdict == "degraded" and f.inputs == ["request"] and f.part == "entrypoint"
    # no answer after it: the request's failure is all the log shows, not a server known to go on
    g = next(c for c in _report(_DECODE).findings if c.id == "api-server-request-decode")
    assert g.severity == "critical"
    # a decoder raising in another process (a worker reading a file) is not a request's
    worker = _report(_DECODE.replace("APIServer", "Worker"))
    assert not any(c.id == "api-server-request-decode" for c in worker.findings)
