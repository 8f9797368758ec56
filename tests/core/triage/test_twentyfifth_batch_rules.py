"""What the twenty-fifth batch's misses taught, general (issue 35): Ray's process tag carries the node's address, a
site whose sentence is Python's own (`No module named …`) names no site alone, a paste's bold and day column are not
the line, and a stack dump (faulthandler) lists the innermost call first — a process stuck in a collective is the
hang NCCL's watchdog reports; and the twenty-sixth's: a registry's refusal worded `Must be one of`, a platform not
detected with the GPUs there. Real lines from public threads (tests/cases-twentyfifth and tests/cases-twentysixth hold
them with their sources)."""

from __future__ import annotations

from bot.core.line_kinds import split_prefix, strip_outer_prefix
from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def _claims(text: str) -> tuple[Report, list[Finding]]:
    report = build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags())))
    return report, [f for f in report.findings if f.severity in ("critical", "warning")]


_TAG = "(RayWorkerWrapper pid=633, ip=127.0.0.1)"
RAY_MISSING = "".join(f"{_TAG} {line}\n" for line in (
    '  File "/usr/local/lib/python3.12/dist-packages/ray/experimental/channel/common.py", line 173, in torch_device',
    "    from ray.air._internal import torch_utils",
    '  File "/usr/local/lib/python3.12/dist-packages/ray/air/config.py", line 17, in <module>',
    "    import pyarrow.fs",
    "ModuleNotFoundError: No module named 'pyarrow'"))


def test_rays_process_tag_with_the_nodes_address_is_a_tag() -> None:
    origin, rest = split_prefix("(RayWorkerWrapper pid=633, ip=127.0.0.1) ModuleNotFoundError: No module named 'x'")
    assert (origin.proc, origin.pid) == ("RayWorkerWrapper", 633)
    assert rest == "ModuleNotFoundError: No module named 'x'"


def test_a_module_missing_under_a_ray_worker_is_the_importers_and_installed_not_vllms_site() -> None:
    _, claims = _claims(RAY_MISSING)
    assert claims, "no claim"
    top = claims[0]
    assert top.owner == "ray" and "pyarrow" in top.deps
    assert not any(f.id.startswith("atlas:vllm:") and f.confidence != "low" for f in claims)


def test_a_site_whose_sentence_is_pythons_own_is_not_claimed_by_its_words() -> None:
    # vLLM's import_from_path raises `No module named {module_name}`: Python's sentence, any import raises it
    _, claims = _claims("some prefix ModuleNotFoundError: No module named 'decord'\n")
    assert not any(f.id.startswith("atlas:vllm:") and f.confidence in ("high", "medium") for f in claims), \
        [(f.id, f.confidence) for f in claims]


def test_a_paste_in_bold_and_a_day_column_are_not_the_line() -> None:
    assert strip_outer_prefix("2025-02-19 **ModuleNotFoundError: No module named 'decord'**") == \
        "ModuleNotFoundError: No module named 'decord'"
    assert strip_outer_prefix("2025-02-19   File \"/x/vllm/utils.py\", line 1813, in __getattr__") == \
        "  File \"/x/vllm/utils.py\", line 1813, in __getattr__"
    # a logger's own date and time stay (they are the record's, read by its own grammar)
    assert strip_outer_prefix("2025-05-11 14:16:39,117\tINFO compiled_dag_node.py:2137 -- Waiting") == \
        "2025-05-11 14:16:39,117\tINFO compiled_dag_node.py:2137 -- Waiting"
    assert strip_outer_prefix("**bold** and more **bold**") == "**bold** and more **bold**"


DUMP = """\
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py", line 2050 in all_reduce
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/c10d_logger.py", line 47 in wrapper
  File "/workspace/vllm/model_executor/parallel_utils/communication_op.py", line 24 in tensor_model_parallel_all_reduce
  File "/workspace/vllm/model_executor/layers/linear.py", line 548 in forward
  File "/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py", line 1527 in _call_impl
"""


