"""Lines as pastes and other loggers print them (issue 35, ninth batch's first sight): a traceback under torch's
per-rank prefix or under the cut tail of vLLM's own prefix is still a traceback; an import a logger reports it
could not make was caught; a line printed from a file no vLLM release has is not vLLM's; a deprecation is a note."""

from __future__ import annotations

from bot.core import owners
from bot.core.atlas import load_atlas
from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings


def report(lines: list[str], **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text("\n".join(lines)), flags=Flags(**flags))))  # type: ignore[arg-type]


def claims(r: Report) -> list[str]:
    return [f.id for f in r.findings if f.severity in ("critical", "warning")]


def test_a_traceback_under_torchs_rank_prefix_or_a_cut_vllm_prefix_is_parsed() -> None:
    for prefix in ("[rank0]: ", "[rank3]:", " [multiproc_executor.py:852] ", "[engine.py:448] "):
        parsed = parse_text("\n".join([
            f'{prefix}  File "/usr/lib/python3.12/site-packages/vllm/model_executor/models/llama.py", line 40, '
            "in load_weights",
            f"{prefix}    param = params_dict[name]",
            f"{prefix}KeyError: 'model.layers.0.mlp.weight_scale'",
        ]))
        frames = [p for p in parsed.problems if p.kind == "frame"]
        [exc] = [p for p in parsed.problems if p.kind == "exception"]
        assert frames and frames[0].frame_function == "load_weights", prefix
        assert exc.exception == "KeyError" and frames[0].traceback_id == exc.traceback_id


def test_a_package_named_after_another_is_its_own_and_a_compiled_module_is_its_packages() -> None:
    assert owners.of_package("torch_npu").name == "torch-npu"
    assert owners.of_package("flash_attn_2_cuda").name == "flash-attn"
    assert owners.of_package("vllm_ascend").name == "plugin"


def test_a_missing_module_names_the_package_to_install_and_a_kv_connector_is_the_caches_part() -> None:
    r = report([
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/kv_transfer/kv_connector/v1/'
        'some_connector.py", line 12, in __init__',
        "    from some_cache_lib.engine import Builder",
        "ModuleNotFoundError: No module named 'some_cache_lib'",
    ])
    [f] = [f for f in r.findings if f.severity == "critical"]
    assert "some-cache-lib" in f.deps and f.part == "kv-cache"


def test_an_exception_is_placed_in_the_file_its_traceback_raised_it_from() -> None:
    atlas = load_atlas()
    message = "bitsandbytes version is wrong. Please install bitsandbytes>=0.46.1."
    sites = {atlas.match(message, exc="ImportError", source_file=f, source_line=1).site.file  # type: ignore[union-attr]
             for f in ("bitsandbytes.py", "bitsandbytes_loader.py")}
    assert len(sites) == 2  # one sentence, raised from two files: the frame's file decides
    r = report([
        "Traceback (most recent call last):",
        '  File "/venv/lib/python3.12/site-packages/vllm/model_executor/layers/quantization/bitsandbytes.py", '
        "line 160, in __init__",
        '    raise ImportError("bitsandbytes version is wrong. Please "',
        f"ImportError: {message}",
    ])
    [f] = [f for f in r.findings if f.severity == "critical"]
    assert f.site is not None and f.site.file.endswith("quantization/bitsandbytes.py") and f.part == "quantization"


def test_an_import_a_logger_says_it_could_not_make_is_a_note_unless_a_traceback_follows() -> None:
    warned = ("WARNING 08-13 04:48:22 _custom_ops.py:15] Failed to import from vllm._C with "
              "ModuleNotFoundError(\"No module named 'vllm._C'\")")
    r = report([warned])
    assert r.verdict in ("healthy", "unknown") and not claims(r)
    errored = ("ERROR 04-28 16:10:09 some_plugin_file.py:69] Failed to import some_plugin_C:No module named "
               "'some_plugin.some_plugin_C'")
    r = report([errored])
    assert r.verdict in ("healthy", "unknown") and not claims(r)
    r = report([warned, "Traceback (most recent call last):",
                '  File "/usr/lib/python3.12/site-packages/vllm/_custom_ops.py", line 30, in rms_norm',
                "    torch.ops._C.rms_norm(out, input, weight, epsilon)",
                "AttributeError: '_OpNamespace' '_C' object has no attribute 'rms_norm'"])
    assert r.verdict == "failing"


def test_a_line_printed_from_a_file_no_vllm_release_has_is_not_placed_as_vllms() -> None:
    r = report(["ERROR 04-28 16:10:09 [not_a_vllm_file_xyz.py:69] Failed to import foo_C:No module named 'foo.foo_C'"])
    placed = [f for f in r.findings if f.id.startswith("atlas:")]
    assert placed and all(f.confidence == "low" and f.owner == "plugin" for f in placed)


def test_pytorchs_wording_of_an_nccl_system_error_reaches_the_shared_memory_entry() -> None:
    r = report([
        "[rank0]:   File \"/usr/local/lib/python3.10/dist-packages/vllm/distributed/parallel_state.py\", line 293, "
        "in all_reduce",
        "[rank0]:     torch.distributed.all_reduce(input_, group=self.device_group)",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
    ])
    f = next(f for f in r.findings if f.id == "nccl-unhandled-system-error")
    assert "shm" in f.host


def test_a_deprecation_warning_alone_is_a_note() -> None:
    r = report(["[W924 02:01:18.426673989 ProcessGroupNCCL.cpp:981] Warning: SOME_TORCH_VARIABLE is the default now, "
                "this environment variable is thus deprecated. (function operator())"])
    assert r.verdict == "healthy" and not claims(r)


def test_info_lines_of_another_logger_are_not_trouble() -> None:
    r = report([
        "INFO 06-16 15:50:30 [factory.py:74] Creating v1 connector with name: SomeConnector",
        "[2025-06-16 15:50:30,792] SomeLib INFO: Configuration: {'error_on_timeout': False, 'fail_fast': None}",
        'INFO:     127.0.0.1:33988 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    ])
    assert r.verdict == "healthy"


def test_a_refused_attention_backend_puts_the_backend_switch_first() -> None:
    r = report(["ValueError: Selected backend AttentionBackendEnum.ROCM_ATTN is not valid for this configuration. "
                "Reason: ['sink setting not supported']"], vllm_version="0.19.0")
    f = next(f for f in r.findings if f.severity == "critical")
    assert "--attention-backend" in f.knobs and "--attention-backend" in f.inputs


def test_a_refusal_that_names_a_setting_makes_it_the_input() -> None:
    r = report([
        "Traceback (most recent call last):",
        '  File "/env/lib/python3.12/site-packages/vllm/engine/llm_engine.py", line 442, in from_engine_args',
        "    engine_config = engine_args.create_engine_config()",
        "ValueError: SomeQuant with enforce_eager = False is not supported yet.",
    ], vllm_version="0.5.4")
    f = next(f for f in r.findings if f.severity == "critical")
    assert "--enforce-eager" in f.inputs and "--enforce-eager" in f.knobs
