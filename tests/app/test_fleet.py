"""The fleet read from a real Prometheus (Debian's package) scraping two simulated hosts' vLLM servers:
the failing DFlash deployment and the fixed one, judged from the counters without any SSH."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.app.fleet import diagnose_instance, fleet
from bot.app.operations import ops
from bot.app.prometheus.promql import selector_of
from bot.app.prometheus.source import PrometheusError
from bot.config import Config, PrometheusSettings, Settings
from bot.errors import InputError
from bot.sim.host import SimHost
from tests.support.graph import graph, services
from tests.support.prometheus import BINARY, Prometheus
from tests.support.served import wait_for
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(BINARY is None, reason="prometheus is not installed (.ci/run installs it)")


class Fleet:
    def __init__(self, tmp: Path) -> None:
        self.hosts = [SimHost(tmp / name, stats_interval=0.5, startup_seconds=0.5, max_request_seconds=0.3).start()
                      for name in ("a", "b")]
        self.ports = [free_port(), free_port()]
        a, b = self.hosts
        self.config = Config(
            hosts={"a6000": a.host_config(), "b6000": b.host_config()},
            profiles={"dflash-0.20.1": a.profiles(self.ports[0])["dflash-0.20.1"],
                      "dflash": b.profiles(self.ports[1])["dflash"]},
            settings=Settings(state=tmp / "specops.db"))
        self.instances = [f"127.0.0.1:{p}" for p in self.ports]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def deploy(self) -> None:
        for host, profile in (("a6000", "dflash-0.20.1"), ("b6000", "dflash")):
            done = ops.deploy(ops.HostRequest(self.config, host, profile, force=True, **graph(self.config)))
            assert done.operation is not None and done.operation.status == "changed", done.operation
        for sim in self.hosts:
            sim.stop()  # the SSH servers go: from here on nothing may need SSH

    def traffic(self) -> None:
        def drive(port: int) -> None:
            with httpx.Client(trust_env=False, timeout=30) as http:
                while not self._stop.is_set():
                    http.post(f"http://127.0.0.1:{port}/v1/completions",
                              json={"model": "Qwen/Qwen3.6-27B", "prompt": "hello", "max_tokens": 32})

        for port in self.ports:
            t = threading.Thread(target=drive, args=(port,), daemon=True)
            t.start()
            self._threads.append(t)

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)
        for sim in self.hosts:
            sim.cleanup()  # stops each fake vLLM by its recorded PID


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fleet, Prometheus]]:
    tmp = tmp_path_factory.mktemp("fleet")
    f = Fleet(tmp)
    prom: Prometheus | None = None
    try:
        f.deploy()
        f.traffic()
        prom = Prometheus(tmp / "prom", f.instances)
        for inst in f.instances:  # two scrapes with drafts in them: increase() has something to say
            wait_for(f"drafts of {inst} in Prometheus", lambda i=inst: (prom.value(  # type: ignore[union-attr]
                f'increase(vllm:spec_decode_num_drafts_total{{instance="{i}"}}[20s])') or 0) > 0, timeout=90)
        yield f, prom
    finally:
        if prom is not None:
            prom.stop()
        f.close()


def test_the_fleet_lists_the_failing_deployment_first_and_the_fixed_one_healthy(
        scraped: tuple[Fleet, Prometheus]) -> None:
    f, prom = scraped
    result = fleet(f.config, PrometheusSettings(url=prom.url), "", 20, store=services(f.config).store)
    assert result.verdict == "failing" and result.headline.startswith("Fleet: 1 failing, 1 healthy (2 instances")
    assert [line.verdict for line in result.lines] == ["failing", "healthy"]
    report = result.as_json()
    by = {line["instance"]: line for line in report["instances"]}
    bad, good = by[f.instances[0]], by[f.instances[1]]
    assert report["instances"][0]["instance"] == f.instances[0]  # worst first
    assert bad["verdict"] == "failing" and bad["profile"] == "dflash-0.20.1" and bad["host"] == "a6000"
    assert bad["top_finding"]["id"] == "dflash-layer-offset"
    assert any(u.endswith("/40727") for u in bad["top_finding"]["upstream"])
    assert 1.0 <= bad["metrics"]["mean_acceptance_length"] < 1.6 and bad["metrics"]["num_drafts"] > 0
    assert len(bad["metrics"]["per_position"]) == 15
    assert good["verdict"] == "healthy" and good["metrics"]["mean_acceptance_length"] > 3
    assert good["metrics"]["tokens_per_s"] and good["metrics"]["tokens_per_s"] > 0
    totals = report["totals"]
    assert totals["instances"] == 2 and totals["by_verdict"] == {"failing": 1, "healthy": 1}
    assert bad["metrics"]["mean_acceptance_length"] < totals["mean_acceptance_length"] < \
        good["metrics"]["mean_acceptance_length"]


def test_specops_fleet_and_diagnose_from_prometheus_on_the_command_line(scraped: tuple[Fleet, Prometheus],
                                                                        tmp_path: Path) -> None:
    f, prom = scraped
    cfg = tmp_path / "specops.json"
    cfg.write_text(f.config.model_dump_json())
    run = [sys.executable, "-m", "bot", "--config", str(cfg)]
    p = subprocess.run([*run, "fleet", "--prometheus", prom.url, "--since", "20s", "--format", "json"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert [line["verdict"] for line in data["instances"]] == ["failing", "healthy"]
    p = subprocess.run([*run, "fleet", "--prometheus", prom.url, "--since", "20s", "--format", "md",
                        "--fail-on", "failing"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 1 and "| ✖ | 127.0.0.1:" in p.stdout and "#40727" in p.stdout
    p = subprocess.run([*run, "diagnose", "--prometheus", prom.url, "--instance", f.instances[0], "--since", "20s",
                        "--format", "json"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    one = json.loads(p.stdout)
    assert one["verdict"] == "failing" and "40727" in json.dumps(one["findings"][0]["upstream"])
    assert any("from Prometheus" in n for n in one["notes"])


def test_without_a_config_the_counters_alone_are_judged(scraped: tuple[Fleet, Prometheus]) -> None:
    f, prom = scraped
    report = diagnose_instance(None, PrometheusSettings(url=prom.url), f.instances[0], 20)
    assert report.verdict in ("failing", "degraded")  # no method or version known: a weaker claim
    assert any("judged on the counters alone" in n for n in report.notes)


def test_a_prometheus_that_is_down_or_refuses_gets_a_clear_message(scraped: tuple[Fleet, Prometheus],
                                                                   tmp_path: Path) -> None:
    _, prom = scraped
    with pytest.raises(PrometheusError, match=r"cannot reach Prometheus at http://127\.0\.0\.1:"):
        fleet(None, PrometheusSettings(url=f"http://127.0.0.1:{free_port()}", timeout=3), "", 60)
    with pytest.raises(PrometheusError, match=r"Prometheus refused the query \(bad_data\)"):
        fleet(None, PrometheusSettings(url=prom.url), 'instance=~"("', 60)
    with pytest.raises(InputError, match="matches 2 instances"):
        diagnose_instance(None, PrometheusSettings(url=prom.url), 'job="vllm"', 20)
    with pytest.raises(InputError, match="no vLLM server matching"):
        diagnose_instance(None, PrometheusSettings(url=prom.url), "127.0.0.1:1", 20)
    p = subprocess.run([sys.executable, "-m", "bot", "fleet", "--prometheus", f"http://127.0.0.1:{free_port()}"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT, env={"PATH": "/usr/bin:/bin",
                                                                                  "HOME": str(tmp_path)})
    assert p.returncode == 1 and "cannot reach Prometheus" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "bot", "fleet", "--prometheus", prom.url, "--since", "soon"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT, env={"PATH": "/usr/bin:/bin",
                                                                                  "HOME": str(tmp_path)})
    assert p.returncode == 2 and "--since 'soon'" in p.stderr


def test_selectors_are_checked_before_they_reach_prometheus() -> None:
    assert selector_of("127.0.0.1:8000") == 'instance="127.0.0.1:8000"'
    assert selector_of('{job="vllm", model_name=~"Qwen.*"}') == 'job="vllm",model_name=~"Qwen.*"'
    with pytest.raises(InputError, match="is not a label matcher"):
        selector_of('job="vllm"} or vector(1) {')


def test_an_instance_known_only_through_prometheus_is_watched_reported_and_opens_an_incident(
        scraped: tuple[Fleet, Prometheus], tmp_path: Path) -> None:
    from bot.config import PromInstance, WatchSettings

    f, prom = scraped
    cfg = f.config.model_copy(deep=True)
    cfg.settings = Settings(state=tmp_path / "watch.db")
    cfg.prometheus = PrometheusSettings(url=prom.url, instances={
        "remote-a": PromInstance(selector=f'instance="{f.instances[0]}"', profile="dflash-0.20.1")})
    cfg.watch = WatchSettings(hosts=["remote-a"], interval=60, report_cron="0 8 * * *")
    path = tmp_path / "specops.json"
    path.write_text(cfg.model_dump_json())
    run = [sys.executable, "-m", "bot", "--config", str(path)]
    drafts = f'sum(vllm:spec_decode_num_drafts_total{{instance="{f.instances[0]}"}})'
    for _ in range(4):  # the first watch sets the counters' start; each next one a window
        before = prom.value(drafts) or 0
        wait_for("Prometheus to scrape new drafts", lambda b=before: (prom.value(drafts) or 0) > b)
        p = subprocess.run([*run, "schedule", "run", "watch:remote-a"], capture_output=True, text=True, timeout=60,
                           cwd=ROOT)
        assert p.returncode == 0, p.stderr
    p = subprocess.run([*run, "schedule", "run", "report:remote-a"], capture_output=True, text=True, timeout=60,
                       cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "verdict failing" in p.stdout and "40727" in p.stdout, p.stdout[:1500]
    p = subprocess.run([*run, "incidents"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    row = next(line for line in p.stdout.splitlines() if "remote-a: acceptance collapsed (dflash)" in line)
    assert row.split()[1:3] == ["open", "remote-a"], p.stdout


def test_slash_specops_fleet_posts_the_fleet(scraped: tuple[Fleet, Prometheus]) -> None:
    """`/specops fleet` through bolt with a signed request; the report posted to the Slack emulator."""
    from tests.adapters.slack.test_bot import harness

    f, prom = scraped

    def configure(cfg: Config) -> None:
        cfg.prometheus = PrometheusSettings(url=prom.url)

    gen = harness(configure)
    h = next(gen)
    try:
        assert h.command('fleet instance=~"127.0.0.1:.*"').status_code == 200
        posted = h.wait(lambda: [m for m in h.emu.messages() if str(m.get("text", "")).startswith("Fleet")
                                 and "instance" in str(m.get("text", ""))], what="the fleet")
        text = json.dumps(posted[-1], ensure_ascii=False)
        assert all(inst in text for inst in f.instances) and "2 instance(s)" in text
        refused = h.command("fleet job=\"vllm\"} or {")
        assert "is not a label matcher" in refused.text
    finally:
        gen.close()
