"""Chat text -> Command: names from the inventory only, short usage errors, nothing for a shell."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.app.commands import Command, CommandError, parse
from bot.config import load_config

CFG = load_config(Path(__file__).resolve().parents[2] / "deploy" / "specops.example.yaml")


@pytest.mark.parametrize(("text", "expected"), [
    ("", Command("help")),
    ("help", Command("help")),
    ("diagnose", Command("diagnose", "a6000")),  # the only host
    ("diagnose a6000", Command("diagnose", "a6000")),
    ("  STATUS   a6000 ", Command("status", "a6000")),
    ("deploy dflash", Command("deploy", "a6000", "dflash")),
    ("deploy dflash-0.20.1 a6000 --dry-run", Command("deploy", "a6000", "dflash-0.20.1", dry_run=True)),
    ("deploy dflash-0.20.1 a6000 --force", Command("deploy", "a6000", "dflash-0.20.1", options=(("force", True),))),
    ("stop a6000", Command("stop", "a6000")),
    ("report", Command("report", "a6000")),
])
def test_valid_commands(text: str, expected: Command) -> None:
    assert parse(text, CFG) == expected


@pytest.mark.parametrize(("text", "message"), [
    ("reboot a6000", "unknown command"),
    ("deploy", "needs a profile"),
    ("deploy nope a6000", "unknown profile"),
    ("diagnose other", "unknown host"),
    ("diagnose a6000 b", "takes one host"),
    ("status --force", "unknown option"),
    ("diagnose --dry-run", "unknown option"),
    ("diagnose $(id)", "is not a host or profile name"),
    ("deploy dflash;rm a6000", "is not a host or profile name"),
    ("x" * 400, "too long"),
])
def test_usage_errors(text: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        parse(text, CFG)


def test_error_never_echoes_much_or_markup() -> None:
    with pytest.raises(CommandError) as err:
        parse("<!channel>" + "y" * 100, CFG)
    assert "<!channel>" not in str(err.value) and "y" * 30 not in str(err.value)


def test_destructive() -> None:
    assert parse("deploy dflash", CFG).destructive and not parse("deploy dflash --dry-run", CFG).destructive
    assert parse("stop", CFG).destructive and not parse("diagnose", CFG).destructive


@given(st.text(max_size=500))
def test_parse_never_raises_anything_but_command_error(text: str) -> None:
    try:
        cmd = parse(text, CFG)
    except CommandError as exc:
        assert str(exc)
    else:
        assert cmd.verb in ("help", "deploy", "diagnose", "status", "stop", "report")
        for name in (cmd.host, cmd.profile):
            assert name is None or name in CFG.hosts or name in CFG.profiles


# --- a pasted log ---------------------------------------------------------------------------------

from bot.app.commands import audit_text, parse_paste, split_message  # noqa: E402

LOG = "(APIServer pid=1) INFO 05-08 16:26:29 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 1.18"


@pytest.mark.parametrize("text", ["diagnose", "diagnose a6000", "  diagnose a6000  \n", "status a6000\n" + LOG,
                                  "help\n```x```"])
def test_not_a_pasted_log(text: str) -> None:
    assert parse_paste(text) is None


@pytest.mark.parametrize(("text", "options", "lines"), [
    (f"diagnose --method dflash --vllm-version 0.20.1\n```{LOG}```", {"method": "dflash", "vllm_version": "0.20.1"}, 1),
    (f"diagnose --method=DFlash ```{LOG}```", {"method": "dflash"}, 1),
    (f"DIAGNOSE\n{LOG}\n{LOG}", {}, 2),
    (f"diagnose --drafter z-lab/Qwen3.6-27B-DFlash --num-speculative-tokens 15\n```\n{LOG}\n```",
     {"drafter": "z-lab/Qwen3.6-27B-DFlash", "num_speculative_tokens": "15"}, 1),
    (f"diagnose \u2014method mtp\n{LOG}", {"method": "mtp"}, 1),  # autocorrect's em dash
])
def test_pasted_logs(text: str, options: dict[str, str], lines: int) -> None:
    cmd = parse_paste(text)
    assert cmd is not None and cmd.verb == "diagnose" and cmd.host is None and cmd.paste is not None
    assert dict(cmd.paste.options) == options and cmd.paste.lines == lines
    assert LOG not in cmd.text() and "sha256" in cmd.text() and LOG not in audit_text(text)
    assert cmd.paste.flags().origin == "the chat command"


def test_slack_escapes_are_undone_in_the_log_and_an_attachment_alone_is_enough() -> None:
    cmd = parse_paste("diagnose\n```a &lt;b&gt; &amp; <https://x.test/y|x.test/y>```")
    assert cmd is not None and cmd.paste is not None and cmd.paste.text == "a <b> & https://x.test/y"
    attached = parse_paste("diagnose --method dflash", attachments=1)
    assert attached is not None and attached.paste is not None and attached.paste.attachments == 1
    assert split_message(f"diagnose --method mtp\n{LOG}") == (["--method", "mtp"], LOG)
    assert split_message(f"look:\n```{LOG}```") == ([], f"look:\n{LOG}")


@pytest.mark.parametrize(("text", "message"), [
    (f"diagnose --frobnicate 1\n{LOG}", "unknown option"),
    (f"diagnose --method\n{LOG}", "needs a value"),
    (f"diagnose --method dflash --method mtp\n{LOG}", "twice"),
    (f"diagnose --method sorcery\n{LOG}", "is not one of"),
    (f"diagnose --vllm-version latest\n{LOG}", "not a version"),
    (f"diagnose --vllm-version $(id)\n{LOG}", "not a version"),
    (f"diagnose --num-speculative-tokens 0\n{LOG}", "from 1 to 64"),
    (f"diagnose --num-speculative-tokens 1e3\n{LOG}", "from 1 to 64"),
    (f"diagnose --drafter ../../etc/passwd\n{LOG}", "not a model name"),
    (f"diagnose a6000\n{LOG}", "options only"),
    ("diagnose ``````", "no log to diagnose"),
    ("diagnose " + "--method dflash " * 30 + f"\n{LOG}", "too long"),
])
def test_pasted_usage_errors(text: str, message: str) -> None:
    with pytest.raises(CommandError, match=message) as err:
        parse_paste(text)
    assert LOG not in str(err.value) and len(str(err.value)) < 300


@given(st.text(max_size=300), st.integers(min_value=0, max_value=2))
def test_parse_paste_never_raises_anything_but_command_error(text: str, attachments: int) -> None:
    try:
        cmd = parse_paste("diagnose " + text, attachments)
    except CommandError as exc:
        assert str(exc)
    else:
        assert cmd is None or (cmd.paste is not None and cmd.host is None)


def test_a_reference_measured_with_the_profiles_own_method_is_not_held_against_it() -> None:
    from bot.app.diagnosis.facts import profile_flags
    from bot.config import Profile

    mtp = Profile(model="/m", method="mtp", num_speculative_tokens=3, baseline_tps=73.5, baseline_method="mtp")
    assert profile_flags(mtp, host="a").baseline_tps is None
    dflash = Profile(model="/m", method="dflash", drafter="/d", num_speculative_tokens=15, baseline_tps=73.5,
                     baseline_method="mtp")
    assert profile_flags(dflash, host="a").baseline_tps == 73.5
