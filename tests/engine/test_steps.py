"""Step dispatch, and what a `run` step with a named check leaves in the run's facts and variables."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any, get_args

import pytest

from bot.config import load_config
from bot.engine.hostvars import HostVars, host_variables
from bot.engine.playbook import Playbook, PlaybookStep, RunState, StepKind, load_playbook, resolve_numbers
from bot.engine.preflight import CHECKS, CheckResult
from bot.engine.runner import run_playbook
from bot.engine.steps import HANDLERS, execute
from bot.remote.ssh import RunResult

ROOT = Path(__file__).resolve().parents[2]
GPUS = "0, NVIDIA RTX A6000, 49140, 48000\n1, NVIDIA RTX A6000, 49140, 47000\n"
ONE_OF_EACH: dict[str, dict[str, Any]] = {
    "run": {"argv": ["true"]},
    "upload": {"content": "x", "dest": "/tmp/x"},
    "start": {"argv": ["sleep", "1"], "pid_file": "/tmp/p", "log_file": "/tmp/l"},
    "stop": {"pid_file": "/tmp/p", "marker": "m"},
    "wait": {"port": "8000"},
    "probe": {"port": "8000", "model": "m"},
    "collect": {"port": "8000", "log_file": "/tmp/l"},
    "http": {"port": "8000"},
}


def test_the_table_has_a_handler_for_every_kind_and_the_union_has_a_model_for_every_kind() -> None:
    kinds = set(get_args(StepKind))
    assert set(HANDLERS) == kinds == set(ONE_OF_EACH)
    assert {get_args(m.model_fields["kind"].annotation)[0] for m in get_args(PlaybookStep)} == kinds


@pytest.mark.parametrize("kind", sorted(ONE_OF_EACH))
def test_each_kind_reaches_its_own_handler(kind: str) -> None:
    # a table entry pairing a kind with another model's handler raises TypeError here
    playbook = Playbook.model_validate({"name": "one", "steps": [{"name": kind, "kind": kind, **ONE_OF_EACH[kind]}]})
    state = RunState(variables={}, dry_run=True)
    result = execute(resolve_numbers(playbook.steps[0], state), 1, None, state)
    assert (result.kind, result.status) == (kind, "planned")


class _Host:
    """A session that answers every command with the same output."""

    def __init__(self, out: str, exit_status: int = 0) -> None:
        self.out, self.exit_status = out, exit_status

    def run(self, argv: list[str], timeout: float | None = None, **_: object) -> RunResult:
        return RunResult(argv, " ".join(argv), self.exit_status, self.out.encode(), b"", 0.01)


def _one_run(check: str, host: _Host, save_as: str | None = None, profile: str = "mtp") -> RunState:
    cfg = load_config(ROOT / "deploy" / "specops.example.yaml")
    step: dict[str, Any] = {"name": check, "kind": "run", "argv": ["x"], "check": check}
    if save_as:
        step["save_as"] = save_as
    state = RunState(variables=dict(host_variables(cfg, "a6000", profile)))
    run_playbook(Playbook.model_validate({"name": "one", "steps": [step]}), host, state)
    return state


def test_a_check_records_its_facts_and_later_steps_see_them() -> None:
    state = _one_run("gpus", _Host(GPUS), save_as="found")
    gpus = [{"index": 0, "name": "NVIDIA RTX A6000", "total_mib": 49140, "free_mib": 48000},
            {"index": 1, "name": "NVIDIA RTX A6000", "total_mib": 49140, "free_mib": 47000}]
    assert state.results[0].status == "ok"
    assert state.facts == {"gpus": gpus}
    assert state.variables["gpus"] == gpus and state.variables["found"] == {"gpus": gpus}


def test_a_check_without_facts_saves_the_output() -> None:
    state = _one_run("vllm_version", _Host("0.20.1\n"), save_as="v")
    assert state.facts == {"vllm_version": "0.20.1"} and state.variables["v"] == {"vllm_version": "0.20.1"}
    state = _one_run("port_free", _Host(""), save_as="ss")
    assert state.facts == {} and state.variables["ss"] == ""


def test_a_failed_check_shows_the_lines_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    def named(r: RunResult, v: HostVars) -> CheckResult:
        return CheckResult(False, "two things", {"doctor": ["devices"]}, shown=["first", "second"])

    monkeypatch.setitem(CHECKS, "named", named)
    state = _one_run("named", _Host("a\nlong\ntail\n"))
    result = state.results[0]
    assert (result.status, result.message, result.output) == ("failed", "two things", ["first", "second"])
    assert state.facts == {"doctor": ["devices"]} and state.variables["doctor"] == ["devices"]
    assert "output" not in state.variables


def test_a_dry_run_records_no_facts() -> None:
    cfg = load_config(ROOT / "deploy" / "specops.example.yaml")
    state = RunState(variables=dict(host_variables(cfg, "a6000", "dflash")), dry_run=True)
    outcome = run_playbook(load_playbook("deploy-dflash"), None, state)
    assert outcome.failed is None and state.facts == {}


class _Local:
    """This machine as the host: each argv runs here (the /proc it reads is real)."""

    def run(self, argv: list[str], timeout: float | None = None, **_: object) -> RunResult:
        done = subprocess.run(argv, capture_output=True, timeout=timeout)
        return RunResult(argv, " ".join(argv), done.returncode, done.stdout, done.stderr, 0.01)


def test_a_zombie_is_a_server_that_exited_not_a_reused_pid() -> None:
    """A server that died and waits for its parent to reap it reads an empty command line: the stop must not
    call it another program's PID (three false failures in a tune after one setting failed at /health)."""
    from bot.engine.steps import process_matches

    marker = "specops-zombie-marker"
    child = subprocess.Popen([sys.executable, "-c", "pass", marker])  # not waited for: a zombie once it ends
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child did not end"
            time.sleep(0.01)
        assert process_matches(_Local(), child.pid, marker)[0] is None  # gone, not "not ours"
    finally:
        child.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", marker], stdin=subprocess.PIPE)
    try:
        # between fork and exec the child still shows the parent's command line (a loaded machine read it there)
        deadline = time.monotonic() + 10
        while marker.encode() not in Path(f"/proc/{alive.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the child did not exec"
            time.sleep(0.01)
        ours, cmdline, pgid = process_matches(_Local(), alive.pid, marker)
        assert ours is True and marker in cmdline and pgid is not None
        assert process_matches(_Local(), alive.pid, "another-marker")[0] is False
    finally:
        alive.communicate(b"")
