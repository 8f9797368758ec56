"""What the twenty-eighth batch's misses taught, general (issue 35): NCCL's own line names the transport it failed in,
and the variable that turns that transport off isolates it; a class no vLLM release defines, missing a method vLLM's
own classes of its kind have, is an out-of-tree class (a plugin's) behind another release's interface. Real lines
from public threads (tests/cases-twentyeighth holds them with their sources)."""

from __future__ import annotations

from bot.core.catalogs import load_catalogs
from bot.core.history import load_history
from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def _claims(text: str) -> tuple[Report, list[Finding]]:
    report = build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags())))
    return report, [f for f in report.findings if f.severity in ("critical", "warning")]


def _claim(text: str, prefix: str) -> Finding:
    """The first claim whose id starts with `prefix`."""
    return next(f for f in _claims(text)[1] if f.id.startswith(prefix))


_UNHANDLED = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
              "1333, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1\n")


NVLS = ("[2025-07-21 19:05:29] node004:27907:27907 [1] transport/nvls.cc:254 NCCL WARN Cuda failure 401 'the "
        "operation cannot be performed in the present state'\n"
        "node004:27907:27907 [1] NCCL INFO transport/nvls.cc:409 -> 1\n")


def test_the_transport_nccls_own_line_names_is_switched_off_first() -> None:
    _, claims = _claims(NVLS)
    top = claims[0]
    assert top.owner == "nccl" and top.part == "parallel"
    assert top.knobs[0] == "NCCL_NVLS_ENABLE=0", top.knobs
    assert "transport/nvls.cc" in top.remediation[0]
    assert any("nvidia.com/deeplearning/nccl" in s for s in top.sources)


def test_every_transport_file_maps_to_its_documented_switch_and_nothing_else_does() -> None:
    cat = load_catalogs()
    for text, name in (("transport/p2p.cc:123 NCCL WARN x", "NCCL_P2P_DISABLE"),
                       ("transport/shm.cc:12 NCCL WARN x", "NCCL_SHM_DISABLE"),
                       ("transport/net_ib.cc:77 NCCL WARN x", "NCCL_IB_DISABLE"),
                       ("transport/net_ib/connect.cc:77 NCCL WARN x", "NCCL_IB_DISABLE"),
                       ("transport/nvls.cc:254 NCCL WARN x", "NCCL_NVLS_ENABLE")):
        found = cat.transport_switch(text)
        assert found is not None and found[1].name == name, text
        assert found[1].sources, name
    assert cat.transport_switch("transport/net.cc:12 NCCL WARN x") is None  # no one switch turns "the network" off
    assert cat.transport_switch("misc/socket.cc:12 NCCL WARN x") is None


def test_a_transport_an_earlier_unrelated_warn_names_is_not_the_failures() -> None:
    crash = _claim("node1:100:100 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : mlx5_1:1 Got async event : GID table "
                   "change\nnode1:100:100 [0] enqueue.cc:1556 NCCL WARN Cuda failure 'out of memory'\n" + _UNHANDLED,
                   "below:nccl:ncclUnhandledCudaError")
    assert not any(k.startswith("NCCL_IB_DISABLE") for k in crash.knobs), crash.knobs


def test_the_warn_line_just_before_names_the_transport_of_an_error_that_names_none() -> None:
    crash = _claim(NVLS + _UNHANDLED, "below:nccl:ncclUnhandledCudaError")
    assert crash.knobs[0] == "NCCL_NVLS_ENABLE=0" and "just before it" in crash.remediation[0]


def test_an_nccl_line_naming_no_transport_keeps_the_all_reduce_switches() -> None:
    _, claims = _claims("NCCL WARN Cuda failure 'invalid argument'\n")
    assert claims and not any("NVLS" in k for k in claims[0].knobs)


ATOM = "AttributeError: type object 'AiterBackend' has no attribute 'is_ssm'\n"


def test_a_class_from_outside_vllm_missing_a_method_of_vllms_own_kind_is_a_plugins() -> None:
    top = _claim(ATOM, "foreign-class:")
    assert top.id == "foreign-class:AiterBackend.is_ssm" and top.confidence == "low"  # who called it is not shown
    assert top.owner == "plugin" and top.part == "attention" and "AttentionBackend" in top.summary
    assert {"disable-plugin", "pin"} <= set(top.advice)
    assert "VLLM_PLUGINS" in " ".join(top.remediation)


def test_vllms_own_class_or_a_hugging_face_kind_is_not_called_a_plugins() -> None:
    hist = load_history()
    assert hist is not None and hist.has_class("AttentionBackend")
    for text in ("AttributeError: type object 'AttentionBackend' has no attribute 'is_ssm'\n",  # vLLM's own
                 # vLLM's, with no methods of its own (its messages name it)
                 "AttributeError: 'UnspecifiedPlatform' object has no attribute 'get_device_capability'\n",
                 # one vLLM makes at run time, prefixing one of its own
                 "AttributeError: type object 'ChunkedLocalAttention_FlashAttentionBackend' has no attribute "
                 "'get_kv_cache_stride_order'\n",
                 "AttributeError: 'Qwen2Config' object has no attribute 'get_text_config'\n",  # a config: HF's
                 "AttributeError: 'AiterBackend' object has no attribute 'no_such_method_anywhere'\n"):
        _, claims = _claims(text)
        assert not any(f.id.startswith("foreign-class:") for f in claims), text


