"""Which hosts the watch takes by default: a GPU host, not the Proxmox host that carries it nor a jump host
(issue 22 item 3). Through the CLI as a user runs it (`specops schedule list`, `schedule run`, `config check`)
and through the scheduler's job store, which must hold no job for the hypervisor — also when an older
specops left one there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from bot.adapters.scheduler import Scheduler, job_ids
from bot.config import parse_config

ROOT = Path(__file__).resolve().parents[2]


def inventory(tmp: Path, **watch: Any) -> dict[str, Any]:
    """The README's doctor advice followed: the container a6000 names its Proxmox host `pve`, which is in
    the inventory too (as bot/sim/host.py's doctor_config builds it); b6000 is reached through a jump host
    that is also an inventory host."""
    return {
        "settings": {"state": str(tmp / "specops.db")},
        "hosts": {
            "a6000": {"address": "127.0.0.1", "port": 2201, "user": "vllm", "proxmox": {"host": "pve", "ctid": 105}},
            "pve": {"address": "127.0.0.1", "port": 2202, "user": "root"},
            "b6000": {"address": "127.0.0.1", "port": 2203, "user": "vllm",
                      "jump": {"address": "bastion.example.internal", "port": 2222, "user": "hop"}},
            "bastion": {"address": "bastion.example.internal", "port": 2222, "user": "hop"},
        },
        "profiles": {"mtp": {"model": "/models/Qwen3.6-27B", "method": "mtp", "num_speculative_tokens": 3,
                             "vllm": {"bin": "/opt/vllm/bin/vllm", "version": "0.20.1"}}},
        "watch": {"interval": 60, "report_cron": "0 8 * * *", **watch},
    }


def write(tmp: Path, data: dict[str, Any]) -> Path:
    path = tmp / "specops.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def specops(path: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", "--config", str(path), *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp), "PYTHONPATH": str(ROOT)})


def listed(out: str) -> list[str]:
    return sorted(line.split()[0] for line in out.splitlines()[1:] if line.strip())  # under the table's header


def test_schedule_list_watches_the_gpu_hosts_not_their_hypervisor_or_jump_host(tmp_path: Path) -> None:
    path = write(tmp_path, inventory(tmp_path))
    p = specops(path, tmp_path, "schedule", "list")
    assert p.returncode == 0, p.stderr
    assert listed(p.stdout) == ["prune:samples", "report:a6000", "report:b6000", "watch:a6000", "watch:b6000"], \
        p.stdout
    p = specops(path, tmp_path, "schedule", "run", "report:pve")
    assert p.returncode != 0 and "unknown job 'report:pve'" in p.stderr, (p.returncode, p.stderr)
    p = specops(path, tmp_path, "config", "check")
    assert p.returncode == 0, p.stdout + p.stderr


def test_an_explicit_watch_hosts_list_still_wins(tmp_path: Path) -> None:
    path = write(tmp_path, inventory(tmp_path, hosts=["a6000", "pve"]))
    p = specops(path, tmp_path, "schedule", "list")
    assert p.returncode == 0, p.stderr
    assert listed(p.stdout) == ["prune:samples", "report:a6000", "report:pve", "watch:a6000", "watch:pve"], p.stdout
    p = specops(path, tmp_path, "config", "check")  # a hypervisor named on purpose is no unknown host
    assert p.returncode == 0 and "unknown host" not in p.stdout + p.stderr, p.stdout + p.stderr


def test_the_scheduler_registers_no_job_for_the_hypervisor_and_drops_an_old_one(tmp_path: Path) -> None:
    config = parse_config(inventory(tmp_path))
    assert "pve" not in config.watched() and "bastion" not in config.watched()
    assert set(config.watched()) == {"a6000", "b6000"}
    # the job store as an older specops left it: jobs for every inventory host, the hypervisor's among them
    old = Scheduler(config).start(paused=True)
    try:
        old.scheduler.add_job("bot.adapters.scheduler:report_job", "interval", seconds=86400, id="report:pve",
                              kwargs={"host": "pve"}, replace_existing=True)
        old.scheduler.add_job("bot.adapters.scheduler:watch_job", "interval", seconds=60, id="watch:pve",
                              kwargs={"host": "pve"}, replace_existing=True)
    finally:
        old.shutdown()
    sched = Scheduler(config).start(paused=True)
    try:
        ids = sorted(job.id for job in sched.jobs())
    finally:
        sched.shutdown()
    assert ids == sorted(job_ids(config)) == ["prune:samples", "report:a6000", "report:b6000", "watch:a6000",
                                              "watch:b6000"]
