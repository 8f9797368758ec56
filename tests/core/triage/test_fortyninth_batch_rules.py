"""Rules from the forty-ninth batch's misses, general: torch's own logger's layout (glog's `W1112 00:26:33.338000
39792 path.py:604] `) read for its level and file; a traceback a logger printed at a warning's level is no crash for
the catch-all; a message that says to try passing a flag names that flag."""

from __future__ import annotations

from bot.core.line_kinds import split_prefix
from tests.core.triage.reports import claims_of, report_of


def test_torchs_glog_layout_gives_the_level_the_file_and_the_line() -> None:
    origin, message = split_prefix("W0304 11:22:33.123456 4242 site-packages/torch/_dynamo/convert_frame.py:1000] "
                                   "[0/1] torch._dynamo hit config.recompile_limit (8)")
    assert origin.level == "WARNING" and origin.source_file == "convert_frame.py" and origin.source_line == 1000
    assert message.startswith("[0/1] torch._dynamo hit")
    error, _ = split_prefix("E0304 11:22:33.123456 4242 /x/y.py:7] boom")
    assert error.level == "ERROR"


def test_a_traceback_printed_in_a_warnings_record_is_no_crash() -> None:
    prefix = "[rank0]:W0304 11:22:33.123456 4242 site-packages/torch/_inductor/fx_passes/post_grad.py:88] "
    warned = report_of("".join(prefix + line + "\n" for line in (
        "Pattern matcher skipped a node", "Traceback (most recent call last):",
        '  File "/opt/py/site-packages/torch/_inductor/fx_passes/post_grad.py", line 80, in apply')))
    assert not any(f.id == "engine-crashed" for f in warned.findings)
    crashed = report_of("ERROR 03-04 11:22:33 [core.py:1] Traceback (most recent call last):\n"
                        'ERROR 03-04 11:22:33 [core.py:1]   File "/opt/py/site-packages/vllm/v1/engine/core.py", '
                        "line 10, in run\n")
    assert any(f.severity == "critical" for f in crashed.findings)


def test_a_message_that_says_to_try_passing_a_flag_names_that_flag() -> None:
    claims = claims_of("ValueError: LLM.embed() is only supported for pooling models. Try passing --runner pooling "
                       "to use the model as a pooling model.\n")
    assert any("--runner" in f.knobs and "--runner" in f.inputs for f in claims), [(f.id, f.knobs) for f in claims]
