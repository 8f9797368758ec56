"""What the forty-first batch's misses taught, general (issue 35): terminal colour codes a web page kept without their
escape byte, and a CI job's bracketed timestamps, are not the log's words; a tokenizer library's frames are the
tokenizer's part; an error a plugin logs through vLLM's logger (a file no vLLM release has) that names the variable to
set is the plugin's; a warning that quotes a device error with no sign of serving is not "only notices"; a message
that says a switch's words ("the V2 GPU model runner") names that switch; "Ensure X packages are installed" names X; the
scheduler's handling of drafted tokens is speculative decoding's. Lines in the shapes public threads show
(tests/cases-fortyfirst)."""

from __future__ import annotations

from bot.core.lines import without_colour
from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def _report(text: str, version: str | None = None) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags(vllm_version=version))))


def _claims(text: str, version: str | None = None) -> list[Finding]:
    return [f for f in _report(text, version).findings if f.severity in ("critical", "warning")]


def test_colour_codes_without_their_escape_byte_are_not_the_lines_words() -> None:
    assert without_colour(" [1;36m(APIServer pid=1) [0;0m ModuleNotFoundError: x") == \
        "(APIServer pid=1) ModuleNotFoundError: x"
    assert without_colour("^[[0;36m(Worker pid=7)^[[0;0m ERROR 02-23") == "(Worker pid=7) ERROR 02-23"
    # no reset code on the line: brackets are the line's own
    assert without_colour("list index [1m] of [2;3m]") == "list index [1m] of [2;3m]"
    text = " [1;36m(APIServer pid=1) [0;0m ModuleNotFoundError: No module named 'opentelemetry'\n"
    f = next(c for c in _claims(text) if "opentelemetry" in c.deps)
    assert f.severity == "critical"


def test_a_ci_jobs_bracketed_timestamps_are_an_outer_prefix() -> None:
    frames = "".join(f"[2025-02-15T00:55:01Z] {line}\n" for line in (
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/xgrammar/kernels/apply_token_bitmask_inplace_cuda.py", '
        "line 77, in apply_token_bitmask_inplace_cuda",
        "    torch.ops.xgrammar.apply_token_bitmask_inplace_cuda(logits, bitmask, indices)",
        "RuntimeError: bitmask must have the hidden size equal to ceilDiv(vocabSize, 32)."))
    f = next(c for c in _claims(frames) if c.id.startswith("frame:"))
    assert f.owner == "xgrammar" and "xgrammar" in f.deps


def test_a_tokenizer_librarys_frames_are_the_tokenizers_part() -> None:
    text = ("Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/tiktoken/load.py", line 11, in read_file\n'
            "    import blobfile\n"
            "ModuleNotFoundError: No module named 'blobfile'\n")
    f = next(c for c in _claims(text) if c.id.startswith("frame:"))
    assert f.part == "tokenizer" and "blobfile" in f.deps


_TOLD = ("ERROR 06-03 02:33:37 [{file}:76] Draft model name a/b does not match base model name c/d. Set "
         "{var}=1 to skip this assertion.\n")


def test_an_error_a_plugin_logs_through_vllms_logger_naming_the_variable_is_the_plugins() -> None:
    f = next(c for c in _claims(_TOLD.format(file="arctic_like_proposer.py", var="ACME_SKIP_SPEC_MODEL_CHECK"))
             if c.id.startswith("told-variable:"))
    assert f.owner == "plugin" and f.knobs == ["ACME_SKIP_SPEC_MODEL_CHECK"] and "disable-plugin" in f.advice
    # the same words from a file of vLLM's own: the variable, and no plugin claimed
    g = next(c for c in _claims(_TOLD.format(file="core.py", var="VLLM_SKIP_X_CHECK"))
             if c.id.startswith("told-variable:"))
    assert g.owner is None and g.knobs == ["VLLM_SKIP_X_CHECK"]


_TROUBLE = ("(Worker pid=2019) WARNING 08-13 11:22:00 [flashinfer_all_reduce.py:85] Failed to initialize FlashInfer "
            "All Reduce workspace: CUDA error code=2(b'CUDA_ERROR_OUT_OF_MEMORY').\n")


def test_a_warning_quoting_a_device_error_with_no_sign_of_serving_is_not_only_notices() -> None:
    assert _report(_TROUBLE, "0.20.1").verdict == "unknown"
    serving = _TROUBLE + ("INFO:     Application startup complete.\n"
                          "INFO 08-13 11:30:00 [loggers.py:123] Engine 000: Avg prompt throughput: 100.0 tokens/s, "
                          "Avg generation throughput: 40.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache "
                          "usage: 1.0%, Prefix cache hit rate: 0.0%\n")
    # the same warning before serving is a startup notice: healthy, and the warning stays a note
    served = _report(serving, "0.20.1")
    assert served.verdict == "healthy"
    assert any(f.severity == "info" and "FlashInfer All Reduce" in f.title for f in served.findings)


def test_a_message_that_says_a_switchs_words_names_the_switch() -> None:
    from bot.core.atlas import load_atlas
    from bot.core.triage.atlas_readers.refused_input import named_switches

    atlas = load_atlas()
    assert named_switches(atlas, "DSpark speculative decoding requires the V2 GPU model runner", None) == \
        ["VLLM_USE_V2_MODEL_RUNNER"]
    assert named_switches(atlas, "the model runner failed", None) == []


def test_a_message_that_says_which_packages_to_ensure_names_them() -> None:
    from bot.core.triage.atlas_readers.named_in_words import installs_named

    assert installs_named("OpenTelemetry is not available. Ensure OpenTelemetry packages are installed.") == \
        ["opentelemetry"]
    assert installs_named("Ensure OpenTelemetry packages") == ["opentelemetry"]  # cut by the paste
    assert installs_named("Ensure the server is installed correctly") == []  # not a package's name


def test_the_schedulers_handling_of_drafted_tokens_is_speculative_decodings() -> None:
    from bot.core.switches import for_frame

    found = for_frame("vllm/v1/core/sched/scheduler.py", "update_draft_token_ids_in_output")
    assert found is not None and found.part == "drafter"
    other = for_frame("vllm/v1/core/sched/scheduler.py", "schedule")
    assert other is None or other.part != "drafter"
