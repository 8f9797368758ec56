"""The daily health report runs the watches' samples through the same triage as `diagnose`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bot.app.operations import ops
from bot.config import Config, WatchSettings
from bot.sim.host import SimHost
from tests.support.graph import graph
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cfg(sim: SimHost) -> Config:
    c = sim.config(port=free_port())
    c.watch = WatchSettings(interval=60, report_cron="0 8 * * *")
    return c


def traffic(cfg: Config, profile: str, requests: int = 2) -> None:
    port = cfg.profiles[profile].port
    with httpx.Client(trust_env=False, timeout=30) as http:
        for _ in range(requests):
            http.post(f"http://127.0.0.1:{port}/v1/completions",
                      json={"model": "Qwen/Qwen3.6-27B", "prompt": "hello", "max_tokens": 48})


def schedule_run(cfg_path: Path, job: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", "--config", str(cfg_path), "schedule", "run", job],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def report_after_three_watches(cfg: Config, sim: SimHost, profile: str, tmp_path: Path) -> str:
    deployed = ops.deploy(ops.HostRequest(cfg, "a6000", profile, force=True, **graph(cfg)))
    assert deployed.operation is not None and deployed.operation.status == "changed", deployed.operation
    cfg_path = tmp_path / "specops.json"
    cfg_path.write_text(cfg.model_dump_json())
    for _ in range(3):
        traffic(cfg, profile)
        p = schedule_run(cfg_path, "watch:a6000")
        assert p.returncode == 0, p.stderr
    p = schedule_run(cfg_path, "report:a6000")
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_health_report_of_the_failing_dflash_deploy_is_failing_with_the_curve(cfg: Config, sim: SimHost,
                                                                              tmp_path: Path) -> None:
    out = report_after_three_watches(cfg, sim, "dflash-0.20.1", tmp_path)
    assert "verdict failing" in out
    assert "No speculative-decoding samples" not in out
    measured = out[out.index("## What was measured"):]
    assert "| Per-position acceptance |" in measured and "0.000" in measured.split("\n")[4]
    # one count: the mean is over the watches the header counts, not "1 sample(s)" beside "3 watches"
    watches = re.search(r"\((\d+) watches\)", out)
    assert watches is not None and f"over {watches[1]} sample(s)" in measured, measured[:600]
    assert "#40727" in out or "40727" in out
    day = json.loads(subprocess.run([sys.executable, "-c", "import time; print(time.strftime('\"%Y-%m-%d\"'))"],
                                    capture_output=True, text=True).stdout)
    assert f"Health report a6000 ({day} " in out and "–" in out.split("\n")[0]  # the span of the samples


def test_health_report_of_a_collapsed_mtp_deploy_is_not_unknown(cfg: Config, sim: SimHost, tmp_path: Path) -> None:
    sim.control(acceptance_scale=0.02)  # the injected collapse
    out = report_after_three_watches(cfg, sim, "mtp", tmp_path)
    assert "verdict failing" in out or "verdict degraded" in out, out[:400]
    assert "verdict unknown" not in out
