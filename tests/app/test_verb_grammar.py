"""One grammar per verb: chat text and the command line build equal Args from the same option declarations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from bot.adapters.cli.verbs import register
from bot.app.commands import CommandError, parse
from bot.app.verbs import REGISTRY
from bot.app.verbs.grammar import build_args
from bot.app.verbs.spec import Verb
from bot.config import PrometheusSettings, load_config

CFG = load_config(Path(__file__).resolve().parents[2] / "deploy" / "specops.example.yaml")
CFG = CFG.model_copy(update={"prometheus": PrometheusSettings(url="http://127.0.0.1:9")})

# (chat text, the same command line): every verb, each with the options chat takes
SAME = [
    ("deploy dflash a6000 --dry-run --force", ["deploy", "dflash", "--host", "a6000", "--dry-run", "--force"]),
    ("check dflash a6000", ["check", "dflash", "--host", "a6000"]),
    ("diagnose a6000 --no-probe --profile dflash",
     ["diagnose", "--host", "a6000", "--no-probe", "--profile", "dflash"]),
    ("status a6000", ["status", "--host", "a6000"]),
    ("stop a6000 --dry-run", ["stop", "--host", "a6000", "--dry-run"]),
    ("report a6000", ["report", "--host", "a6000"]),
    ("doctor a6000 --profile dflash", ["doctor", "--host", "a6000", "--profile", "dflash"]),
    ("tune dflash a6000 --k 1,2 --methods dflash,none --concurrency 1 --requests 3 --keep-best --no-current --no-k0 "
     "--dry-run", ["tune", "dflash", "--host", "a6000", "--k", "1,2", "--methods", "dflash,none", "--concurrency",
                   "1", "--requests", "3", "--keep-best", "--no-current", "--no-k0", "--dry-run"]),
    ('fleet job="vllm" --limit 5 --only-problems --since 30m',
     ["fleet", "--selector", 'job="vllm"', "--limit", "5", "--only-problems", "--since", "30m"]),
    ('rollout dflash a6000 --canary 2 --batch 3 --soak 90s --concurrency 1,4 --requests 5 --gate "bugs == 0" --force '
     "--dry-run", ["rollout", "dflash", "--hosts", "a6000", "--canary", "2", "--batch", "3", "--soak", "90s",
                   "--concurrency", "1,4", "--requests", "5", "--gate", "bugs == 0", "--force", "--dry-run"]),
    ('tune dflash a6000 --k "1, 2" --methods "dflash, none"',
     ["tune", "dflash", "--host", "a6000", "--k", "1, 2", "--methods", "dflash, none"]),
    ("lock a6000", ["lock", "--host", "a6000"]),
    ("unlock a6000 --force --dry-run", ["unlock", "--host", "a6000", "--force", "--dry-run"]),
]


def _from_argv(argv: list[str]) -> Any:
    seen: list[Any] = []

    def capture(verb: Verb[Any, Any], values: dict[str, Any]) -> None:
        values.pop("format")
        seen.append(build_args(verb, values))

    app = typer.Typer()
    register(app, execute=capture)
    done = CliRunner().invoke(app, argv)
    assert done.exit_code == 0, done.output
    return seen[0]


@pytest.mark.parametrize(("text", "argv"), SAME, ids=[argv[0] for _t, argv in SAME])
def test_chat_and_command_line_build_equal_args(text: str, argv: list[str]) -> None:
    cmd = parse(text, CFG)
    from_chat = cmd.args()
    assert from_chat == _from_argv(argv)
    assert parse(cmd.text(), CFG) == cmd  # a plan is stored as its text and parsed again at Confirm
    assert type(from_chat) is REGISTRY[argv[0]].args


def test_every_verb_is_held_to_it() -> None:
    assert {argv[0] for _t, argv in SAME} == set(REGISTRY)


def test_the_defaults_are_the_same_too() -> None:
    words = {"profile": ("profile", "dflash"), "host": ("host", "a6000"), "targets": ("hosts", "a6000"),
             "selector": ("selector", None)}
    for verb in REGISTRY.values():
        text = " ".join([verb.name, *(value for word in verb.chat if (value := words[word][1]))])
        assert parse(text, CFG).args() == build_args(verb, dict(words[word] for word in verb.chat))


@pytest.mark.parametrize(("text", "said"), [
    ("tune dflash a6000 --k 0", "--k"), ("tune dflash a6000 --methods nope", "unknown method"),
    ("fleet --since soon", "since"), ("tune dflash a6000 --prompts /etc/passwd", "unknown option"),
    ("diagnose a6000 --log /etc/passwd", "unknown option"), ("fleet --prometheus http://127.0.0.1:1", "unknown option"),
    ("doctor a6000 --profile nope", "unknown profile"), ("fleet --since 400d", "at most 31d"),
    ("rollout dflash a6000 --group g", "unknown option"), ("tune dflash a6000 --requests 0", "--requests 0"),
])
def test_chat_refuses_what_the_command_line_would_or_a_file_of_the_bots(text: str, said: str) -> None:
    with pytest.raises(CommandError, match=said):
        parse(text, CFG)
