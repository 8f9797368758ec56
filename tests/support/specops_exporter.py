"""specops' deployment series (`specops_deployment_info`, `specops_acceptance_floor`) served on 127.0.0.1 as the
bot's /metrics prints them (adapters.selfmetrics), for a Prometheus to scrape beside simulated vLLM servers: the
dashboard's and the alert rules' joins need them. `served` may be changed while it runs (a redeploy)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bot.adapters.selfmetrics import served_families
from bot.app.prometheus.exported import ServedSetting
from tests.support.sshd import free_port


class SpecopsExporter(Collector):
    def __init__(self, served: list[ServedSetting]) -> None:
        self.served = list(served)
        registry = CollectorRegistry()
        registry.register(self)
        self.port = free_port()
        self.instance = f"127.0.0.1:{self.port}"
        self._server, self._thread = start_http_server(self.port, addr="127.0.0.1", registry=registry)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        return served_families(self.served)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
