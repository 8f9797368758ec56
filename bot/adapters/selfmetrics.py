"""The bot's own health and metrics: `/healthz` (is it able to do its job now?) and `/metrics`
(Prometheus text via prometheus_client) — what an on-call person needs to trust the bot itself.

Counters are process-wide (the job pool and the scheduler count into them); what lives in the
database (open incidents, the last watch that found each host up) is read at scrape time, on a
read-only connection that never waits for the write lock.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from bot.app.prometheus.exported import ServedSetting

REGISTRY = CollectorRegistry(auto_describe=True)
JOBS = Counter("specops_jobs", "Chat jobs run, by verb and result (ok, error)", ["verb", "result"],
               registry=REGISTRY)
COMMAND_SECONDS = Histogram("specops_command_seconds", "Time from a chat job's start to its end, by verb", ["verb"],
                            buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800), registry=REGISTRY)
SCHEDULED = Counter("specops_scheduled_runs", "Scheduled runs (watch, report, prune), by kind and result",
                    ["kind", "result"], registry=REGISTRY)


def count_job(verb: str, seconds: float, ok: bool) -> None:
    JOBS.labels(verb, "ok" if ok else "error").inc()
    COMMAND_SECONDS.labels(verb).observe(seconds)


def count_scheduled(job_id: str, ok: bool) -> None:
    SCHEDULED.labels(job_id.split(":", 1)[0], "ok" if ok else "error").inc()


class _Live(Collector):
    """Values read when scraped: queue depth, open incidents, last good watch per host."""

    def __init__(self, queue_depth: Callable[[], int], store: Any, leadership: Any = None,
                 served: Callable[[], list[ServedSetting]] | None = None) -> None:
        self.queue_depth = queue_depth
        self.store = store
        self.leadership = leadership
        self.served = served
        # what the last readable scrape found: a scrape that cannot read the database shows these,
        # flagged by specops_store_readable 0, rather than dropping the series or waiting
        self._incidents: int | None = None
        self._last_up: dict[str, float] = {}
        self._served: list[ServedSetting] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("specops_job_queue_depth", "Chat jobs running or waiting", value=self.queue_depth())
        if self.leadership is not None:
            lead = GaugeMetricFamily("specops_leader", "1 if this replica leads (runs the schedules), else 0",
                                     labels=["replica"])
            lead.add_metric([self.leadership.replica], int(self.leadership.leader))
            yield lead
        readable = True
        try:
            # read-only, with a short busy timeout: a write lock held elsewhere must not hang a scrape
            incidents = self.store.incidents.read_open_count()
            last_up = self.store.samples.read_last_up()
            served = self.served() if self.served is not None else []
        except Exception:  # the store's trouble shows in /healthz; a scrape still answers
            readable = False
        else:
            self._incidents, self._last_up, self._served = incidents, last_up, served
        yield GaugeMetricFamily("specops_store_readable", "1 if this scrape could read the state database, else 0 "
                                "(the database's values below are then the last ones read)", value=int(readable))
        if self._incidents is None:
            return
        yield GaugeMetricFamily("specops_incidents_open", "Incidents not resolved", value=self._incidents)
        g = GaugeMetricFamily("specops_last_up_watch_timestamp_seconds",
                              "When a watch last found the host's server up", labels=["host"])
        for host, at in sorted(self._last_up.items()):
            g.add_metric([host], at)
        yield g
        yield from served_families(self._served)


def served_families(served: list[ServedSetting]) -> Iterator[GaugeMetricFamily]:
    """Each host's deployment as specops knows it, labelled `specops_host` like the vLLM scrape targets
    (deploy/prometheus-rules.yml joins on it): the info series, and the floor the alert rules judge with."""
    info = GaugeMetricFamily("specops_deployment_info", "The profile each host serves, as specops deployed it "
                             "(method none: no speculation; k empty then)",
                             labels=["specops_host", "profile", "method", "k"])
    floor = GaugeMetricFamily("specops_acceptance_floor", "The floor of the share of drafts whose first token is "
                              "accepted, for the method the host serves (watch.rules.first_position_floor)",
                              labels=["specops_host", "profile", "method"])
    for one in served:
        info.add_metric([one.host, one.profile, one.method, "" if one.k is None else str(one.k)], 1)
        if one.floor is not None:
            floor.add_metric([one.host, one.profile, one.method], one.floor)
    yield info
    yield floor


class BotHealth:
    """Routes for GET /healthz and GET /metrics of one running bot."""

    def __init__(self, store: Any, queue_depth: Callable[[], int], leadership: Any = None, schedules: Any = None,
                 slack_connected: Callable[[], bool] | None = None,
                 served: Callable[[], list[ServedSetting]] | None = None) -> None:
        self.store = store
        self.leadership = leadership  # app.replicas.Leadership: which replica leads
        self.schedules = schedules  # adapters.scheduler.LeaderSchedules: running while this replica leads
        self.slack_connected = slack_connected
        self._live = _Live(queue_depth, store, leadership, served)
        REGISTRY.register(self._live)

    def close(self) -> None:
        REGISTRY.unregister(self._live)

    def checks(self) -> dict[str, str]:
        out: dict[str, str] = {}
        problem = self.store.write_probe()
        out["store"] = problem or "ok"
        if self.schedules is not None:
            leads = self.leadership is None or self.leadership.leader
            # a standby's schedules run on the leader: not running here is its job, not a fault
            out["scheduler"] = ("ok" if self.schedules.running else "not running") if leads else "ok"
        if self.leadership is not None and problem is None:
            # replicas: while none leads, no schedule runs anywhere — every replica says so, not only the leader
            out["leader"] = "ok" if self._leader_id() is not None else "no replica leads"
        if self.slack_connected is not None:
            try:
                out["slack"] = "ok" if self.slack_connected() else "not connected"
            except Exception as exc:  # a probe of the connection must not break the health answer
                out["slack"] = f"unknown ({type(exc).__name__})"
        return out

    def healthz(self, _headers: dict[str, str] | None = None, _body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
        checks = self.checks()
        ok = all(v == "ok" for v in checks.values())
        answer: dict[str, Any] = {"ok": ok, "checks": checks, "at": round(time.time(), 3)}
        if self.leadership is not None:
            answer.update(replica=self.leadership.replica,
                          role="leader" if self.leadership.leader else "standby",
                          leader=self._leader_id())
        body = json.dumps(answer) + "\n"
        return (200 if ok else 503), {"Content-Type": "application/json", "Cache-Control": "no-store"}, body.encode()

    def _leader_id(self) -> str | None:
        """Which replica leads, as the store's rows say (this one's own view if it leads)."""
        if self.leadership.leader:
            return str(self.leadership.replica)
        try:
            rows = self.store.replicas.all()
        except Exception:  # the store's trouble shows in checks.store
            return None
        lease = float(self.store.lease)
        now = time.time()
        return next((r.id for r in rows if r.leader and now - r.heartbeat < lease), None)

    def metrics(self, _headers: dict[str, str] | None = None, _body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": CONTENT_TYPE_LATEST}, generate_latest(REGISTRY)