def test_a_stack_dump_is_read_innermost_last_and_its_kind_says_stuck_crashed_or_only_where() -> None:
    frames = [p for p in parse_text(DUMP).problems if p.kind == "frame"]
    assert [f.frame_function for f in frames] == ["_call_impl", "forward", "tensor_model_parallel_all_reduce",
                                                 "wrapper", "all_reduce"]
    assert all(f.dump == "snapshot" for f in frames)
    # a dump alone is where a thread was: a note, no claim
    report, claims = _claims(DUMP)
    assert not claims and any(f.title.startswith("Waiting in PyTorch") for f in report.findings)
    # after faulthandler's timeout: stuck, in a collective, with the NCCL catalog's switches
    _, claims = _claims("Timeout (0:10:00)!\nCurrent thread 0x00007f3b5c5e2740 (most recent call first):\n" + DUMP)
    top = claims[0]
    assert top.title.startswith("Stuck in PyTorch") and top.part == "parallel"
    assert "--enforce-eager" in top.knobs and "NCCL_P2P_DISABLE=1" in top.knobs
    # a fatal error's dump is a crash there, not a hang: no hang's switches
    _, claims = _claims("Fatal Python error: Segmentation fault\n\n"
                        "Current thread 0x00007f3b5c5e2740 (most recent call first):\n" + DUMP)
    top = next(f for f in claims if f.id.startswith("frame:"))
    assert top.title.startswith("Crash in PyTorch") and "--enforce-eager" not in top.knobs


def test_only_the_running_thread_of_a_dump_is_kept_and_a_rendezvous_is_no_collective() -> None:
    text = ("Timeout (0:05:00)!\n"
            "Thread 0x00007f0000000001 (most recent call first):\n"
            '  File "/x/vllm/distributed/device_communicators/shm_broadcast.py", line 400 in acquire_read\n'
            "\n"
            "Current thread 0x00007f0000000002 (most recent call first):\n"
            '  File "/x/torch/distributed/rendezvous.py", line 189 in _create_c10d_store\n'
            '  File "/x/torch/distributed/distributed_c10d.py", line 1500 in init_process_group\n')
    frames = [p for p in parse_text(text).problems if p.kind == "frame"]
    assert [f.frame_function for f in frames] == ["init_process_group", "_create_c10d_store"]
    _, claims = _claims(text)
    assert claims and "--enforce-eager" not in claims[0].knobs and "NCCL_P2P_DISABLE=1" not in claims[0].knobs


def test_a_dump_header_under_an_exception_is_not_its_message() -> None:
    parsed = parse_text("RuntimeError: boom\nCurrent thread 0x00007f0000000002 (most recent call first):\n"
                        '  File "/x/torch/distributed/distributed_c10d.py", line 2050 in all_reduce\n')
    exc = next(p for p in parsed.problems if p.kind == "exception")
    assert exc.message == "boom"


def test_a_tracebacks_frames_keep_their_order_and_are_no_dump() -> None:
    text = ('Traceback (most recent call last):\n'
            '  File "/x/vllm/entrypoints/openai/api_server.py", line 10, in main\n'
            '  File "/x/torch/distributed/distributed_c10d.py", line 2050, in all_reduce\n'
            'RuntimeError: NCCL error\n')
    frames = [p for p in parse_text(text).problems if p.kind == "frame"]
    assert [f.frame_function for f in frames] == ["main", "all_reduce"] and not any(f.dump for f in frames)


STATS = ("(APIServer pid=31352) INFO 05-31 10:34:{s} [loggers.py:271] Engine 000: Avg prompt throughput: {p} tokens/s, "
         "Avg generation throughput: {g} tokens/s, Running: {r} reqs, Waiting: 0 reqs, GPU KV cache usage: 20.0%, "
         "Prefix cache hit rate: 0.8%\n")
