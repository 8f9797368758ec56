"""Playbook files: the shipped ones validate; a bad one is reported by file, step and problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import load_config
from bot.engine.hostvars import host_variables
from bot.engine.playbook import PlaybookError, RunState, load_playbook, render_value
from bot.engine.runner import run_playbook
from bot.paths import playbooks_dir

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["deploy-dflash", "deploy-mtp", "diagnose", "stop"])
def test_shipped_playbooks_validate(name: str) -> None:
    assert load_playbook(name).steps
    assert (playbooks_dir() / f"{name}.yaml").exists()


def test_a_bad_playbook_names_the_file_the_step_and_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nsteps:\n  - {name: ok, kind: run, argv: [true]}\n"
                    "  - {name: second, kind: run}\n  - {name: third, kind: teleport}\n")
    with pytest.raises(PlaybookError) as err:
        load_playbook(path)
    text = str(err.value)
    assert str(path) in text
    assert "step 2 (second): argv: Field required" in text
    assert "step 3 (third)" in text and "teleport" in text


def test_undefined_values_are_errors_not_empty_strings() -> None:
    with pytest.raises(PlaybookError, match="nope"):
        render_value("{{ nope }}", {})


def test_every_argv_element_stays_one_argument_in_a_dry_run() -> None:
    cfg = load_config(ROOT / "deploy" / "specops.example.yaml")
    v = host_variables(cfg, "a6000", "dflash")
    v["model"] = "/models/My Model; rm -rf / $(id)"
    outcome = run_playbook(load_playbook("deploy-dflash"), None, RunState(variables=dict(v), dry_run=True))
    start = next(r for r in outcome.results if r.kind == "start")
    assert start.status == "planned" and start.command is not None
    assert "'/models/My Model; rm -rf / $(id)'" in start.command  # quoted by shlex.join, one argv element
