"""Benchmark: specops over a real OpenSSH sshd on 127.0.0.1, side by side with OpenSSH's own client.

    python bench/ssh.py [--repeat 7]

1. A 20-step playbook (paramiko, one connection, every command under `timeout`) vs the same 20
   command lines over one multiplexed `ssh` connection (ControlMaster).   goal: <= 1.5x
2. `diagnose` of a running (simulated) vLLM, end to end, connection included, vs one bare
   `ssh host true`.                                                         goal: <= 3x

The sshd is started here with its own host key; its sessions get the simulated A6000 host's
environment (fake `vllm`, `nvidia-smi`) through `SetEnv`, so the commands are the real ones.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.timing import median  # noqa: E402
from bot.app.operations import ops  # noqa: E402
from bot.app.services import build_services  # noqa: E402
from bot.config import Config, Settings  # noqa: E402
from bot.engine.hostvars import host_variables  # noqa: E402
from bot.engine.playbook import Playbook, RunState  # noqa: E402
from bot.engine.runner import run_playbook  # noqa: E402
from bot.remote.ssh import SSHSession  # noqa: E402
from bot.sim.host import SimHost  # noqa: E402
from tests.support.sshd import Sshd, free_port  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    r = args.repeat
    work = Path(tempfile.mkdtemp(prefix="specops-bench-ssh-"))
    sim = SimHost(work / "host", stats_interval=1.0, startup_seconds=0.5)
    sshd = Sshd(work / "sshd", extra_config=[f"SetEnv {k}={v}" for k, v in sim.env().items()]).start()
    try:
        host = sim.host_config(port=sshd.port).model_copy(
            update={"user": sshd.user, "key": sshd.client_key, "known_hosts": sshd.known_hosts})
        cfg = Config(hosts={"a6000": host}, profiles=sim.profiles(port=free_port()),
                     settings=Settings(state=work / "specops.db"))
        v = host_variables(cfg, "a6000", "mtp")
        commands = [
            ["true"], ["mkdir", "-p", v["workdir"]], ["test", "-e", v["model"]],
            ["cat", f"{v['model']}/config.json"], ["ss", "-Hltn", f"sport = :{v['port']}"],
            ["nvidia-smi", "--query-gpu=index,name,memory.total,memory.free", "--format=csv,noheader,nounits"],
            ["uname", "-a"], ["df", "-k", v["workdir"]], ["ls", "-la", v["workdir"]], ["id"],
        ] * 2
        playbook = Playbook.model_validate({"name": "bench-20", "steps": [
            {"name": f"step {i + 1}", "kind": "run", "argv": argv, "timeout": 30} for i, argv in enumerate(commands)]})
        lines = [SSHSession.command_line(argv, 30) for argv in commands]
        ssh_base = ["ssh", "-p", str(sshd.port), "-i", str(sshd.client_key),
                    "-o", f"UserKnownHostsFile={sshd.known_hosts}",
                    "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", f"{sshd.user}@127.0.0.1"]
        ctl = str(work / "ctl")

        def specops_20(connected: SSHSession | None = None) -> None:
            session = connected or SSHSession("a6000", host).connect()
            try:
                outcome = run_playbook(playbook, session, RunState(variables={}))
                assert outcome.failed is None, outcome.failed
            finally:
                if connected is None:
                    session.close()

        def ssh_mux_20(with_master: bool = True) -> None:
            if with_master:
                subprocess.run([ssh_base[0], "-o", "ControlMaster=yes", "-o", f"ControlPath={ctl}", "-o",
                                "ControlPersist=60", "-N", "-f", *ssh_base[1:]], check=True)
            for line in lines:
                subprocess.run([ssh_base[0], "-o", f"ControlPath={ctl}", *ssh_base[1:], line], check=True,
                               stdout=subprocess.PIPE)
            if with_master:
                subprocess.run([ssh_base[0], "-o", f"ControlPath={ctl}", "-O", "exit", *ssh_base[1:]],
                               check=True, capture_output=True)

        t_ours = median(specops_20, r)
        t_mux = median(ssh_mux_20, r)
        # the per-command part alone: both connections already up
        session = SSHSession("a6000", host).connect()
        t_ours_warm = median(lambda: specops_20(session), r)
        subprocess.run([ssh_base[0], "-o", "ControlMaster=yes", "-o", f"ControlPath={ctl}", "-o", "ControlPersist=60",
                        "-N", "-f", *ssh_base[1:]], check=True)
        t_mux_warm = median(lambda: ssh_mux_20(False), r)
        subprocess.run([ssh_base[0], "-o", f"ControlPath={ctl}", "-O", "exit", *ssh_base[1:]], capture_output=True)
        session.close()

        svc = build_services(cfg)
        graph = {"store": svc.store, "hosts": svc.hosts}
        deployed = ops.deploy(ops.HostRequest(cfg, "a6000", "mtp", **graph))
        assert deployed.operation is not None and deployed.operation.status == "changed", deployed.operation
        t_true = median(lambda: subprocess.run([*ssh_base, "true"], check=True), r)
        t_diag = median(lambda: ops.diagnose_host(ops.HostRequest(cfg, "a6000", probe=False, **graph)), r)
        cfg_file = work / "bench.yaml"
        cfg_file.write_text(cfg.model_dump_json())  # JSON is YAML
        t_diag_cli = median(lambda: subprocess.run(
            [sys.executable, "-m", "bot", "--config", str(cfg_file), "diagnose", "--host", "a6000", "--no-probe",
             "--format", "json"], check=True, capture_output=True, cwd=ROOT), r)
        ops.stop(ops.HostRequest(cfg, "a6000"))
    finally:
        sshd.stop()
        sim.cleanup()

    print(f"# bench/ssh.py — {time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores, real OpenSSH sshd on "
          f"127.0.0.1, median of {r} runs")
    print()
    print("| what | seconds | ratio |")
    print("|---|---:|---|")
    rows = [
        ("20-step playbook, specops (connect + 20 steps)", t_ours, f"{t_ours / t_mux:.2f}x of ssh mux (goal <= 1.5x)"),
        ("20 commands, ssh ControlMaster (master + 20 + exit)", t_mux, ""),
        ("20 steps on an open connection, specops", t_ours_warm, f"{t_ours_warm / t_mux_warm:.2f}x"),
        ("20 commands on an open master, ssh", t_mux_warm, ""),
        ("diagnose (no probe), in process, connect included", t_diag, f"{t_diag / t_true:.2f}x of ssh true "
                                                                      "(goal <= 3x)"),
        ("`specops diagnose --host --no-probe`, whole command", t_diag_cli, f"{t_diag_cli / t_true:.2f}x of ssh true"),
        ("`ssh host true` (new connection)", t_true, ""),
    ]
    for name, secs, note in rows:
        print(f"| {name} | {secs:.3f} | {note} |")
    print()
    print("per command, sshd's own session setup dominates: " + shlex.join(["ssh", "host", lines[0]]))


if __name__ == "__main__":
    main()