PYSPY = """\
Thread 220 (active): "MainThread"
    0x754925c6309a (libcuda.so.1.1)
    cuLaunchKernel (libcuda.so.1.1)
    cudaLaunchKernel (libcudart.so.13)
    flashinfer::sampling::RadixTopKMaskLogitsMultiCTA<float, int> (sampling.so)
    top_k_mask_logits (sampling.so)
    0x754924085914 (tvm_ffi/core.abi3.so)
"""


def test_an_engine_holding_requests_that_processes_no_token_is_stalled() -> None:
    busy = STATS.format(s="10", p="1469.0", g="111.8", r=8)
    stuck = [STATS.format(s=s, p="0.0", g="0.0", r=8) for s in ("20", "30", "40")]
    _, claims = _claims(busy + "".join(stuck))
    assert [f.id for f in claims] == ["engine-stalled"] and claims[0].severity == "critical"
    # one interval can be a prefill longer than it: a warning at low confidence
    _, claims = _claims(busy + stuck[0])
    assert [(f.id, f.severity, f.confidence) for f in claims] == [("engine-stalled", "warning", "low")]
    # negative: it moved again afterwards; an idle engine (nothing running); a slow one (tokens generated)
    for text in (busy + stuck[0] + busy, busy + STATS.format(s="50", p="0.0", g="0.0", r=0),
                 busy + STATS.format(s="50", p="0.0", g="3.1", r=8)):
        _, claims = _claims(text)
        assert not any(f.id == "engine-stalled" for f in claims), text


def test_a_py_spy_dump_names_the_library_the_thread_waits_in_and_its_switch() -> None:
    frames = [p for p in parse_text(PYSPY).problems if p.kind == "frame"]
    assert frames[-1].frame_function == "0x754925c6309a" and all(f.dump == "snapshot" for f in frames)
    assert [f.frame_file for f in frames if f.frame_file] == ["flashinfer/sampling.so"]  # the driver's say no owner
    _, claims = _claims(STATS.format(s="50", p="0.0", g="0.0", r=8) + PYSPY)
    dump = next(f for f in claims if f.id.startswith("frame:"))
    assert dump.title.startswith("Stuck in FlashInfer") and dump.owner == "flashinfer"
    assert dump.part == "sampler" and "VLLM_USE_FLASHINFER_SAMPLER" in dump.knobs


def test_a_py_spy_dump_in_a_file_is_read_through_every_line() -> None:
    from bot.core.logread import parse_bytes

    parsed = parse_bytes((STATS.format(s="50", p="0.0", g="0.0", r=8) + PYSPY).encode())
    assert sum(1 for p in parsed.problems if p.kind == "frame") == 6 and parsed.engine


def test_a_store_the_ranks_cannot_reach_is_the_nodes_address() -> None:
    line = "The server socket on [::ffff:127.0.0.1]:63617 has timed out, will retry.\n"
    report, claims = _claims(line * 3)
    assert report.verdict == "failing" and claims
    assert claims[0].part == "parallel" and any(k.startswith("VLLM_HOST_IP") for k in claims[0].knobs)
    assert "network" in claims[0].host


MISTRAL = """\
ValueError: Kwargs ['reasoning_effort'] are not supported by `MistralCommonTokenizer.apply_chat_template`.
File ".../vllm/renderers/mistral.py", line 34, in safe_apply_chat_template
  return tokenizer.apply_chat_template(messages, **kwargs)
File ".../transformers/tokenization_mistral_common.py", line 1432, in apply_chat_template
  raise ValueError(
ValueError: Kwargs ['reasoning_effort'] are not supported by `MistralCommonTokenizer.apply_chat_template`.
"""


def test_a_library_refusing_an_argument_vllm_passed_is_two_installs_not_made_for_each_other() -> None:
    _, claims = _claims(MISTRAL)
    top = claims[0]
    assert top.owner == "transformers" and top.part == "tokenizer"
    assert {"upgrade", "pin"} <= set(top.advice) and "vllm/renderers/mistral.py" in top.remediation[0]
    # the same words with no vLLM frame calling: nothing says vLLM passed it
    _, claims = _claims(MISTRAL.splitlines(keepends=True)[0])
    assert claims and not {"upgrade", "pin"} <= set(claims[0].advice)


