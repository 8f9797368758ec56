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