def test_a_class_called_by_code_not_vllms_is_left_to_its_frames() -> None:
    for where in ('  File "/home/me/serve.py", line 12, in <module>\n',
                  '  File "/usr/lib/python3/dist-packages/mystuff/serve.py", line 3, in x\n'):
        text = ("Traceback (most recent call last):\n" + where + "    MyBackend.is_ssm()\n"
                "AttributeError: type object 'MyBackend' has no attribute 'is_ssm'\n")
        _, claims = _claims(text)
        assert not any(f.id.startswith("foreign-class:") for f in claims), where


def test_a_foreign_class_vllms_own_code_calls_is_claimed_at_medium() -> None:
    top = _claim("Traceback (most recent call last):\n"
                 '  File "/usr/lib/python3/dist-packages/vllm/v1/attention/selector.py", line 80, in get_backend\n'
                 "    if backend.is_ssm():\n"
                 "AttributeError: type object 'AiterBackend' has no attribute 'is_ssm'\n", "foreign-class:")
    assert top.confidence == "medium" and "vLLM's own code calls it" in top.summary


# ---- the twenty-ninth batch ----------------------------------------------------------------------------------------

SHUTDOWN = ("Exception ignored in: <function Vllm.__del__ at 0x7f1723e82d30>\n"
            "Traceback (most recent call last):\n"
            '  File "/usr/local/miniconda3/lib/python3.8/site-packages/llama_index/llms/vllm/base.py", line 217, in '
            "__del__\n"
            "ImportError: sys.meta_path is None, Python is likely shutting down\n")


def test_an_exception_python_ignored_at_shutdown_is_a_note_not_a_crash() -> None:
    report, claims = _claims(SHUTDOWN)
    assert not claims, [(f.id, f.severity) for f in claims]
    assert report.verdict != "failing"
    note = next(f for f in report.findings if f.id.startswith("frame:"))
    assert "ignored" in note.summary and "shut down" in note.summary
    assert any("unraisablehook" in s for s in note.sources)


def test_an_ignored_exception_deep_in_a_long_log_is_a_note_too() -> None:
    noise = "".join(f"INFO 01-08 23:07:{i % 60:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s\n"
                    for i in range(200))
    words = "".join(f"some line of a program, number {i}\n" for i in range(60))
    _, claims = _claims(noise + words + SHUTDOWN)
    assert not any(f.id.startswith("frame:") for f in claims), [(f.id, f.severity) for f in claims]


def test_a_destructor_failing_mid_run_is_ignored_but_not_called_shutdown() -> None:
    text = ("Exception ignored in: <function Foo.__del__ at 0x7f00>\n"
            "Traceback (most recent call last):\n"
            '  File "/usr/lib/python3/dist-packages/vllm/worker/foo.py", line 9, in __del__\n'
            "ValueError: bad handle\n")
    report, _ = _claims(text)
    note = next(f for f in report.findings if f.id.startswith("frame:"))
    assert note.severity == "info" and "ignored" in note.summary and "shut down" not in note.summary


def test_an_ignored_exception_beside_a_real_one_leaves_the_real_one_standing() -> None:
    real = ("Traceback (most recent call last):\n"
            '  File "/usr/lib/python3/dist-packages/vllm/engine/arg_utils.py", line 10, in create\n'
            "    x = y[3]\n"
            "IndexError: list index out of range\n")
    report, claims = _claims(real + SHUTDOWN)
    assert claims and report.verdict == "failing"


def test_pytests_location_line_without_its_tail_is_a_frame() -> None:
    text = ("/usr/local/lib/python3.11/site-packages/transformers/tokenization_utils_base.py:2419: \n"
            "if _is_local and _config.model_type not in [\n"
            "E   AttributeError: 'dict' object has no attribute 'model_type'\n")
    _, claims = _claims(text)
    assert claims[0].owner == "transformers" and "transformers" in claims[0].deps


def test_nothing_accepted_offers_the_upgrade_beside_the_checkpoint() -> None:
    line = ("INFO 01-08 23:07:23 [metrics.py:100] SpecDecoding metrics: Mean acceptance length: 1.00, Accepted "
            "throughput: 0.00 tokens/s, Drafted throughput: 1363.65 tokens/s, Accepted: 0 tokens, Drafted: 13638 "
            "tokens, Per-position acceptance rate: 0.000, 0.000, 0.000, Avg Draft acceptance rate: 0.0%\n")
    report = build_report(diagnose(Readings(parsed=parse_text(line * 3), flags=Flags(method="eagle3"))))
    top = next(f for f in report.findings if f.id == "zero-acceptance")
    assert {"checkpoint", "upgrade"} <= set(top.advice)
    assert any("newest release" in r for r in top.remediation)


