"""The general rules the fifteenth and sixteenth blind batches' first sight asked for (issue 35): a traceback
cut before its exception line names a known failure by its frames; the rest of a Python warning's message is the
warning's; a traceback pasted indented keeps its exception line; a pasted list's marker is not part of the exception;
an exception's message goes on over bare lines; a refusal that names the vLLM setting to give makes it the input and
the fix; a call into vLLM's API refused for its arguments is the caller's; vLLM imported from a folder that is not
the installed package; PyTorch's own "capability is not compatible" check blames the torch build; a cache folder the
server cannot write names its variable; another library's warning alone is a note; Ray's repeat count is not part of
a line. Lines in the shapes Python, PyTorch, Ray and vLLM print (none of them a line of the evaluation cases)."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings

PY = "/usr/lib/python3.12"
SITE = "/opt/venv/lib/python3.12/site-packages"


def report(lines: list[str], **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text("\n".join(lines)), flags=Flags(**flags))))


def test_a_cut_traceback_through_spawns_reimport_of_the_script_is_the_missing_main_guard() -> None:
    r = report(["Traceback (most recent call last):",
                '  File "<string>", line 1, in <module>',
                f'  File "{PY}/multiprocessing/spawn.py", line 122, in spawn_main',
                "    exitcode = _main(fd, parent_sentinel)",
                f'  File "{PY}/multiprocessing/spawn.py", line 297, in _fixup_main_from_path',
                "    main_content = runpy.run_path(main_path,",
                '  File "/home/me/bench.py", line 12, in <module>',
                "    llm = LLM(model=args.model)",
                f'  File "{SITE}/vllm/entrypoints/llm.py", line 240, in __init__',
                "    self.llm_engine = LLMEngine.from_engine_args("])
    found = next(f for f in r.findings if f.id == "main-guard-missing")
    assert found.confidence == "medium" and "told by its frames" in found.title
    assert found.owner == "user-script" and "fix-script" in found.advice
    assert "spawn.py" not in found.evidence[0] and "llm.py" in found.evidence[0]  # the innermost frame


def test_the_frames_name_nothing_once_the_exception_line_is_there() -> None:
    r = report(["Traceback (most recent call last):",
                f'  File "{PY}/multiprocessing/spawn.py", line 297, in _fixup_main_from_path',
                "    main_content = runpy.run_path(main_path,",
                '  File "/home/me/bench.py", line 3, in <module>',
                "    import numpy",
                "ModuleNotFoundError: No module named 'numpy'"])
    assert not any(f.id == "main-guard-missing" for f in r.findings)


def test_a_forked_workers_cut_traceback_in_set_device_points_at_the_start_method_at_low_confidence() -> None:
    r = report(["(VllmWorkerProcess pid=77) Traceback (most recent call last):",
                f'(VllmWorkerProcess pid=77)   File "{SITE}/vllm/worker/worker.py", line 150, in init_device',
                "(VllmWorkerProcess pid=77)     torch.cuda.set_device(self.device)",
                f'(VllmWorkerProcess pid=77)   File "{SITE}/torch/cuda/__init__.py", line 470, in set_device',
                "(VllmWorkerProcess pid=77)     torch._C._cuda_setDevice(device)"])
    found = next(f for f in r.findings if f.id == "cuda-reinit-in-forked-worker")
    assert found.confidence == "low" and "VLLM_WORKER_MULTIPROC_METHOD" in found.knobs


def test_the_rest_of_a_python_warnings_message_is_the_warnings() -> None:
    r = report([f"{SITE}/vllm/connections.py:8: RuntimeWarning: Failed to read commit hash:",
                "No module named 'vllm._version'",
                "  from vllm.version import __version__ as VLLM_VERSION"])
    assert r.verdict != "failing" and not [f for f in r.findings if f.severity == "critical"], r.findings


def test_an_indented_paste_keeps_its_exception_line_left_of_its_frames() -> None:
    parsed = parse_text("\n".join([
        f'    File "{SITE}/vllm/platforms/cuda.py", line 15, in <module>',
        "      import vllm._C  # noqa",
        "  ImportError: libtorch_cuda.so: cannot open shared object file: No such file or directory"]))
    [exc] = [p for p in parsed.problems if p.kind == "exception"]
    assert exc.exception == "ImportError" and exc.traceback_id is not None
    assert parsed.problems[0].source == "import vllm._C  # noqa"  # the code line under the frame stays its source


def test_a_pasted_lists_marker_is_not_part_of_the_exception() -> None:
    parsed = parse_text("1. KeyError: 'model.layers.0.mlp.gate.weight'\n- ValueError: bad value for foo")
    assert [(p.kind, p.exception) for p in parsed.problems] == [("exception", "KeyError"), ("exception", "ValueError")]


def test_an_exception_message_goes_on_over_bare_lines_but_not_into_a_record() -> None:
    parsed = parse_text("\n".join(["ValueError: the first half of the message.",
                                   "And its second half.",
                                   "INFO 01-02 03:04:05 [api_server.py:1] Starting vLLM API server"]))
    [exc] = [p for p in parsed.problems if p.kind == "exception"]
    assert exc.message == "the first half of the message. And its second half."
    logged = parse_text("ERROR 01-02 03:04:05 [core.py:1] ValueError: one line\n/x/y.py:3: UserWarning: other")
    assert [p.message for p in logged.problems if p.kind == "exception"] == ["one line"]


def test_a_refusal_that_names_the_setting_to_give_makes_it_the_input_and_the_fix() -> None:
    r = report(["ValueError: the launcher needs a KV connector here.",
                "When serving the decode side, you must explicitly provide --kv-transfer-config."])
    found = next(f for f in r.findings if f.id == "told:--kv-transfer-config")
    assert found.inputs == ["--kv-transfer-config"] and found.knobs == ["--kv-transfer-config"]
    # a flag no vLLM release has is never offered
    r = report(["ValueError: you must explicitly provide --no-such-flag-anywhere."])
    assert not any(f.id.startswith("told:") for f in r.findings)


def test_set_name_equals_value_in_a_refusal_names_the_flag() -> None:
    r = report(["ERROR 05-02 03:16:53 [core.py:1] AssertionError: bfloat16 is not supported by this kernel. "
                "Set dtype=torch.float16"])
    assert any("--dtype" in f.knobs for f in r.findings if f.severity == "critical"), r.findings


def test_a_call_into_vllms_api_refused_for_its_arguments_is_the_callers() -> None:
    r = report(["SamplingParams.__init__() got an unexpected keyword argument 'best_of_n'"])
    found = next(f for f in r.findings if f.id.startswith("api-call:"))
    assert found.owner == "user-script" and found.advice == ["fix-script", "pin"] and found.inputs == ["best_of_n"]
    # a class vLLM does not offer its callers is not claimed this way
    r = report(["Frobnicator.run() got an unexpected keyword argument 'x'"])
    assert not any(f.id.startswith("api-call:") for f in r.findings)


def test_vllm_importing_from_itself_half_initialised_is_a_folder_shadowing_the_install() -> None:
    r = report(["ImportError: cannot import name 'layernorm_ops' from partially initialized module 'vllm' (most likely "
                "due to a circular import) (/home/me/src/vllm/vllm/__init__.py)"])
    found = next(f for f in r.findings if f.id.startswith("vllm-source-tree-shadows:"))
    assert found.owner == "user-script" and "fix-script" in found.advice


def test_pytorchs_own_capability_check_blames_the_torch_build() -> None:
    r = report([f"{SITE}/torch/cuda/__init__.py:262: UserWarning: ",
                "NVIDIA H200 with CUDA capability sm_100 is not compatible with the current PyTorch installation.",
                "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90."])
    found = next(f for f in r.findings if f.id.startswith("below:cuda:"))
    assert found.owner == "torch" and "gpu" in found.inputs and "torch" in found.deps


# --- the sixteenth batch's first sight asked for these ------------------------------------------------------------

def test_a_cache_folder_the_server_cannot_write_names_its_variable_and_the_permissions() -> None:
    r = report(["(EngineCore pid=9) ERROR 05-01 10:00:00 [core.py:700] RuntimeError: Worker failed with error "
                "'PermissionError: [Errno 13] Permission denied: '/.triton'', please check the stack trace above"])
    found = next(f for f in r.findings if f.id == "unwritable-cache:TRITON_CACHE_DIR")
    assert found.owner == "triton" and found.part == "compilation" and found.host == ["permissions"]
    assert found.knobs == ["TRITON_CACHE_DIR"] and any("HOME is `/`" in x for x in found.remediation)
    r = report(["OSError: [Errno 30] Read-only file system: '/home/app/.cache/huggingface/hub/models--m'"])
    assert any(f.id == "unwritable-cache:HF_HOME" for f in r.findings)
    r = report(["PermissionError: [Errno 13] Permission denied: '/data/weights/model.safetensors'"])
    assert not any(f.id.startswith("unwritable-cache:") for f in r.findings)  # weights are no cache


def test_another_librarys_warning_alone_is_a_note() -> None:
    # transformers' own warning (src/transformers/modeling_rope_utils.py): vLLM goes on
    r = report(["Unrecognized keys in `rope_scaling` for 'rope_type'='linear': {'type'}"])
    assert r.verdict != "degraded" and not [f for f in r.findings if f.severity in ("warning", "critical")]


def test_rays_repeat_count_is_not_part_of_the_line() -> None:
    parsed = parse_text("(RayWorkerWrapper pid=7) ERROR 08-19 16:07:35 worker_base.py:438] ValueError: a refusal. "
                        "[repeated 2x across cluster]")
    assert [p.message for p in parsed.problems if p.kind == "exception"] == ["a refusal."]


def test_a_refusal_naming_a_limit_reaches_the_flag_that_sets_it() -> None:
    # the V0 scheduler's refusal and the chat helper's, as vLLM 0.5.5 and 0.6.x word them: the atlas reads where each
    # limit comes from (tools/atlas/extract.py, one hop into the class)
    r = report(["WARNING 08-20 10:01:02 scheduler.py:895] Input prompt (5000 tokens) is too long and exceeds limit "
                "of 4096"], vllm_version="0.5.5")
    assert any("--max-num-batched-tokens" in f.knobs for f in r.findings if f.severity == "warning"), r.findings
    r = report(["ERROR 01-24 17:49:40 serving_chat.py:181] ValueError: At most 2 image(s) may be provided in one "
                "request."])
    assert any("--limit-mm-per-prompt" in f.knobs for f in r.findings if f.severity == "critical"), r.findings
