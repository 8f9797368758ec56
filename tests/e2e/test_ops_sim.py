"""Playbooks end to end on the simulated A6000 host (in-process SSH server, fake vllm/nvidia-smi)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bot.app.operations import ops
from bot.config import Config
from bot.core.report import Report
from bot.core.results.operation import OperationResult
from bot.redact import Redactor
from bot.sim.host import SimHost
from bot.store.facade import Store
from bot.store.locks import LockHeld
from tests.support.graph import graph
from tests.support.sshd import free_port


@pytest.fixture
def cfg(sim: SimHost) -> Config:
    return sim.config(port=free_port())


def deploy(cfg: Config, profile: str, **kw: object) -> OperationResult:
    """Deployed past the checks before launch (the brief's profile is refused there): these tests read what the
    deploy itself does and finds."""
    kw.setdefault("force", True)
    return ops.deploy(ops.HostRequest(cfg, "a6000", profile, **kw, **graph(cfg)))  # type: ignore[arg-type]


def judged(result: OperationResult) -> Report:
    """The diagnosis of the server a deploy left behind (every deploy that ran judges it)."""
    assert result.diagnosis is not None, result.operation
    return result.diagnosis


def numbers(report: Report) -> set[int]:
    return {u.number for f in report.findings for u in f.upstream}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_brief_profile_deploys_and_names_both_upstream_prs(cfg: Config, sim: SimHost) -> None:
    lines: list[str] = []
    result = deploy(cfg, "dflash-0.20.1", progress=lambda p: lines.append(p.line()))
    assert result.operation.status == "changed", result.operation
    report = judged(result)
    assert report.verdict == "failing"
    assert {40727, 40898} <= numbers(report)
    assert report.context["vllm_version"] == "0.20.1"
    assert report.metrics.mean_acceptance_length is not None and report.metrics.mean_acceptance_length < 1.6
    assert any("step 12/14: wait for /health" in line for line in lines)
    # the config reached vLLM as a file, not through a shell
    config_text = (sim.root / "srv/specops/server.yaml").read_text()
    assert '"method": "dflash"' in config_text
    start_cmd = next(c for c in sim.server.commands if " serve " in c)  # type: ignore[union-attr]
    assert "--config" in start_cmd and "speculative" not in start_cmd
    dep = Store(cfg.settings.state, Redactor()).deployments.latest("a6000")
    assert dep is not None and dep.status == "serving"
    assert dep.pid == int((sim.root / "srv/specops/server.pid").read_text())


def test_fixed_profile_is_healthy_and_beats_the_baseline(cfg: Config) -> None:
    result = deploy(cfg, "dflash")
    report = judged(result)
    assert report.verdict == "healthy", ([f.id for f in report.findings], result.operation)
    assert not any(f.is_bug for f in report.findings)
    assert report.metrics.mean_acceptance_length is not None and report.metrics.mean_acceptance_length > 4
    assert result.operation.probe_tps is not None and result.operation.probe_tps > 73.5


def test_second_deploy_of_the_same_config_is_unchanged(cfg: Config, sim: SimHost) -> None:
    first = deploy(cfg, "mtp")
    assert first.operation.status == "changed"
    n = len(sim.server.commands)  # type: ignore[union-attr]
    again = deploy(cfg, "mtp")
    assert again.operation.status == "unchanged" and again.diagnosis is not None
    assert not any(" serve " in c for c in sim.server.commands[n:])  # type: ignore[union-attr]


def test_a_busy_host_is_refused_with_who_holds_it(cfg: Config) -> None:
    store = Store(cfg.settings.state, Redactor())
    store.locks.acquire("a6000", "U0ALICE via slack", "deploy dflash")
    try:
        with pytest.raises(LockHeld, match="U0ALICE via slack") as err:
            deploy(cfg, "mtp")
        assert "deploy dflash" in str(err.value)
    finally:
        store.locks.release("a6000", "U0ALICE via slack")


def test_failed_preflight_reports_the_step_and_releases_the_lock(cfg: Config, sim: SimHost) -> None:
    sim.set_gpus_visible(False)
    result = deploy(cfg, "dflash-0.20.1")
    report = judged(result)
    assert report.verdict == "failing"
    assert result.operation.status == "failed"
    # the short doctor a deploy starts with sees it first, and says where to look
    assert result.operation.failed_step == "4. host ready (doctor, short form)"
    ids = [f.id for f in report.findings]
    assert "step-failed" in ids and "nvidia-smi-no-devices" in ids
    assert any("vfio-pci" in s for f in report.findings for s in [*f.remediation, f.summary])
    assert Store(cfg.settings.state, Redactor()).locks.holder("a6000") is None
    assert not (sim.root / "srv/specops/server.pid").exists()


def test_vllm_refusing_the_drafter_fails_the_wait_at_once(cfg: Config, sim: SimHost) -> None:
    profile = cfg.profiles["dflash-0.20.1"].model_copy(deep=True)
    profile.vllm.bin = str(sim.root / "opt/vllm-0.25.0/bin/vllm")
    profile.vllm.version = "0.25.0"
    cfg.profiles["dflash-0.25.0"] = profile
    t0 = time.monotonic()
    result = deploy(cfg, "dflash-0.25.0")
    assert time.monotonic() - t0 < 30  # not the 60 s startup timeout
    assert result.operation.failed_step == "12. wait for /health"
    report = judged(result)
    assert report.findings[0].id in ("step-failed", "dflash-mixed-swa-refused")
    refusal = next(f for f in report.findings if f.id == "dflash-mixed-swa-refused")
    assert 40898 in {u.number for u in refusal.upstream}
    failed = next(s for s in result.operation.steps if s.status == "failed")
    assert any("NotImplementedError" in line for line in failed.output)
    assert Store(cfg.settings.state, Redactor()).locks.holder("a6000") is None


def test_stop_by_recorded_pid(cfg: Config, sim: SimHost) -> None:
    deploy(cfg, "mtp")
    pid = int((sim.root / "srv/specops/server.pid").read_text())
    assert alive(pid)
    report = ops.stop(ops.HostRequest(cfg, "a6000", **graph(cfg)))
    assert report.operation is not None and report.operation.status == "changed"
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)
    assert not (sim.root / "srv/specops/server.pid").exists()
    again = ops.stop(ops.HostRequest(cfg, "a6000", **graph(cfg)))
    assert again.operation is not None and "nothing to stop" in again.operation.message


def test_a_reused_pid_is_not_killed(cfg: Config, sim: SimHost) -> None:
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        pid_file = sim.root / "srv/specops/server.pid"
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        pid_file.write_text(f"{other.pid}\n")
        report = ops.stop(ops.HostRequest(cfg, "a6000", **graph(cfg)))
        assert report.operation is not None and report.operation.status == "failed"
        assert "not the server specops started" in report.operation.message
        assert other.poll() is None  # still running
        assert Store(cfg.settings.state, Redactor()).locks.holder("a6000") is None
    finally:
        other.kill()
        other.wait()


def test_dry_run_runs_nothing_on_the_host_but_the_checks_reads(cfg: Config, sim: SimHost) -> None:
    from bot.app.operations.prelaunch import prelaunch

    assert sim.server is not None
    for profile in ("dflash-0.20.1", "dflash", "mtp"):
        plan = deploy(cfg, profile, dry_run=True)
        assert plan.operation.status == "planned" and plan.diagnosis is None  # a plan judges nothing
        check, *steps = plan.operation.steps
        assert check.kind == "check" and all(s.status in ("planned", "skipped") for s in steps)
        start = next(s for s in plan.operation.steps if s.kind == "start")
        assert start.command is not None and "--config" in start.command
        ran = list(sim.server.commands)
        sim.server.commands.clear()
        prelaunch(cfg, profile, "a6000")
        assert ran == sim.server.commands and ran, ran  # what `specops check` reads, and nothing else
        sim.server.commands.clear()
    stop = ops.stop(ops.HostRequest(cfg, "a6000", dry_run=True, **graph(cfg)))
    assert stop.operation is not None and stop.operation.status == "planned"
    assert sim.server.commands == []
    assert not (sim.root / "srv/specops/server.yaml").exists()


def test_diagnose_host_in_one_pass(cfg: Config) -> None:
    deploy(cfg, "dflash-0.20.1")
    report = ops.diagnose_host(ops.HostRequest(cfg, "a6000", **graph(cfg)))
    assert report.operation is not None and report.operation.kind == "diagnose"
    assert {40727, 40898} <= numbers(report)
    m = report.metrics
    assert m.prometheus_mean_acceptance_length is not None and m.mean_acceptance_length is not None
    assert abs(m.prometheus_mean_acceptance_length - m.mean_acceptance_length) < 0.5
    status = ops.status(ops.HostRequest(cfg, "a6000", **graph(cfg)))
    assert status.operation is not None and not any(s.kind == "probe" and s.status == "ok"
                                                    for s in status.operation.steps)


def test_diagnose_of_a_dead_server_says_it_is_down(cfg: Config, sim: SimHost) -> None:
    deploy(cfg, "mtp")
    pid = int((sim.root / "srv/specops/server.pid").read_text())
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    report = ops.diagnose_host(ops.HostRequest(cfg, "a6000", probe=False, **graph(cfg)))
    assert report.verdict == "failing" and report.findings[0].id == "server-down"
