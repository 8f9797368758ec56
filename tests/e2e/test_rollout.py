"""`specops rollout` over three simulated hosts (bot/sim/fleet.py: each its own SSH server, state and vLLM port),
through the command line as a user runs it: the fixed DFlash profile passes the gate host by host; the brief's
dflash-0.20.1 fails it on the canary, which is rolled back while the other two keep serving; Ctrl-C restores;
`--resume` after a SIGKILL carries on; bad input is refused before anything runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.services import build_services
from bot.config import Config, Settings
from bot.sim.fleet import SimFleet
from bot.store.facade import Store
from tests.support.fleet_hosts import HOSTS, serve_everywhere, serving, stop_everywhere
from tests.support.served import wait_for

ROOT = Path(__file__).resolve().parents[2]
FAST = ("--soak", "1s", "--requests", "2", "--concurrency", "1")


@pytest.fixture(scope="module")
def fleet() -> Iterator[SimFleet]:
    # a request may take 2 s: tok/s is the server's, not a cap's (at 0.5 s every setting read the same)
    sims = SimFleet(3, stats_interval=0.5, startup_seconds=0.5, max_request_seconds=2.0).start()
    try:
        yield sims
    finally:
        sims.cleanup()


@pytest.fixture
def cfg(fleet: SimFleet, tmp_path: Path) -> Iterator[tuple[Config, Path]]:
    config = fleet.config()
    config.settings = Settings(state=tmp_path / "specops.db")
    path = tmp_path / "specops.json"
    path.write_text(config.model_dump_json())
    yield config, path
    stop_everywhere(config)


def specops(path: Path, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", "--config", str(path), *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def _steps(config: Config) -> dict[str, str]:
    """The running rollout's step on each host, as its record in the store says."""
    store = Store(config.settings.state, build_services(config).redactor)
    try:
        running = store.rollouts.recent(state="running")
        return {h["host"]: h["step"] for h in running[0].progress["hosts"]} if running else {}
    finally:
        store.close()


def test_the_fixed_dflash_profile_passes_the_gate_host_by_host(cfg: tuple[Config, Path]) -> None:
    config, path = cfg
    serve_everywhere(config, "mtp")
    chart = path.parent / "rollout.png"
    run = specops(path, "rollout", "dflash", "--group", "a6000s", *FAST, "--format", "json", "--chart", str(chart))
    assert run.returncode == 0, run.stderr + run.stdout
    result = json.loads(run.stdout)
    assert result["state"] == "passed", result["headline"]
    assert chart.read_bytes().startswith(b"\x89PNG")  # before/after per host
    assert [h["host"] for h in result["hosts"]] == list(HOSTS)
    assert all(h["state"] == "passed" and h["gate_passed"] for h in result["hosts"]), result["hosts"]
    assert [h["batch"] for h in result["hosts"]] == [0, 1, 2]  # the canary, then one host per batch
    for h in result["hosts"]:
        assert h["before_profile"] == "mtp" and h["before"] and h["after"]
        assert all(c["passed"] for c in h["clauses"])
    assert {p for p, _ in serving(config).values()} == {"dflash"}


def test_a_faster_k_change_passes_the_default_gate(cfg: tuple[Config, Path]) -> None:
    """MTP k = 8 -> k = 4 (tune's kind of advice): fewer positions, so a lower mean acceptance length by
    construction, and faster. The default gate judges acceptance on the positions both drafted and passes it."""
    config, path = cfg
    for k in (8, 4):
        config.profiles[f"mtp-k{k}"] = config.profiles["mtp"].model_copy(update={"num_speculative_tokens": k})
    path.write_text(config.model_dump_json())
    serve_everywhere(config, "mtp-k8")
    run = specops(path, "rollout", "mtp-k4", "--hosts", "a6000", *FAST, "--format", "json")
    assert run.returncode == 0, run.stderr + run.stdout
    [host] = json.loads(run.stdout)["hosts"]
    assert host["state"] == "passed" and host["gate_passed"], host
    said = {c["said"].split(" ")[0]: c for c in host["clauses"]}
    assert said["acceptance_ratio"]["passed"] and said["tps_ratio"]["passed"], host["clauses"]


