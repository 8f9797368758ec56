"""One judgment, one place (issue 38): four simulated hosts serve MTP at k = 1, MTP at k = 4, the fixed DFlash and
the brief's DFlash on vLLM 0.20.1, under traffic. Every path specops and its shipped files judge a server by — the
deploy's report, `status`, the watch, `fleet` from Prometheus, the alert rule evaluated by a real Prometheus and the
dashboard's judgment panel with its thresholds — calls the first three healthy and the last one failing.

The alert rule and the dashboard read the floors from specops' own /metrics (the bot's collector over the real
store and config, served to Prometheus), joined by the `specops_host` label of each vLLM target."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import start_http_server

from bot.adapters.selfmetrics import REGISTRY, BotHealth
from bot.app.fleet import fleet
from bot.app.operations import ops
from bot.app.prometheus.exported import served_settings
from bot.app.services import Services, build_services
from bot.app.watching.watch import watch_once
from bot.config import Config, PrometheusSettings, Settings
from bot.sim.host import SimHost
from tests.support.prometheus import BINARY, Prometheus
from tests.support.served import wait_for
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "specops-spec-decode.json"
RULES = ROOT / "deploy" / "prometheus-rules.yml"
# host -> (profile, what every path must call it)
FLEET = {"mtp-one": ("mtp-k1", "healthy"), "mtp-four": ("mtp-k4", "healthy"), "dflash-fixed": ("dflash", "healthy"),
         "dflash-brief": ("dflash-0.20.1", "failing")}

pytestmark = pytest.mark.skipif(BINARY is None, reason="prometheus is not installed (.ci/run installs it)")


@dataclass
class Judged:
    config: Config
    svc: Services
    sims: dict[str, SimHost]
    ports: dict[str, int]
    prom: Prometheus
    deployed: dict[str, str]  # host -> the deploy report's verdict

    def instance(self, host: str) -> str:
        return f"127.0.0.1:{self.ports[host]}"


def _config(sims: dict[str, SimHost], ports: dict[str, int], tmp: Path) -> Config:
    profiles = {}
    for host, (name, _) in FLEET.items():
        base = sims[host].profiles(ports[host])["mtp" if name.startswith("mtp") else name]
        if name.startswith("mtp"):
            base = base.model_copy(update={"num_speculative_tokens": int(name.removeprefix("mtp-k"))})
        profiles[name] = base
    return Config(hosts={host: sim.host_config() for host, sim in sims.items()}, profiles=profiles,
                  settings=Settings(state=tmp / "specops.db"))


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judged]:
    tmp = tmp_path_factory.mktemp("one-judgment")
    sims = {host: SimHost(tmp / host, stats_interval=0.5, startup_seconds=0.3, max_request_seconds=0.3).start()
            for host in FLEET}
    ports = {host: free_port() for host in FLEET}
    config = _config(sims, ports, tmp)
    svc = build_services(config)
    stop = threading.Event()
    threads: list[threading.Thread] = []
    prom: Prometheus | None = None
    health: BotHealth | None = None
    exporter: Any = None
    try:
        deployed = {}
        for host, (profile, _) in FLEET.items():
            # the brief's DFlash is refused before launch unless forced: that it is still judged failing is the point
            report = ops.deploy(ops.HostRequest(config, host, profile, force=profile == "dflash-0.20.1",
                                                store=svc.store, hosts=svc.hosts))
            assert report.operation.status == "changed" and report.diagnosis is not None, report.headline
            deployed[host] = report.diagnosis.verdict

        def drive(port: int) -> None:
            with httpx.Client(trust_env=False, timeout=30) as http:
                while not stop.is_set():
                    try:
                        http.post(f"http://127.0.0.1:{port}/v1/completions",
                                  json={"model": "Qwen/Qwen3.6-27B", "prompt": "hello", "max_tokens": 32})
                    except httpx.HTTPError:
                        stop.wait(0.2)

        for port in ports.values():
            threads.append(threading.Thread(target=drive, args=(port,), daemon=True))
            threads[-1].start()
        # the bot's own /metrics collector over the real store and config, served as the bot serves it
        health = BotHealth(svc.store, lambda: 0, served=lambda: served_settings(config, svc.store.deployments))
        metrics_port = free_port()
        exporter = start_http_server(metrics_port, addr="127.0.0.1", registry=REGISTRY)
        targets = [f"127.0.0.1:{p}" for p in ports.values()]
        prom = Prometheus(tmp / "prom", targets, rule_files=[RULES],
                          labels={f"127.0.0.1:{ports[h]}": {"specops_host": h} for h in FLEET},
                          jobs={"specops": [f"127.0.0.1:{metrics_port}"]})
        for inst in targets:  # drafts in two scrapes of each: rate() has something to say
            wait_for(f"drafts of {inst}", lambda i=inst: (prom.value(  # type: ignore[union-attr]
                f'increase(vllm:spec_decode_num_drafts_total{{instance="{i}"}}[20s])') or 0) > 0, timeout=90)
        wait_for("specops' floors in Prometheus", lambda: len(prom.query("specops_acceptance_floor")) == 4,  # type: ignore[union-attr]
                 timeout=60)
        yield Judged(config, svc, sims, ports, prom, deployed)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        if prom is not None:
            prom.stop()
        if exporter is not None:
            exporter[0].shutdown()
            exporter[0].server_close()
        if health is not None:
            health.close()
        svc.close()
        for sim in sims.values():
            sim.cleanup()  # stops each fake vLLM by its recorded PID, then its SSH server


def expected() -> dict[str, str]:
    return {host: verdict for host, (_, verdict) in FLEET.items()}


def test_deploy_and_status_judge_the_four_alike(judged: Judged) -> None:
    assert judged.deployed == expected()
    status = {host: ops.status(ops.HostRequest(judged.config, host, store=judged.svc.store,
                                               hosts=judged.svc.hosts)).verdict for host in FLEET}
    assert status == expected()


def test_fleet_from_prometheus_judges_the_four_alike(judged: Judged) -> None:
    result = fleet(judged.config, PrometheusSettings(url=judged.prom.url), "", 20, store=judged.svc.store)
    by = {line["instance"]: line["verdict"] for line in result.as_json()["instances"]}
    assert {host: by[judged.instance(host)] for host in FLEET} == expected()


def test_the_watch_judges_the_four_alike(judged: Judged) -> None:
    rules = judged.config.watch.rules
    alerts: dict[str, set[str]] = {host: set() for host in FLEET}
    for _ in range(rules.low_acceptance_samples + 1):
        for host in FLEET:
            sample = watch_once(judged.svc, host)
            assert sample is not None and sample.up, sample
            alerts[host] |= set(sample.alerts)
    called = {host: "failing" if "acceptance" in kinds else "healthy" for host, kinds in alerts.items()}
    assert called == expected(), alerts
    assert alerts["dflash-brief"] == {"acceptance"}
    assert not any(alerts[h] for h in FLEET if h != "dflash-brief"), alerts


def test_the_shipped_alert_rule_in_a_real_prometheus_judges_the_four_alike(judged: Judged) -> None:
    """`for: 10m` keeps it pending here: pending means its condition holds now (the test cannot wait ten minutes)."""
    def collapsed() -> set[str]:
        return {s["metric"]["specops_host"] for s in judged.prom.query(
            'ALERTS{alertname="SpecDecodeAcceptanceCollapsed"}')}

    wait_for("the collapse alert on the brief's host", lambda: "dflash-brief" in collapsed(), timeout=60)
    assert collapsed() == {"dflash-brief"}
    # and the floors it judged with are specops' own, one per host
    floors = {s["metric"]["specops_host"]: float(s["value"][1]) for s in judged.prom.query("specops_acceptance_floor")}
    assert floors == dict.fromkeys(FLEET, 0.3)


def test_the_dashboards_judgment_panel_and_its_thresholds_judge_the_four_alike(judged: Judged) -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    [panel] = [p for p in dashboard["panels"] if p.get("title") == "Position 0 against its floor"]
    expr = panel["targets"][0]["expr"].replace("$instance", ".*").replace("$model_name", ".*")
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]

    def colour(value: float) -> str:
        return [s["color"] for s in steps if s["value"] is None or value >= s["value"]][-1]

    by_instance = {s["metric"]["instance"]: float(s["value"][1]) for s in judged.prom.query(expr)}
    called = {host: "failing" if colour(by_instance[judged.instance(host)]) == "red" else "healthy" for host in FLEET}
    assert called == expected(), by_instance