# ---- the thirtieth batch -------------------------------------------------------------------------------------------

def _unknown_type(version: str | None) -> Finding:
    line = ("ValueError: The checkpoint you are trying to load has model type `qwen3_moe` but Transformers does not "
            "recognize this architecture. This could be because of an issue with the checkpoint, or because your "
            "version of Transformers is out of date.\n")
    report = build_report(diagnose(Readings(parsed=parse_text(line), flags=Flags(vllm_version=version))))
    return next(f for f in report.findings if f.id == "unknown-model-type:qwen3_moe")


def test_a_model_type_transformers_does_not_know_names_the_vllm_that_implements_it() -> None:
    old = _unknown_type("0.6.3")  # before the last release read without it: surely predates it
    assert old.advice == ["upgrade"] and "transformers" in old.deps and old.part == "models"
    assert "Qwen3MoeForCausalLM" in old.summary and "predates it" in old.remediation[0]
    new = _unknown_type("0.10.2")  # implements it: transformers alone is behind
    assert new.advice == [] and "Your vLLM (0.10.2) implements" in new.remediation[0]


def test_a_release_between_two_read_ones_is_not_said_to_predate_it() -> None:
    between = _unknown_type("0.8.0")  # after 0.7.3 (without it), before 0.8.5.post1 (with it): not known
    assert "predates" not in " ".join(between.remediation) and "upgrade" in between.advice


def test_a_model_type_no_vllm_release_implements_is_left_to_the_site() -> None:
    line = ("ValueError: The checkpoint you are trying to load has model type `no_such_model_xyz` but Transformers "
            "does not recognize this architecture.\n")
    report = build_report(diagnose(Readings(parsed=parse_text(line), flags=Flags())))
    assert not any(f.id.startswith("unknown-model-type:") for f in report.findings)


def test_a_worker_ended_by_sigterm_after_a_failure_is_a_note() -> None:
    refusal = ("ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can be "
               "stored in KV cache (81536). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
               "initializing the engine.\n")
    died = ("ERROR 02-11 07:40:49 multiproc_worker_utils.py:124] Worker VllmWorkerProcess pid 1786 died, "
            "exit code: -15\n")
    report, claims = _claims(refusal + died)
    assert not any("died" in f.title for f in claims), [(f.id, f.severity) for f in claims]
    note = next(f for f in report.findings if "died" in f.title)
    assert note.severity == "info" and "SIGTERM" in note.summary
    _, alone = _claims(died)  # no failure beside it: nothing says it is a consequence
    assert any("died" in f.title for f in alone)


def test_a_model_type_named_by_another_head_only_or_a_dev_build_is_not_placed() -> None:
    line = ("ValueError: The checkpoint you are trying to load has model type `gemma3_text` but Transformers does not "
            "recognize this architecture.\n")
    report = build_report(diagnose(Readings(parsed=parse_text(line), flags=Flags(vllm_version="0.8.5.post1"))))
    assert not any("predates" in " ".join(f.remediation) for f in report.findings)
    dev = _unknown_type("0.10.2.dev45+g1234")  # built before 0.10.2: where it stands is not known
    assert "implements" not in dev.remediation[0] and "predates" not in " ".join(dev.remediation)
    assert any("/tree/v0.8.5.post1/vllm/model_executor/models" in s for s in dev.sources)


_DIED = "ERROR 02-11 07:40:49 multiproc_worker_utils.py:124] Worker VllmWorkerProcess pid 1786 died, exit code: -15\n"


def test_sigterm_beside_an_ignored_a_later_or_a_requests_exception_stands() -> None:
    ignored = ("Exception ignored in: <function Foo.__del__ at 0x7f00>\nTraceback (most recent call last):\n"
               '  File "/usr/lib/python3/dist-packages/vllm/worker/foo.py", line 9, in __del__\n'
               "AttributeError: 'NoneType' object has no attribute 'close'\n")
    request = ("Traceback (most recent call last):\n"
               '  File "/usr/lib/python3/dist-packages/vllm/entrypoints/openai/serving_chat.py", line 9, in create\n'
               "ValueError: This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.\n")
    later = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    for text in (ignored + _DIED, request + _DIED, _DIED + later):
        _, claims = _claims(text)
        assert any("died" in f.title for f in claims), text


def test_a_refusal_naming_a_quantization_method_is_the_quantization_part() -> None:
    top = _claim("AttributeError: Model Qwen2ForCausalLM does not support BitsAndBytes quantization yet.\n", "atlas:")
    assert top.part == "quantization" and "--quantization" in top.inputs


def test_a_refusal_naming_the_variable_to_use_instead_is_that_variable() -> None:
    top = _claim("(APIServer pid=115369) RuntimeError: Please use HIP_VISIBLE_DEVICES instead of "
                 "ROCR_VISIBLE_DEVICES\n", "told-variable:")
    assert top.inputs == ["ROCR_VISIBLE_DEVICES"] and top.knobs[0] == "HIP_VISIBLE_DEVICES"
    assert top.part == "platform" and top.host == ["device-visibility"]