def test_dflash_0201_stops_at_the_canary_which_is_rolled_back(cfg: tuple[Config, Path]) -> None:
    config, path = cfg
    serve_everywhere(config, "dflash")
    before = serving(config)
    # its checks before launch refuse it on the canary: nothing started there, nothing to restore, the rest untouched
    run = specops(path, "rollout", "dflash-0.20.1", "--hosts", ",".join(HOSTS), *FAST, "--format", "json")
    assert run.returncode == 1, run.stderr + run.stdout
    canary, *others = json.loads(run.stdout)["hosts"]
    assert canary["state"] == "failed" and "Refused before launch" in canary["why"] and "--force" in canary["why"]
    assert not canary.get("restored") and all(h["state"] == "pending" for h in others), canary
    assert serving(config) == before
    # past them: the canary serves it, fails the gate and is rolled back
    run = specops(path, "rollout", "dflash-0.20.1", "--hosts", ",".join(HOSTS), *FAST, "--force", "--format", "json")
    assert run.returncode == 1, run.stderr + run.stdout
    result = json.loads(run.stdout)
    canary, *others = result["hosts"]
    assert result["state"] == "failed" and "canary" in result["headline"], result["headline"]
    assert canary["state"] == "failed" and canary["gate_passed"] is False, canary
    assert any(not c["passed"] for c in canary["clauses"]), canary["clauses"]
    assert "dflash serving again" in canary["restored"], canary
    assert all(h["state"] == "pending" for h in others), others
    after = serving(config)
    assert after["a6000"][0] == "dflash"  # the old profile, serving again
    for host in HOSTS[1:]:
        assert after[host] == before[host]  # untouched: the same row serves
    status = specops(path, "status", "--host", "a6000", "--format", "json")
    said = json.loads(status.stdout)
    # the old profile serves again as before: its acceptance, no finding of a bug. Healthy on an idle machine
    # (docs/ROLLOUT.md's run); the simulated tok/s is wall-clock, so a machine running two suites at once read
    # 49.9 tok/s, under the 73.5 reference: "not paying off" then, and nothing else
    assert said["metrics"]["mean_acceptance_length"] >= 5.0, status.stdout
    findings = {f["id"] for f in said["findings"]}
    assert said["verdict"] == "healthy" or (said["verdict"] == "degraded" and findings == {"not-paying-off"}), \
        status.stdout


def test_bad_input_is_refused_before_anything_runs(cfg: tuple[Config, Path]) -> None:
    _, path = cfg
    unknown = specops(path, "rollout", "dflash", "--group", "nope", *FAST)
    assert unknown.returncode == 2 and "unknown host or group 'nope'" in unknown.stderr, unknown.stderr
    gate = specops(path, "rollout", "dflash", "--group", "a6000s", "--gate", "tps_ratio >= os.system(1)", *FAST)
    assert gate.returncode == 2 and "gate" in gate.stderr and "Traceback" not in gate.stderr, gate.stderr
    both = specops(path, "rollout", "dflash", "--group", "a6000s", "--hosts", "a6000", *FAST)
    assert both.returncode == 2 and "one of the two" in both.stderr, both.stderr


def test_a_rollout_over_a_locked_host_is_refused_and_changes_nothing(cfg: tuple[Config, Path]) -> None:
    config, path = cfg
    store = Store(config.settings.state, build_services(config).redactor)
    try:
        store.locks.acquire("a6000-b", "someone else", "deploy mtp")
        run = specops(path, "rollout", "dflash", "--group", "a6000s", *FAST)
        assert run.returncode != 0 and "a6000-b is busy" in run.stderr and "nothing changed" in run.stderr, \
            run.stderr
        assert store.locks.holder("a6000") is None  # the locks it took first are given back
    finally:
        store.locks.release("a6000-b", "someone else")
        store.close()


def _started(path: Path, *argv: str) -> tuple[subprocess.Popen[str], Path]:
    err = path.parent / f"rollout-{time.monotonic_ns()}.err"
    with err.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "bot", "--config", str(path), *argv], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=out, text=True, start_new_session=True)
    return proc, err


def test_ctrl_c_mid_batch_restores_every_host_it_changed(cfg: tuple[Config, Path]) -> None:
    config, path = cfg
    serve_everywhere(config, "mtp")
    proc, err = _started(path, "rollout", "dflash", "--group", "a6000s", "--canary", "2", "--soak", "60s",
                         "--requests", "2", "--concurrency", "1", "--format", "json")
    try:
        wait_for("the canary's soak", lambda: _steps(config) == {"a6000": "soak", "a6000-b": "soak", "a6000-c": ""},
                 120)
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err.read_text()
    result = json.loads(out)
    assert result["state"] == "cancelled"  # Ctrl-C is the command line's Cancel
    assert [h["state"] for h in result["hosts"]] == ["restored", "restored", "pending"], result["hosts"]
    assert {p for p, _ in serving(config).values()} == {"mtp"}