def test_a_registry_refusal_worded_must_be_one_of_names_its_flag_and_a_later_release() -> None:
    # the twenty-sixth batch: an old release's quantization check, in the other wording of a registry's refusal
    _, claims = _claims("ValueError: Unknown quantization method: gptq. Must be one of ['awq', 'squeezellm'].\n")
    top = claims[0]
    assert top.id == "cli-refused" and top.inputs == ["--quantization"] and "upgrade" in top.advice
    # a slip of a listed value is that value, not a later release
    _, claims = _claims("ValueError: Unknown quantization method: AWQ. Must be one of ['awq', 'squeezellm'].\n")
    assert "upgrade" not in claims[0].advice and "`awq`" in claims[0].remediation[0]


def test_a_platform_not_detected_with_the_gpus_there_is_detection_on_this_release() -> None:
    _, claims = _claims("RuntimeError: Failed to infer device type\n")
    top = claims[0]
    assert top.id == "vllm-platform-not-detected" and "upgrade" in top.advice and "pynvml" in top.deps


def test_pythons_own_words_are_judged_with_a_fields_value_a_name_or_a_number() -> None:
    from bot.core.triage.atlas_readers.site_finding import _python_words

    assert _python_words("ModuleNotFoundError", "No module named {module_name}")
    assert _python_words("IndexError", "index {i} is out of bounds for dimension {d} with size {n}")
    assert not _python_words("ValueError", "Unknown quantization method: {method}. Must be one of {choices}.")


def test_a_registry_refusal_drops_only_method_to_find_its_flag() -> None:
    _, claims = _claims("ValueError: Unsupported model type: foo. Must be one of ['llama', 'qwen'].\n")
    assert not any("--model" in f.inputs for f in claims)


def test_a_library_refusal_says_a_request_may_have_sent_the_argument() -> None:
    _, claims = _claims(MISTRAL)
    assert "unless the request itself sent it" in claims[0].remediation[0]


def test_a_python_warning_and_a_deprecation_notice_are_notes_not_failures() -> None:
    # the twenty-seventh batch's two false alarms: torch's FutureWarning, vLLM's deprecation of an env var
    for line in ("/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml package "
                 "is deprecated. Please install nvidia-ml-py instead.\n",
                 "Using VLLM_ATTENTION_BACKEND environment variable is deprecated and will be removed in v0.14.0 or "
                 "v1.0.0, whichever is soonest. Please use --attention-config.backend command line argument or "
                 "AttentionConfig(backend=...) config field instead.\n"):
        report, claims = _claims(line)
        assert not claims and report.verdict == "healthy", [(f.id, f.severity) for f in claims]
    # an exception that says deprecated is still the failure it is
    _, claims = _claims("ValueError: The argument --foo is deprecated and has been removed.\n")
    assert claims and claims[0].severity == "critical"


def test_code_ray_shipped_from_the_users_working_dir_is_the_users() -> None:
    from bot.core.owners import of_path

    path = ("/tmp/ray/session_2025-09-04_19-02-52_192985_111429/runtime_resources/working_dir_files/"
            "_ray_pkg_efc8b708aebb3d24/trinity/common/models/vllm_model.py")
    owner = of_path(path)
    assert owner is not None and owner.name == "user-script"
    assert of_path("/usr/lib/python3/dist-packages/ray/air/config.py").name == "ray"  # type: ignore[union-attr]


def test_the_interpreters_own_words_place_no_site_even_when_a_library_prints_them() -> None:
    _, claims = _claims("TypeError: Glm4vProcessor.__init__() got multiple values for argument 'tokenizer'\n")
    assert not any(f.site is not None for f in claims), [(f.id, f.severity) for f in claims]
