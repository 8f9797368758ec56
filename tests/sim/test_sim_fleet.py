"""Several simulated hosts at once (`specops sim --hosts 3`): each its own SSH server and port, GPU facts and vLLM
port (a per-host override), one group holding them; two deployments on two hosts at once each serve on its own
port; the command writes the config and leaves nothing behind when stopped."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.config import HostConfig, load_config
from bot.remote.ssh import SSHSession
from bot.sim.fleet import GROUP, SimFleet
from tests.support.processes import alive, sim_env
from tests.support.served import ROOT, wait_for

FAST: dict[str, Any] = {"stats_interval": 0.5, "startup_seconds": 0.5, "max_request_seconds": 0.5}




@pytest.fixture
def fleet() -> Iterator[SimFleet]:
    with SimFleet(3, **FAST) as f:
        yield f


def _run(host: HostConfig, name: str, *argv: str) -> str:
    with SSHSession(name, host) as s:
        r = s.run(list(argv), timeout=30)
        assert r.exit_status == 0, r.err()
        return r.out()


def test_three_hosts_each_with_its_own_ssh_port_host_key_and_gpu_facts(fleet: SimFleet) -> None:
    assert fleet.names == ["a6000", "a6000-b", "a6000-c"]
    assert len({h.port for h in fleet.hosts}) == 3 and len(set(fleet.vllm_ports.values())) == 3
    assert len({h.host_key.get_base64() for h in fleet.hosts}) == 3 and len(set(fleet.roots)) == 3
    free: list[list[str]] = []
    for h in fleet.hosts:  # over each host's own SSH server, verified against its own known_hosts
        out = _run(h.host_config(), h.name, "nvidia-smi", "--query-gpu=index,name,memory.free",
                   "--format=csv,noheader,nounits")
        rows = [line.split(", ") for line in out.splitlines()]
        assert [r[1] for r in rows] == ["NVIDIA RTX A6000"] * 2
        free.append([r[2] for r in rows])
        conf = _run(h.host_config(), h.name, "cat", str(h.sysroot / "etc/pve/lxc/105.conf"))
        assert f"hostname: {h.name}\n" in conf
    assert free[0] == ["49136", "49136"]  # the first host is the one host of before: 4 MiB in use
    assert len({f[0] for f in free}) == 3  # the others tell apart


def test_mtp_on_two_hosts_at_once_each_serves_on_its_own_port(fleet: SimFleet, tmp_path: Path) -> None:
    cfg = fleet.config()
    assert cfg.groups == {GROUP: ["a6000", "a6000-b", "a6000-c"]}
    path = tmp_path / "fleet.yaml"
    path.write_text(cfg.model_dump_json(indent=2))
    env = sim_env(tmp_path)
    deploys = {name: subprocess.Popen([sys.executable, "-m", "bot", "--config", str(path), "deploy", "mtp", "--host",
                                       name], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True) for name in ("a6000", "a6000-b")}
    try:
        for name, proc in deploys.items():
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"{name}: {err}"
    finally:
        for proc in deploys.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    pids = set()
    with httpx.Client(trust_env=False, timeout=10) as http:
        for name in ("a6000", "a6000-b"):
            host, port = fleet.host(name), fleet.vllm_ports[name]
            assert http.get(f"http://127.0.0.1:{port}/health").status_code == 200
            assert f"port: {port}" in (host.root / "srv/specops/server.yaml").read_text()
            pid = int((host.root / "srv/specops/server.pid").read_text())
            assert str(host.root).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
            pids.add(pid)
    assert len(pids) == 2
    assert not (fleet.host("a6000-c").root / "srv/specops/server.pid").exists()  # the third one untouched
    fleet.cleanup()  # each fake vLLM stopped by its PID
    for pid in pids:
        wait_for(f"server {pid} to stop", lambda p=pid: not alive(p), 10)  # type: ignore[misc]


def test_sim_hosts_3_writes_the_fleet_config_and_stops_on_sigterm(tmp_path: Path) -> None:
    env = sim_env(tmp_path)
    cfg_path = tmp_path / "sim.yaml"
    log_path = tmp_path / "sim.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "bot", "sim", "--hosts", "3", "--write-config", str(cfg_path)],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_for("the fleet's config (or its exit)",
                     lambda: proc.poll() is not None or "Ctrl-C stops them" in log_path.read_text(), 60)
            assert proc.poll() is None, log_path.read_text()
            roots = sorted((tmp_path / "t").glob("specops-sim-*"))
            assert len(roots) == 3
            cfg = load_config(cfg_path)
            doc = json.loads(cfg_path.read_text())
            hosts = [n for n in cfg.hosts if n.startswith("a6000")]
            assert hosts == ["a6000", "a6000-b", "a6000-c"] and doc["groups"] == {GROUP: hosts}
            ports = [cfg.hosts[n].overrides["port"] for n in hosts]
            assert len(set(ports)) == 3 and len({cfg.hosts[n].port for n in hosts}) == 3
            out = log_path.read_text()
            for n, p in zip(hosts, ports, strict=True):
                assert f"{n} " in out and f"vLLM port {p}" in out and f"SSH 127.0.0.1:{cfg.hosts[n].port}" in out
            assert f"group {GROUP}" in out
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 143, log_path.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert not any(r.exists() for r in roots)
    out = log_path.read_text()
    assert "Traceback" not in out and "stopped (SIGTERM); removed" in out


@pytest.mark.parametrize("n", ["0", "-1", "9"])
def test_sim_refuses_a_fleet_of_no_hosts_or_too_many(n: str, tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "bot", "sim", "--hosts", n, "--write-config", str(tmp_path / "c")],
                       cwd=ROOT, env=sim_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and f"--hosts {n}: a simulated fleet has 1 to 8 hosts" in p.stderr
    assert not (tmp_path / "c").exists() and not list((tmp_path / "t").iterdir())