def _killed_in_soak(config: Config, path: Path, host: str, soak: str) -> None:
    """A rollout of dflash over the group, SIGKILLed while `host` soaks: its record stays 'running'."""
    proc, _ = _started(path, "rollout", "dflash", "--group", "a6000s", "--soak", soak, "--requests", "2",
                       "--concurrency", "1")
    try:
        wait_for(f"{host}'s soak", lambda: _steps(config).get(host) == "soak", 180)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def _deploy_by_hand(config: Config, host: str, profile: str) -> None:
    from bot.app.operations import ops

    svc = build_services(config)
    try:
        done = ops.deploy(ops.HostRequest(config, host, profile, force=True, store=svc.store, hosts=svc.hosts))
        assert done.operation is not None and done.operation.status == "changed", done.headline
    finally:
        svc.close()


def test_resume_after_a_sigkill_carries_on_where_it_stopped(cfg: tuple[Config, Path]) -> None:
    config, path = cfg
    serve_everywhere(config, "mtp")
    _killed_in_soak(config, path, "a6000-b", "8s")
    rows_before = serving(config)
    # --dry-run says what the resume would do, and does none of it (issue 36: it ran the resume for real)
    dry = specops(path, "rollout", "--resume", "--dry-run", *FAST, "--format", "json")
    assert dry.returncode == 0, dry.stderr + dry.stdout
    would = json.loads(dry.stdout)
    assert would["kind"] == "rollout-plan" and would["action"] == "resume", would
    assert "stays as it is" in would["would"]["a6000"] and "deployed again" in would["would"]["a6000-b"], would
    assert serving(config) == rows_before
    # a host changed by hand since the crash: the resume would undo it, so it is refused and says what changed
    _deploy_by_hand(config, "a6000-c", "dflash-0.20.1")
    refused = specops(path, "rollout", "--resume", *FAST)
    assert refused.returncode != 0 and "a6000-c serves dflash-0.20.1 now, the rollout left mtp" in refused.stderr \
        and "--abort" in refused.stderr, refused.stderr
    _deploy_by_hand(config, "a6000-c", "mtp")  # put back: the resume goes on
    resumed = specops(path, "rollout", "--resume", *FAST, "--format", "json")
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    result = json.loads(resumed.stdout)
    assert result["state"] == "passed" and [h["state"] for h in result["hosts"]] == ["passed"] * 3, result
    after = serving(config)
    assert after["a6000"] == rows_before["a6000"]  # the canary passed before the kill: not deployed again
    assert {p for p, _ in after.values()} == {"dflash"}
    again = specops(path, "rollout", "--resume", *FAST)
    assert again.returncode != 0 and "nothing to resume: no rollout was left unfinished" in again.stderr, again.stderr
    # an id it never had, and one that is over, each said as what it is (and --abort says abort)
    nope = specops(path, "rollout", "--abort", "--id", "nope", *FAST)
    assert nope.returncode != 0 and "no rollout 'nope': nothing to abort" in nope.stderr, nope.stderr
    over = specops(path, "rollout", "--resume", "--id", result["rollout"], *FAST)
    assert f"nothing to resume: rollout {result['rollout']} is over" in over.stderr, over.stderr


def test_a_canary_whose_measurement_fails_fails_the_gate_and_is_rolled_back(cfg: tuple[Config, Path]) -> None:
    """The new setting deploys (its probe is short) but cannot serve the workload (its context is too small for
    it): the measurement fails, which is a failed gate, never a pass."""
    config, path = cfg
    serve_everywhere(config, "mtp")
    dflash = config.profiles["dflash"]
    config.profiles["dflash-short"] = dflash.model_copy(
        update={"extra_args": {**dflash.extra_args, "max-model-len": 160}})
    path.write_text(config.model_dump_json())
    prompts = path.parent / "long.yaml"
    prompts.write_text(json.dumps({"max_tokens": 32, "prompts": [
        {"id": "long", "kind": "chat", "text": "Summarize this paragraph. " + "The quick brown fox jumps. " * 80}]}))
    run = specops(path, "rollout", "dflash-short", "--group", "a6000s", *FAST, "--prompts", str(prompts),
                  "--format", "json")
    assert run.returncode == 1, run.stderr + run.stdout
    result = json.loads(run.stdout)
    canary = result["hosts"][0]
    assert result["state"] == "failed" and canary["gate_passed"] is False, canary
    assert "measuring dflash-short failed" in canary["why"] and "maximum context length" in canary["why"], canary
    assert "mtp serving again" in canary["restored"]
    assert {p for p, _ in serving(config).values()} == {"mtp"}


