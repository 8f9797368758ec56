"""`specops doctor` on the simulated host: each fault of the brief fails the right check with the right
fix, over the real SSH layer; a deploy starts with its short form."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.doctor import doctor
from bot.app.operations import ops
from bot.config import Config
from bot.core.results.doctor import DoctorReport
from bot.redact import Redactor
from bot.sim.host import SimHost
from bot.store.facade import Store
from tests.support.graph import graph, services
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def host() -> Iterator[tuple[SimHost, Config]]:
    sim = SimHost(stats_interval=0.5, startup_seconds=0.5, max_request_seconds=0.5).start()
    try:
        yield sim, sim.doctor_config(port=free_port())
    finally:
        sim.cleanup()


def failed(cfg: Config) -> dict[str, str]:
    report = doctor(cfg, "a6000", "dflash-0.20.1")
    return {c.id: c.fix or "" for c in report.checks if c.status == "failed"}


def test_a_ready_host_passes_every_check(host: tuple[SimHost, Config]) -> None:
    _, cfg = host
    report = doctor(cfg, "a6000", "dflash-0.20.1", **graph(cfg))
    assert report.status in ("ok", "warn") and report.proxmox == "pve"
    ids = {c.id for c in report.checks}
    assert {"devices", "driver-match", "nvidia-smi", "shm", "port", "stale-server", "vllm", "hf-token",
            "pve-gpu-driver", "pve-lxc-devices", "pve-driver-match"} <= ids
    assert not [c for c in report.checks if c.status == "failed"]
    token = next(c for c in report.checks if c.id == "hf-token")
    assert token.seen == ["token: none"]


def test_gpus_bound_to_vfio_pci(host: tuple[SimHost, Config]) -> None:
    sim, cfg = host
    sim.fault("vfio")
    bad = failed(cfg)
    assert "pve-gpu-driver" in bad and "devices" in bad and "nvidia-smi" in bad
    fix = bad["pve-gpu-driver"]
    assert "vfio-pci" in fix and "echo 0000:01:00.0 > /sys/bus/pci/drivers/vfio-pci/unbind" in fix
    assert "/sys/bus/pci/drivers/nvidia/bind" in fix and "update-initramfs" in fix


def test_driver_mismatch(host: tuple[SimHost, Config]) -> None:
    sim, cfg = host
    sim.fault("driver-mismatch")
    bad = failed(cfg)
    assert "driver-match" in bad and "pve-driver-match" in bad
    assert "550.127.05" in bad["driver-match"] and "--no-kernel-module" in bad["driver-match"]
    assert "550.120" in bad["driver-match"]


def test_no_devices_in_the_container(host: tuple[SimHost, Config]) -> None:
    sim, cfg = host
    sim.fault("no-devices")
    bad = failed(cfg)
    assert "devices" in bad and "pve-lxc-devices" in bad
    assert "lxc.mount.entry: /dev/nvidia0 dev/nvidia0 none bind,optional,create=file" in bad["pve-lxc-devices"]
    assert "pct reboot 105" in bad["pve-lxc-devices"]


def test_small_dev_shm(host: tuple[SimHost, Config]) -> None:
    sim, cfg = host
    sim.fault("small-shm")
    bad = failed(cfg)
    assert set(bad) == {"shm"} and "64 MiB" in bad["shm"] and "--shm-size" in bad["shm"]


def test_a_stale_server_holds_the_gpus(host: tuple[SimHost, Config]) -> None:
    sim, cfg = host
    sim.fault("stale-server")
    bad = failed(cfg)
    assert set(bad) == {"stale-server"} and "kill 4242" in bad["stale-server"]


def test_an_unreachable_proxmox_host_is_a_failed_check_not_an_error(host: tuple[SimHost, Config]) -> None:
    _, cfg = host
    cfg.hosts["pve"] = cfg.hosts["pve"].model_copy(update={"port": free_port()})  # nobody listens there
    report = doctor(cfg, "a6000", "dflash-0.20.1", **graph(cfg))
    pve = next(c for c in report.checks if c.id == "pve-ssh")
    assert pve.status == "failed" and "hosts.pve" in (pve.fix or "") and report.status == "failed"
    assert report.checks[0].status == "failed"  # failed first
    assert not any(c.id.startswith("pve-") and c.id != "pve-ssh" for c in report.checks)


def test_a_deploy_stops_at_the_short_doctor_and_says_why(host: tuple[SimHost, Config]) -> None:
    sim, cfg = host
    sim.fault("vfio")
    report = ops.deploy(ops.HostRequest(cfg, "a6000", "mtp", **graph(cfg)))
    op = report.operation
    assert op is not None and op.status == "failed" and "host ready (doctor, short form)" in (op.failed_step or "")
    step = next(s for s in op.steps if s.name == "host ready (doctor, short form)")
    assert "/dev/nvidia* present: failed" in (step.message or "") and "specops doctor --host a6000" in (
        step.message or "")
    assert Store(cfg.settings.state, Redactor()).locks.holder("a6000") is None
    sim.fault(None)
    ok = ops.deploy(ops.HostRequest(cfg, "a6000", "mtp", **graph(cfg)))
    assert ok.operation is not None and ok.operation.status == "changed", ok.operation


def test_doctor_on_the_command_line(host: tuple[SimHost, Config], tmp_path: Path) -> None:
    sim, cfg = host
    path = tmp_path / "specops.json"
    path.write_text(cfg.model_dump_json())
    run = [sys.executable, "-m", "bot", "--config", str(path), "doctor", "--host", "a6000"]
    p = subprocess.run([*run, "--format", "json"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["status"] in ("ok", "warn") and all({"id", "status", "seen", "fix"} <= set(c) for c in data["checks"])
    sim.fault("small-shm")
    p = subprocess.run([*run, "--format", "text"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 1 and "✖ failed  /dev/shm large enough" in p.stdout and "fix:" in p.stdout
    p = subprocess.run([*run[:-2], "--host", "nope"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 2 and "unknown host 'nope'" in p.stderr
    p = subprocess.run([sys.executable, "-m", "bot", "sim", "--fault", "gremlins"], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert p.returncode == 2 and "--fault 'gremlins'" in p.stderr


def test_doctor_in_chat_shows_each_failed_check_and_its_fix(host: tuple[SimHost, Config]) -> None:
    from bot.app.commands import parse
    from bot.app.verbs import REGISTRY
    from bot.app.verbs.spec import Call
    from bot.present.doctor import render_doctor

    sim, cfg = host
    sim.fault("vfio")
    cmd = parse("doctor a6000", cfg)
    report = REGISTRY[cmd.verb].run(Call(services(cfg), "UDEPLOY via test"), cmd.args())  # what chat runs
    assert isinstance(report, DoctorReport)
    assert report.verdict == "failing" and "not ready" in report.headline
    ids = [c.id for c in report.problems]
    assert "pve-gpu-driver" in ids and "devices" in ids
    slack = json.loads(render_doctor(report, "slack").text)
    text = json.dumps(slack, ensure_ascii=False)
    assert slack["text"] == report.headline and "vfio-pci" in text and "/sys/bus/pci/drivers/nvidia/bind" in text
    assert len(slack["blocks"]) <= 50 and all(len(b.get("text", {}).get("text", "")) <= 3000 for b in slack["blocks"])
    md = render_doctor(report, "md").text
    assert "- **failed**" in md and "specops kb show nvidia-smi-no-devices" in md
