"""Rules from the fifty-third batch's misses, general: the tracebacks inside an exception group (Python's `    | `
gutter) are read; a line a teardown printed (shutdown, cleanup) is a note of the process ending; argparse's
"ambiguous option" names the flag the command does not have; the cache root under `/` and a paste's retyped errno;
vLLM importing a name another package no longer has is that package's."""

from __future__ import annotations

from bot.core.logparse import parse_text
from tests.core.triage.reports import claims_of, report_of


def test_the_tracebacks_inside_an_exception_group_are_read() -> None:
    tag = "(APIServer pid=3566526)"
    log = "".join(f"{tag} {line}\n" for line in (
        "  + Exception Group Traceback (most recent call last):",
        '    |   File "/opt/vllm/vllm/entrypoints/openai/responses/serving.py", line 1344, in _stream',
        "    |     parser = self.parser(tokenizer, request.tools) if self.parser else None",
        "    | TypeError: MiniMaxM2Parser.__init__() takes 2 positional arguments but 3 were given"))
    parsed = parse_text(log)
    assert [p.kind for p in parsed.problems][-2:] == ["frame", "exception"]
    assert parsed.problems[-1].exception == "TypeError"
    # a table's column bar is no gutter
    assert not parse_text("  | name | value |\n").problems


def test_a_line_a_teardown_printed_is_a_note_of_the_process_ending() -> None:
    line = ("ERROR 05-31 01:04:14 [prometheus.py:77] Error during metrics cleanup: expected str, bytes or "
            "os.PathLike object, not NoneType\n")
    report = report_of(line, version="0.9.1")
    assert report.verdict in ("healthy", "unknown") and not any(f.severity in ("critical", "warning")
                                                                for f in report.findings)


def test_argparses_ambiguous_option_names_the_flag_the_command_lacks() -> None:
    claims = claims_of("vllm serve: error: ambiguous option: --model could match --model-impl, "
                       "--model-loader-extra-config\n")
    found = [f for f in claims if f.id == "cli-refused"]
    assert found and found[0].inputs == ["--model"] and "--config" in found[0].knobs
    assert any("vllm serve MODEL" in r for r in found[0].remediation)


def test_the_cache_root_under_slash_and_a_retyped_errno() -> None:
    claims = claims_of("permissionError: [error 13] Permission denied: '/.cache'\n")
    found = [f for f in claims if f.id.startswith("unwritable-cache:")]
    assert found and "HF_HOME" in found[0].inputs and "permissions" in found[0].host
    assert found[0].confidence == "low"  # the root does not say whose cache it is
    named = [f for f in claims_of("PermissionError: [Errno 13] Permission denied: '/.cache/huggingface/hub'\n")
             if f.id.startswith("unwritable-cache:")]
    assert named and named[0].confidence == "medium"


def test_vllm_importing_a_name_another_package_lacks_is_that_packages() -> None:
    log = ('  File "/usr/lib/python3.10/site-packages/vllm/transformers_utils/utils.py", line 32, in '
           "modelscope_list_repo_files\n    from modelscope.utils.hf_util import _try_login\n"
           "ImportError: cannot import name '_try_login' from 'modelscope.utils.hf_util'\n")
    found = [f for f in claims_of(log) if "modelscope" in f.deps]
    assert found and found[0].owner not in (None, "vllm")
