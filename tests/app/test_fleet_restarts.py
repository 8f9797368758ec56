"""A window that spans a restart on the same address (issue 22 item 2): a real Prometheus scrapes a simulated
host that serves the fixed DFlash deployment, then — a rollback to vLLM 0.20.1 on the same host:port — the
failing one. `increase()` over the window sums both servers; the fleet must judge only the current one, say
that the window mixes a restart, and `--fail-on failing` must exit 1."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.app.operations import ops
from bot.config import Config, PrometheusSettings, Settings
from bot.sim.host import SimHost
from tests.support.graph import graph
from tests.support.prometheus import BINARY, Prometheus
from tests.support.served import wait_for
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]
HEALTHY_SCRAPES = 40  # long enough that the blend of both servers does not read failing
FAILING_SCRAPES = 15  # the current server's part of the window: enough to judge

pytestmark = pytest.mark.skipif(BINARY is None, reason="prometheus is not installed (.ci/run installs it)")


class Rollback:
    """One simulated host, one port, two deployments one after the other."""

    def __init__(self, tmp: Path) -> None:
        self.sim = SimHost(tmp / "a", stats_interval=0.5, startup_seconds=0.5, max_request_seconds=0.3).start()
        self.port = free_port()
        profiles = self.sim.profiles(self.port)
        self.config = Config(hosts={"a6000": self.sim.host_config()},
                             profiles={"dflash": profiles["dflash"], "dflash-0.20.1": profiles["dflash-0.20.1"]},
                             settings=Settings(state=tmp / "specops.db"))
        self.instance = f"127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drive, daemon=True)

    def deploy(self, profile: str) -> None:
        done = ops.deploy(ops.HostRequest(self.config, "a6000", profile, force=True, **graph(self.config)))
        assert done.operation is not None and done.operation.status == "changed", done.operation

    def _drive(self) -> None:
        with httpx.Client(trust_env=False, timeout=30) as http:
            while not self._stop.is_set():
                try:
                    http.post(f"http://127.0.0.1:{self.port}/v1/completions",
                              json={"model": "Qwen/Qwen3.6-27B", "prompt": "hello", "max_tokens": 32})
                except httpx.HTTPError:
                    self._stop.wait(0.2)  # the server is being replaced: try again

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self.sim.cleanup()  # stops the fake vLLM by its recorded PID


@pytest.fixture(scope="module")
def rolled_back(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Rollback, Prometheus]]:
    tmp = tmp_path_factory.mktemp("rollback")
    r = Rollback(tmp)
    prom: Prometheus | None = None
    sel = f'{{instance="{r.instance}"}}'
    scrapes = f"sum(count_over_time(vllm:spec_decode_num_drafts_total{sel}[10m]))"  # Prometheus scrapes each 1 s
    try:
        r.deploy("dflash")  # the fixed deployment, healthy
        r._thread.start()
        prom = Prometheus(tmp / "prom", [r.instance])
        wait_for("the healthy server's part of the window", lambda: (prom.value(scrapes) or 0)  # type: ignore[union-attr]
                 >= HEALTHY_SCRAPES, timeout=HEALTHY_SCRAPES + 90)
        r.deploy("dflash-0.20.1")  # the rollback: another vLLM process on the same address
        resets = f"sum(resets(vllm:spec_decode_num_drafts_total{sel}[10m]))"
        wait_for("Prometheus to scrape the restarted server", lambda: (prom.value(resets) or 0) >= 1,  # type: ignore[union-attr]
                 timeout=90)
        seen = prom.value(scrapes) or 0
        wait_for("the failing server's part of the window", lambda: (prom.value(scrapes) or 0)  # type: ignore[union-attr]
                 >= seen + FAILING_SCRAPES, timeout=FAILING_SCRAPES + 60)
        yield r, prom
    finally:
        if prom is not None:
            prom.stop()
        r.close()


def specops(r: Rollback, prom: Prometheus, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cfg = r.config.model_copy(deep=True)
    cfg.prometheus = PrometheusSettings(url=prom.url)
    path = tmp / "specops.json"
    path.write_text(cfg.model_dump_json())
    return subprocess.run([sys.executable, "-m", "bot", "--config", str(path), *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)


def test_fleet_judges_the_current_server_and_says_the_window_mixes_a_restart(
        rolled_back: tuple[Rollback, Prometheus], tmp_path: Path) -> None:
    r, prom = rolled_back
    p = specops(r, prom, tmp_path, "fleet", "--since", "10m", "--fail-on", "failing")
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "failing" in p.stdout and "mixes 1 restart" in p.stdout, p.stdout
    assert "since the current server started" in p.stdout, p.stdout
    p = specops(r, prom, tmp_path, "fleet", "--since", "10m", "--format", "json")
    assert p.returncode == 0, p.stderr
    (line,) = json.loads(p.stdout)["instances"]
    assert line["verdict"] == "failing" and line["profile"] == "dflash-0.20.1", line
    assert line["top_finding"]["id"] == "dflash-layer-offset", line["top_finding"]
    assert 1.0 <= line["metrics"]["mean_acceptance_length"] < 1.6, line["metrics"]
    window = line["window"]
    assert window["restarts"] == 1 and window["judged"] == "since the current server started", window
    assert FAILING_SCRAPES - 5 < window["seconds"] < HEALTHY_SCRAPES, window


def test_diagnose_from_prometheus_judges_the_current_server_too(rolled_back: tuple[Rollback, Prometheus],
                                                                tmp_path: Path) -> None:
    r, prom = rolled_back
    p = specops(r, prom, tmp_path, "diagnose", "--prometheus", prom.url, "--instance", r.instance, "--since", "10m",
                "--format", "json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["verdict"] == "failing", report["headline"]
    assert any("mixes 1 restart" in n and "since the current server started" in n for n in report["notes"]), \
        report["notes"]


def test_a_window_that_starts_after_the_restart_mixes_nothing(rolled_back: tuple[Rollback, Prometheus],
                                                             tmp_path: Path) -> None:
    r, prom = rolled_back
    p = specops(r, prom, tmp_path, "fleet", "--since", "10s", "--format", "json")
    assert p.returncode == 0, p.stderr
    (line,) = json.loads(p.stdout)["instances"]
    assert line["verdict"] == "failing" and line["window"]["restarts"] == 0, line
