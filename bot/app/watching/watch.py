"""Watching a deployment: one sample per interval (/health, a /metrics scrape, the new log lines), stored,
and the core's alert rules (`bot.core.alerts`) over the recent samples. No Slack here: incidents.py acts on
the alerts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from bot.app.diagnosis.logfile import LineAssembler
from bot.app.prometheus.promql import selector_of
from bot.app.prometheus.text import parse_prometheus
from bot.config import Config, Profile
from bot.core import alerts as core_alerts
from bot.core.alerts import NO_DEPLOYMENT, PROMETHEUS, Alert, Deployed, WatchRules, WatchSample
from bot.core.failures import default_table
from bot.core.logparse import LineParser
from bot.core.parsed_log import ParsedLog
from bot.core.prom_samples import PromSnapshot, window
from bot.core.triage.evidence import summarize, summarize_engine
from bot.core.vllm_metrics import (
    GENERATION_TOKENS,
    KV_CACHE_USAGE,
    REQUESTS_FINISHED,
    REQUESTS_RUNNING,
    REQUESTS_WAITING,
    kv_percent,
    value_of,
)
from bot.engine.hosts import Forward, HostError, HostPool, HostSession, RemoteLayout
from bot.store.facade import Store

# the rules and the sample moved to the core; these names stay importable from here for their callers
__all__ = [
    "HostWatch", "WatchRuntime", "collect", "collect_prometheus", "evaluate", "health_streak",
    "summarize_day", "watch_once", "watch_rules"
]

log = logging.getLogger("specops.watch")
FIRST_READ = 256 * 1024  # a watch that starts (or restarts) reads this much of the log's tail
META_REFRESH = 10  # re-read the deployment record every N watches (it changes only with a deploy)
HEAD = 256  # the first bytes of a log identify it: a rotated or replaced log has other first bytes


@dataclass
class HostWatch:
    """What a watcher keeps for one host between samples (in memory; the samples are in SQLite).

    Unlike a use case's session (one per operation), the SSH session, its port forward and the HTTP client
    on it stay open from one watch to the next: a watch every minute then costs a few requests, not a key
    exchange, a forward and a TCP handshake each time. `pool` is where a lost session is opened again
    (the object graph's, once it hands it in; else one over the config)."""

    pool: HostPool | None = None
    session: HostSession | None = None
    log_offset: int | None = None
    log_head: str = ""
    last_scrape: PromSnapshot | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    meta_age: int = META_REFRESH
    assembler: LineAssembler = field(default_factory=LineAssembler)
    forward: Forward | None = None
    forward_port: int | None = None
    http: Any = None
    prom: Any = None  # a PrometheusSource, for an instance watched through Prometheus

    def connect(self, config: Config, host: str) -> HostSession:
        if self.session is None or not self.session.transport_alive():
            self.close()
            if self.pool is None:
                self.pool = HostPool(config)
            self.session = self.pool.session(host).connect()
        return self.session

    def client_for(self, port: int) -> Any:
        import httpx

        if self.forward is None or self.forward_port != port or self.http is None:
            self.close_http()
            assert self.session is not None
            self.forward = self.session.forward(port)
            self.forward_port = port
            self.http = httpx.Client(base_url=self.forward.url, timeout=5.0)
        return self.http

    def close_http(self) -> None:
        if self.http is not None:
            self.http.close()
            self.http = None
        if self.forward is not None:
            self.forward.close()
            self.forward = None

    def close(self) -> None:
        self.close_http()
        if self.prom is not None:
            self.prom.close()
            self.prom = None
        if self.session is not None:
            self.session.close()
            self.session = None


# --- one sample over SSH ----------------------------------------------------------------------------

def collect(config: Config, host: str, state: HostWatch, store: Store | None = None) -> WatchSample:
    """One sample. Never raises for a host problem: an unreachable host is a sample with up=False."""
    layout = RemoteLayout(config.host(host).workdir)
    sample = WatchSample()
    try:
        session = state.connect(config, host)
        sample = replace(sample, reachable=True)
        profile = _deployed(config, host, session, layout, state)
        sample = replace(sample, profile=_name(state.meta.get("profile")))
        if profile is None:
            return replace(sample, note=NO_DEPLOYMENT)
        sample = _probe(state, profile, sample)
        sample = _read_log(session, layout.log_file, state, sample, store, host)
    except HostError as exc:
        state.close()
        sample = sample.with_errors([str(exc)])
    except (OSError, ValueError) as exc:
        sample = sample.with_errors([f"{type(exc).__name__}: {exc}"])
    return sample


def _deployed(config: Config, host: str, session: HostSession, layout: RemoteLayout,
              state: HostWatch) -> Profile | None:
    """The profile the deployment record names, as this host serves it (read again every META_REFRESH watches)."""
    state.meta_age += 1
    if state.meta_age >= META_REFRESH or not state.meta:
        raw = session.read_file(layout.meta_file)
        state.meta = json.loads(raw) if raw else {}
        state.meta_age = 0
    return config.served_profile(state.meta.get("profile"), host)


def _name(value: object) -> str | None:
    return None if value is None else str(value)


def _probe(state: HostWatch, profile: Profile, sample: WatchSample) -> WatchSample:
    """/health, and /metrics when the server is up."""
    import httpx

    http = state.client_for(profile.port)
    try:
        health: int | None = http.get("/health").status_code
    except httpx.HTTPError:
        health = None
    sample = replace(sample, health=health, up=health == 200)
    if health != 200:
        state.meta_age = META_REFRESH  # a new deployment may be on its way: read the record next time
        state.close_http()
        return sample
    try:
        resp = http.get("/metrics")
    except httpx.HTTPError:
        return sample
    return _scraped(resp.text, state, sample) if resp.status_code == 200 else sample


def _scraped(text: str, state: HostWatch, sample: WatchSample) -> WatchSample:
    """A /metrics scrape: its gauges and totals, and the window since the previous scrape."""
    snap = parse_prometheus(text)
    prev, state.last_scrape = state.last_scrape, snap
    sample = replace(
        sample, metrics_read=True, kv=kv_percent(value_of(snap.gauges, KV_CACHE_USAGE)),
        running=value_of(snap.gauges, REQUESTS_RUNNING), waiting=value_of(snap.gauges, REQUESTS_WAITING),
        requests_total=value_of(snap.counters, REQUESTS_FINISHED),
        generation_tokens_total=value_of(snap.counters, GENERATION_TOKENS))
    if snap.has_spec_decode:
        sample = replace(sample, drafts_total=snap.num_drafts, accepted_total=snap.num_accepted_tokens)
    if prev is None:
        return sample
    gen_prev, gen_now = value_of(prev.counters, GENERATION_TOKENS), value_of(snap.counters, GENERATION_TOKENS)
    if gen_prev is not None and gen_now is not None and gen_now >= gen_prev:
        sample = replace(sample, generated=gen_now - gen_prev)
    return sample.with_interval(window(prev, snap))


def _start_offset(session: HostSession, log_file: str, state: HostWatch, store: Store | None, host: str) -> int:
    """Where to read from: the cursor of the last watch (this process, or before a restart), or the tail."""
    head = session.read_from(log_file, 0, HEAD)[0].hex()
    state.log_head = head
    if state.log_offset is not None:
        return state.log_offset
    saved = store.cursors.get(host) if store is not None else None
    if saved is None:
        return -FIRST_READ  # never read before: the recent past
    path, saved_head, offset = saved
    if path == log_file and saved_head and head.startswith(saved_head):
        return offset  # the same file: only what is new since the last watch, restart or not
    return 0  # another file under that name (rotated, or a new deploy): all of it is new


def _read_log(session: HostSession, log_file: str, state: HostWatch, sample: WatchSample, store: Store | None,
              host: str) -> WatchSample:
    """The log's new lines: failing lines as errors, throughput and acceptance summed as a diagnosis sums them."""
    offset = _start_offset(session, log_file, state, store, host)
    data, state.log_offset = session.read_from(log_file, offset, 4 << 20)
    if store is not None and state.log_head:
        store.cursors.put(host, log_file, state.log_head, state.log_offset)
    parsed = _parsed(state.assembler.feed(data))
    return (sample.with_errors(_failing_lines(parsed)).with_engine(summarize_engine(parsed.engine))
            .with_log_window(summarize(parsed.samples)))


def _parsed(lines: Iterable[bytes]) -> ParsedLog:
    parser = LineParser()
    for line in lines:
        parser.feed(line)
    return parser.result


def _failing_lines(parsed: ParsedLog) -> list[str]:
    failing = default_table().failing_ids
    return [e.origin.text[:300] for e in parsed.events if e.kind in failing]


# --- one sample through Prometheus --------------------------------------------------------------------

def collect_prometheus(config: Config, name: str, state: HostWatch) -> WatchSample:
    """One sample of an instance known only through Prometheus: the counters' increase over the last
    watch interval (Prometheus keeps the history, so a restarted bot loses nothing). Never raises for a
    Prometheus problem: that is a sample with up=False and the reason."""
    from bot.app.prometheus.source import PrometheusError, PrometheusSource

    inst = config.prom_instance(name)
    assert inst is not None and config.prometheus is not None
    sample = WatchSample(profile=inst.profile, source=PROMETHEUS)
    if state.prom is None:
        state.prom = PrometheusSource(config.prometheus)
    seconds = max(config.watch.interval, 15.0)
    try:
        wins = state.prom.window(selector_of(inst.selector), seconds)
    except PrometheusError as exc:
        return sample.with_errors([str(exc)])
    if len(wins) != 1:
        return sample.with_errors([
            f"{{{inst.selector}}} matches {len(wins)} instances: {', '.join(sorted(wins))}" if wins
            else f"Prometheus scrapes no vLLM server matching {{{inst.selector}}}"])
    win = next(iter(wins.values()))
    sample = replace(sample, reachable=win.up is not None, up=bool(win.up), health=200 if win.up else None,
                     metrics_read=True, kv=win.kv_percent, running=win.running, waiting=win.waiting)
    if win.tokens_per_s is not None:
        sample = replace(sample, gen_tps=round(win.tokens_per_s, 1), generated=round(win.tokens_per_s * seconds))
    return sample.with_interval(win.sample)


# --- one watch ---------------------------------------------------------------------------------------

class WatchRuntime(Protocol):
    """What one watch needs (bot.app.services.Services provides it; read-only, so a property serves)."""

    @property
    def config(self) -> Config: ...

    @property
    def store(self) -> Store: ...

    @property
    def manager(self) -> Any: ...

    def watch_state(self, host: str) -> HostWatch: ...


def watch_once(rt: WatchRuntime, host: str) -> WatchSample | None:
    """One watch of `host`: sample it, store the sample, raise or calm its incident."""
    if host not in rt.config.hosts and rt.config.prom_instance(host) is None:
        log.warning("watch for unknown host %s skipped", host)
        return None
    if host in rt.config.hosts:
        sample = collect(rt.config, host, rt.watch_state(host), rt.store)
    else:
        sample = collect_prometheus(rt.config, host, rt.watch_state(host))
    limits, rules = rt.config.watch.rules, watch_rules(rt.config)
    keep = max(limits.down_after, limits.low_acceptance_samples, limits.resolve_after) + 1
    recent = [WatchSample.from_dict(d) for _, _, d in rt.store.samples.for_host(host, limit=keep)]
    alerts = core_alerts.evaluate(rules, host, [*recent, sample])
    sample = replace(sample, alerts=tuple(a.kind for a in alerts))
    rt.store.samples.add(host, sample.up, sample.as_dict())
    if alerts:
        rt.manager.on_alerts(host, host, alerts)
    else:
        rt.manager.on_healthy(host, core_alerts.health_streak(rules, [*recent, sample]))
    return sample


def watch_rules(config: Config) -> WatchRules:
    """What the core's rules read of the config: the thresholds and each profile's method and baseline."""
    return WatchRules(config.watch.rules,
                      # a reference measured with the profile's own method is its own number, not another
                      # setting's (as facts.profile_flags gives it to a diagnosis)
                      profiles={name: Deployed(p.method, None if p.baseline_method == p.method else p.baseline_tps)
                                for name, p in config.profiles.items()})


# --- for callers that hold a config and the store's rows (dicts) ----------------------------------------

def _typed(sample: WatchSample | Mapping[str, Any]) -> WatchSample:
    return sample if isinstance(sample, WatchSample) else WatchSample.from_dict(sample)


def evaluate(config: Config, host: str, recent: Sequence[WatchSample | Mapping[str, Any]]) -> list[Alert]:
    return core_alerts.evaluate(watch_rules(config), host, [_typed(s) for s in recent])


def health_streak(config: Config, samples: Sequence[WatchSample | Mapping[str, Any]]) -> int:
    return core_alerts.health_streak(watch_rules(config), [_typed(s) for s in samples])


def summarize_day(samples: Sequence[tuple[float, bool, Mapping[str, Any]]]) -> dict[str, Any]:
    """The store's rows (at, up, sample) of a period -> the numbers of a health report, as a dict."""
    rows = [(at, WatchSample.from_dict({**d, "up": up})) for at, up, d in samples]
    return core_alerts.summarize_day(rows).as_dict()
