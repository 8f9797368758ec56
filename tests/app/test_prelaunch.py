"""`specops check` on the simulated host (issue 37), over the SSH layer: the brief's DFlash on vLLM 0.20.1 is
refused before launch naming vllm#40727 and vllm#40898 and the releases that fix them; the fixed profile passes;
a config or a host that cannot be read is "could not check", never a pass; chat and the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.operations.prelaunch import prelaunch
from bot.config import Config
from bot.sim.host import SimHost
from tests.support.graph import services
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def host() -> Iterator[tuple[SimHost, Config]]:
    sim = SimHost(stats_interval=0.5, startup_seconds=0.5, max_request_seconds=0.5).start()
    try:
        yield sim, sim.config(port=free_port())
    finally:
        sim.cleanup()


def test_the_brief_is_refused_before_launch_and_the_fixed_profile_passes(host: tuple[SimHost, Config]) -> None:
    sim, cfg = host
    brief = prelaunch(cfg, "dflash-0.20.1", "a6000")
    assert brief.vllm_version == "0.20.1" and brief.status == "refuse"
    said = json.dumps(brief.as_json())
    assert "vllm#40727" in said and "vllm#40898" in said and "0.22.0" in said and "0.26.0" in said
    fixed = prelaunch(cfg, "dflash", "a6000")
    assert fixed.vllm_version == "0.26.0" and fixed.status == "ok", fixed.as_json()
    gpus = next(c for c in fixed.checks if c.id == "gpus")  # read from the host's nvidia-smi
    assert "NVIDIA RTX A6000 (8.6)" in gpus.evidence[0] and "tensor-parallel size of 2" in gpus.title
    assert not any((sim.root / "srv" / "specops").glob("*.pid"))  # nothing was started


def test_a_drafter_config_that_is_not_there_is_could_not_check(host: tuple[SimHost, Config]) -> None:
    sim, cfg = host
    (sim.root / "models" / "Qwen3.6-27B-DFlash" / "config.json").unlink()
    got = {c.id: c for c in prelaunch(cfg, "dflash", "a6000").checks}
    assert got["vocabulary"].verdict == "unknown" and "config.json is not on the host" in got["vocabulary"].evidence[0]
    # the drafter's facts the known failures rest on are only guessed from its name now: warnings, not refusals
    brief = prelaunch(cfg, "dflash-0.20.1", "a6000")
    assert {c.verdict for c in brief.checks if c.id.startswith("known:")} == {"warn"}


def test_a_host_that_cannot_be_reached_passes_nothing(host: tuple[SimHost, Config]) -> None:
    sim, cfg = host
    sim.stop()
    report = prelaunch(cfg, "dflash", "a6000")
    unknown = [c for c in report.checks if c.verdict == "unknown"]
    assert report.status == "unknown" and {"vllm-version", "vocabulary", "gpus"} <= {c.id for c in unknown}
    assert all("could not be reached" in " ".join(c.evidence) for c in unknown if c.id == "vllm-version")


def test_check_on_the_command_line_and_in_chat(host: tuple[SimHost, Config], tmp_path: Path) -> None:
    from bot.app.commands import parse
    from bot.app.verbs import REGISTRY
    from bot.app.verbs.spec import Call
    from bot.present.prelaunch import render_prelaunch

    _sim, cfg = host
    path = tmp_path / "specops.json"
    path.write_text(cfg.model_dump_json())
    run = [sys.executable, "-m", "bot", "--config", str(path), "check"]
    p = subprocess.run([*run, "dflash-0.20.1", "--host", "a6000", "--format", "json"], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 1 and json.loads(p.stdout)["status"] == "refuse" and "refused:" in p.stderr
    p = subprocess.run([*run, "dflash", "--host", "a6000", "--format", "text"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert p.returncode == 0 and "ready to launch" in p.stdout, p.stderr
    p = subprocess.run([*run, "nope", "--host", "a6000"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 2 and "unknown profile 'nope'" in p.stderr and "Traceback" not in p.stderr
    # deploy from the command line: refused before launch (exit 1), and audited as chat's commands are
    base = [sys.executable, "-m", "bot", "--config", str(path)]
    p = subprocess.run([*base, "deploy", "dflash-0.20.1", "--host", "a6000"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert p.returncode == 1 and "Refused before launch" in p.stdout, p.stderr
    p = subprocess.run([*base, "audit", "--format", "json"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    rows = [r for r in json.loads(p.stdout) if r["source"] == "cli"]
    assert rows and rows[0]["text"].endswith("deploy dflash-0.20.1 --host a6000") and rows[0]["result"] == "refused"
    cmd = parse("check dflash-0.20.1 a6000", cfg)
    report = REGISTRY[cmd.verb].run(Call(services(cfg), "UDEPLOY via test"), cmd.args())  # what chat runs
    slack = json.loads(render_prelaunch(report, "slack").text)  # type: ignore[arg-type]
    text = json.dumps(slack, ensure_ascii=False)
    assert "refused before launch" in slack["text"] and "vllm#40727" in text and len(slack["blocks"]) <= 50


def test_deploy_is_refused_before_launch_and_force_goes_past_it_on_the_record(host: tuple[SimHost, Config]) -> None:
    from bot.app.operations import ops
    from bot.app.verbs._host import operation_exit_of
    from tests.support.graph import graph

    sim, cfg = host
    g = graph(cfg)
    plan = ops.deploy(ops.HostRequest(cfg, "a6000", "dflash-0.20.1", dry_run=True, **g))
    assert plan.operation is not None and plan.operation.status == "refused" and "would be refused" in plan.headline
    refused = ops.deploy(ops.HostRequest(cfg, "a6000", "dflash-0.20.1", **g))
    op = refused.operation
    assert op is not None and op.status == "refused" and op.failed_step == "0. check before launch"
    # the checks' findings are the judgment the refusal carries; the operation is its own result
    judged = refused.diagnosis
    assert operation_exit_of(refused, None).code == 1 and judged is not None and judged.verdict == "failing"
    assert {f.id for f in judged.findings} >= {"prelaunch:known:dflash-layer-offset",
                                               "prelaunch:known:dflash-swa-full-attention"}
    assert any("--force" in step for step in judged.plan)
    assert not (sim.root / "srv" / "specops" / "server.pid").exists()  # nothing started
    assert g["store"].deployments.latest("a6000") is None and g["store"].locks.holder("a6000") is None
    forced = ops.deploy(ops.HostRequest(cfg, "a6000", "dflash-0.20.1", force=True, **g))
    fop = forced.operation
    assert fop is not None and fop.status == "changed" and len(fop.forced) == 2, fop
    assert fop.steps[0].name == "check before launch" and fop.steps[0].status == "failed"
    assert forced.notes[0].startswith("deployed with --force past the checks before launch")
    row = g["store"].deployments.latest("a6000")
    assert row is not None and row.detail["forced"] == fop.forced
    fixed = ops.deploy(ops.HostRequest(cfg, "a6000", "dflash", dry_run=True, **g))
    assert fixed.operation is not None and fixed.operation.status == "planned"
    assert fixed.operation.steps[0].name == "check before launch" and fixed.operation.steps[0].status == "ok"


def test_hub_names_are_read_from_the_hosts_hugging_face_cache(host: tuple[SimHost, Config]) -> None:
    _sim, cfg = host
    for name in ("dflash-0.20.1", "dflash"):
        p = cfg.profiles[name]
        cfg.profiles[f"{name}-hub"] = p.model_copy(update={"model": "Qwen/Qwen3.6-27B",
                                                            "drafter": "z-lab/Qwen3.6-27B-DFlash"})
    brief = {c.id: c for c in prelaunch(cfg, "dflash-0.20.1-hub", "a6000").checks}
    # the drafter's layer_types read from its cached config.json: a refusal, not a guess from its name
    assert brief["known:dflash-swa-full-attention"].verdict == "refuse"
    fixed = {c.id: c for c in prelaunch(cfg, "dflash-hub", "a6000").checks}
    assert fixed["memory-fit"].verdict == "ok" and "drafter 3.2 GiB" in fixed["memory-fit"].evidence[0]
    missing = cfg.profiles["dflash-hub"].model_copy(update={"drafter": "z-lab/Not-There"})
    cfg.profiles["missing-hub"] = missing
    got = {c.id: c for c in prelaunch(cfg, "missing-hub", "a6000").checks}
    vocab = got["vocabulary"]
    assert vocab.verdict == "unknown" and "no config.json for z-lab--Not-There" in vocab.evidence[0]