def test_requests_answered_with_an_error_are_counted_and_the_gate_reads_them(cfg: tuple[Config, Path]) -> None:
    """Half the workload does not fit the new setting's context: those requests are answered with an error and
    counted (the other half is measured), and a gate on `errors` fails on them; the default gate does not read
    errors, so it is given."""
    config, path = cfg
    serve_everywhere(config, "mtp")
    dflash = config.profiles["dflash"]
    config.profiles["dflash-short"] = dflash.model_copy(
        update={"extra_args": {**dflash.extra_args, "max-model-len": 160}})
    path.write_text(config.model_dump_json())
    prompts = path.parent / "mixed.yaml"
    prompts.write_text(json.dumps({"max_tokens": 32, "prompts": [
        {"id": "short", "kind": "chat", "text": "Say hello."},
        {"id": "long", "kind": "chat", "text": "Summarize this paragraph. " + "The quick brown fox jumps. " * 80}]}))
    run = specops(path, "rollout", "dflash-short", "--hosts", "a6000", *FAST, "--prompts", str(prompts),
                  "--gate", "errors <= errors_before and bugs == 0", "--format", "json")
    assert run.returncode == 1, run.stderr + run.stdout
    canary = json.loads(run.stdout)["hosts"][0]
    assert canary["gate_passed"] is False and "mtp serving again" in canary["restored"], canary
    assert sum(m["errors"] for m in canary["before"]) == 0 and all(m["requests"] for m in canary["after"]), canary
    errors = sum(m["errors"] for m in canary["after"])
    assert errors > 0, canary["after"]
    failed = [c for c in canary["clauses"] if not c["passed"]]
    assert [c["clause"] for c in failed] == ["errors <= errors_before"] and str(errors) in failed[0]["said"], failed
    text = specops(path, "rollout", "dflash-short", "--hosts", "a6000", *FAST,
                   "--prompts", str(prompts), "--gate", "errors <= errors_before")
    assert text.returncode == 1 and "requests answered with an error: 0 of" in text.stdout, text.stdout
    assert {p for p, _ in serving(config).values()} == {"mtp"}


def test_a_host_unreachable_mid_rollout_is_named_and_the_rollout_stops(cfg: tuple[Config, Path],
                                                                       fleet: SimFleet) -> None:
    """a6000-b's SSH goes through a loopback relay that stops relaying during its deploy: the rollout names it,
    stops, restores what it can, and says the host may still run the new setting."""
    from tests.support.sshd import TcpRelay

    config, path = cfg
    serve_everywhere(config, "mtp")
    b = config.hosts["a6000-b"]
    relay = TcpRelay(b.port)
    known = b.known_hosts.read_text()
    line = next(x for x in known.splitlines() if x.startswith(f"[127.0.0.1]:{b.port} "))
    b.known_hosts.write_text(known + line.replace(f":{b.port} ", f":{relay.port} ", 1) + "\n")
    config.hosts["a6000-b"] = b.model_copy(update={"port": relay.port, "connect_timeout": 3.0, "keepalive": 1.0})
    path.write_text(config.model_dump_json())
    proc, err = _started(path, "rollout", "dflash", "--group", "a6000s", "--canary", "1", "--batch", "2", *FAST,
                         "--format", "json")
    try:
        wait_for("a6000-b's deploy", lambda: any("a6000-b (batch 1)" in line and "deploying dflash" in line
                                                 for line in err.read_text().splitlines()), 120)
        relay.pause()
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        relay.close()
        config.hosts["a6000-b"] = b
        path.write_text(config.model_dump_json())
    assert proc.returncode == 1, err.read_text()
    result = json.loads(out)
    hosts = {h["host"]: h for h in result["hosts"]}
    assert result["state"] == "failed" and "a6000-b" in result["headline"], result["headline"]
    assert hosts["a6000"]["state"] == "passed"  # the canary passed: it keeps the new setting
    assert hosts["a6000-b"]["state"] == "restore-failed" and "a6000-b" in hosts["a6000-b"]["why"], hosts["a6000-b"]
    assert hosts["a6000-c"]["state"] in ("restored", "failed"), hosts["a6000-c"]  # its batch: back on mtp
    assert serving(config)["a6000-c"][0] == "mtp"


def test_abort_after_a_sigkill_restores_what_the_dead_rollout_changed(cfg: tuple[Config, Path]) -> None:
    config, path = cfg
    serve_everywhere(config, "mtp")
    _killed_in_soak(config, path, "a6000", "60s")
    assert serving(config)["a6000"][0] == "dflash"  # what the dead rollout left
    dry = specops(path, "rollout", "--abort", "--dry-run")
    assert dry.returncode == 0 and "restored to mtp" in dry.stdout and "nothing ran" in dry.stdout, dry.stdout
    assert serving(config)["a6000"][0] == "dflash"
    aborted = specops(path, "rollout", "--abort", "--format", "json")
    assert aborted.returncode == 0, aborted.stderr + aborted.stdout
    result = json.loads(aborted.stdout)
    assert result["state"] == "aborted" and result["hosts"][0]["state"] == "restored", result["hosts"]
    assert "mtp serving again" in result["hosts"][0]["restored"]
    assert {p for p, _ in serving(config).values()} == {"mtp"}
