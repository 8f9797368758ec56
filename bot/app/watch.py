"""Watching a deployment: one sample per interval (/health, a /metrics scrape, the new log lines),
and the alert rules evaluated on the recent samples. No Slack here: incidents.py acts on the alerts.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from bot.app.logfile import LineAssembler
from bot.app.prometheus_source import selector_of
from bot.app.prometheus_text import parse_prometheus
from bot.config import Config
from bot.core.failures import default_table
from bot.core.logparse import LineParser, PromSnapshot, SpecDecodeSample, window
from bot.core.triage.knowledge import load_knowledge, normalize_method
from bot.remote.ssh import Forward, SSHError, SSHSession
from bot.store import Store

log = logging.getLogger("specops.watch")
FIRST_READ = 256 * 1024  # a watch that starts (or restarts) reads this much of the log's tail


META_REFRESH = 10  # re-read the deployment record every N watches (it changes only with a deploy)


@dataclass
class HostWatch:
    """What a watcher keeps for one host between samples (in memory; the samples are in SQLite):
    the SSH session, a port forward and an HTTP client on it, so a watch costs a few requests."""

    session: SSHSession | None = None
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


class WatchSample(TypedDict, total=False):
    """One watch of a host, as stored (JSON) in the samples table."""

    up: bool
    reachable: bool
    health: int | None
    errors: list[str]
    profile: str | None
    source: str  # "prometheus" for an instance watched through Prometheus; absent: over SSH
    note: str
    kv: float | None  # percent
    running: float | None
    waiting: float | None
    requests_total: float | None
    generation_tokens_total: float | None
    drafts_total: float
    accepted_total: float
    mean: float  # over this watch's window
    per_position: list[float]
    drafts: float
    accepted: float
    drafted: float
    generated: float
    gen_tps: float
    single_tps: float
    alerts: list[str]


@dataclass
class Alert:
    kind: str  # down | acceptance | slow | kv | errors
    title: str
    detail: str
    severity: str = "critical"


def _paths(config: Config, host: str) -> dict[str, str]:
    wd = config.host(host).workdir
    return {"log": f"{wd}/server.log", "meta": f"{wd}/server.json"}


def collect(config: Config, host: str, state: HostWatch, store: Store | None = None) -> WatchSample:
    """One sample. Never raises for a host problem: an unreachable host is a sample with up=False."""
    import httpx

    sample: WatchSample = {"up": False, "health": None, "errors": [], "reachable": False}
    paths = _paths(config, host)
    try:
        if state.session is None or not state.session.transport_alive():
            state.close()
            state.session = SSHSession(host, config.host(host)).connect()
        session = state.session
        sample["reachable"] = True
        state.meta_age += 1
        if state.meta_age >= META_REFRESH or not state.meta:
            raw = session.read_file(paths["meta"])
            state.meta = json.loads(raw) if raw else {}
            state.meta_age = 0
        profile = config.profiles.get(str(state.meta.get("profile")))
        sample["profile"] = state.meta.get("profile")
        if profile is None:
            sample["note"] = "no deployment recorded"
            return sample
        http = state.client_for(profile.port)
        try:
            sample["health"] = http.get("/health").status_code
        except httpx.HTTPError:
            sample["health"] = None
        if sample["health"] == 200:
            try:
                resp = http.get("/metrics")
                if resp.status_code == 200:
                    _metrics(resp.text, state, sample)
            except httpx.HTTPError:
                pass
        else:
            state.meta_age = META_REFRESH  # a new deployment may be on its way: read the record next time
            state.close_http()
        sample["up"] = sample["health"] == 200
        _log(session, paths["log"], state, sample, store, host)
    except SSHError as exc:
        state.close()
        sample["errors"].append(str(exc))
    except (OSError, ValueError) as exc:
        sample["errors"].append(f"{type(exc).__name__}: {exc}")
    return sample


def collect_prometheus(config: Config, name: str, state: HostWatch) -> WatchSample:
    """One sample of an instance known only through Prometheus: the counters' increase over the last
    watch interval (Prometheus keeps the history, so a restarted bot loses nothing). Never raises for a
    Prometheus problem: that is a sample with up=False and the reason."""
    from bot.app.prometheus_source import PrometheusError, PrometheusSource

    inst = config.prom_instance(name)
    assert inst is not None and config.prometheus is not None
    sample: WatchSample = {"up": False, "health": None, "errors": [], "reachable": False, "profile": inst.profile,
                           "source": "prometheus"}
    if state.prom is None:
        state.prom = PrometheusSource(config.prometheus)
    seconds = max(config.watch.interval, 15.0)
    try:
        wins = state.prom.window(selector_of(inst.selector), seconds)
    except PrometheusError as exc:
        sample["errors"].append(str(exc))
        return sample
    if not wins:
        sample["errors"].append(f"Prometheus scrapes no vLLM server matching {{{inst.selector}}}")
        return sample
    if len(wins) > 1:
        sample["errors"].append(f"{{{inst.selector}}} matches {len(wins)} instances: {', '.join(sorted(wins))}")
        return sample
    win = next(iter(wins.values()))
    sample["reachable"] = win.up is not None
    sample["up"] = bool(win.up)
    sample["health"] = 200 if win.up else None
    sample["kv"] = _pct(win.kv_usage)
    sample["running"], sample["waiting"] = win.running, win.waiting
    if win.tokens_per_s is not None:
        sample["gen_tps"] = round(win.tokens_per_s, 1)
        sample["generated"] = round(win.tokens_per_s * seconds)
    _put_window(sample, win.sample)
    return sample


def _put_window(sample: WatchSample, w: SpecDecodeSample | None) -> None:
    """A window of the spec-decode counters into the sample (nothing when nothing was drafted)."""
    if w is not None and w.num_drafts:
        sample["mean"] = round(w.mean_acceptance_length, 3)
        sample["per_position"] = [round(x, 3) for x in w.per_position]
        sample["drafts"] = w.num_drafts
        sample["accepted"] = w.accepted
        sample["drafted"] = w.drafted


def _metrics(text: str, state: HostWatch, sample: WatchSample) -> None:
    snap = parse_prometheus(text)
    sample["kv"] = _pct(snap.gauges.get("vllm:kv_cache_usage_perc", snap.gauges.get("vllm:gpu_cache_usage_perc")))
    sample["running"] = snap.gauges.get("vllm:num_requests_running")
    sample["waiting"] = snap.gauges.get("vllm:num_requests_waiting")
    sample["requests_total"] = snap.counters.get("vllm:request_success_total")
    sample["generation_tokens_total"] = snap.counters.get("vllm:generation_tokens_total")
    if snap.has_spec_decode:
        sample["drafts_total"] = snap.num_drafts
        sample["accepted_total"] = snap.num_accepted_tokens
    prev = state.last_scrape
    state.last_scrape = snap
    if prev is None:
        return
    _put_window(sample, window(prev, snap) if snap.has_spec_decode else None)
    gen_prev = prev.counters.get("vllm:generation_tokens_total")
    gen_now = snap.counters.get("vllm:generation_tokens_total")
    if gen_prev is not None and gen_now is not None and gen_now >= gen_prev:
        sample["generated"] = gen_now - gen_prev


def _pct(value: float | None) -> float | None:
    return None if value is None else round(value * 100.0, 1)


HEAD = 256  # the first bytes of a log identify it: a rotated or replaced log has other first bytes


def _start_offset(session: SSHSession, log_file: str, state: HostWatch, store: Store | None, host: str) -> int:
    """Where to read from: the cursor of the last watch (this process, or before a restart), or the tail."""
    head = session.read_from(log_file, 0, HEAD)[0].hex()
    state.log_head = head
    if state.log_offset is not None:
        return state.log_offset
    saved = store.cursor(host) if store is not None else None
    if saved is None:
        return -FIRST_READ  # never read before: the recent past
    path, saved_head, offset = saved
    if path == log_file and saved_head and head.startswith(saved_head):
        return offset  # the same file: only what is new since the last watch, restart or not
    return 0  # another file under that name (rotated, or a new deploy): all of it is new


def _log(session: SSHSession, log_file: str, state: HostWatch, sample: WatchSample, store: Store | None = None,
         host: str = "") -> None:
    offset = _start_offset(session, log_file, state, store, host)
    data, state.log_offset = session.read_from(log_file, offset, 4 << 20)
    if store is not None and state.log_head:
        store.set_cursor(host, log_file, state.log_head, state.log_offset)
    parser = LineParser()
    for line in state.assembler.feed(data):
        parser.feed(line)
    parsed = parser.result
    errors = [e.origin.text[:300] for e in parsed.events if e.kind in default_table().failing_ids]
    sample["errors"] += errors
    engine = [e for e in parsed.engine if (e.running or 0) > 0 and e.generation_tps is not None]
    if engine:
        sample["gen_tps"] = round(sum(e.generation_tps or 0.0 for e in engine) / len(engine), 1)
        single = [e for e in engine if e.running == 1]
        if single:
            sample["single_tps"] = round(sum(e.generation_tps or 0.0 for e in single) / len(single), 1)
    if parsed.samples and "mean" not in sample:
        acc = sum(s.accepted for s in parsed.samples)
        drafts = sum(s.num_drafts or 0 for s in parsed.samples)
        if drafts:
            sample["mean"] = round(1 + acc / drafts, 3)
            sample["drafts"] = drafts
            sample["accepted"] = acc
            sample["drafted"] = sum(s.drafted for s in parsed.samples)
            k = len(parsed.samples[-1].per_position)
            same_k = [s for s in parsed.samples if len(s.per_position) == k and s.num_drafts]
            n = sum(s.num_drafts or 0 for s in same_k)
            if k and n:
                sample["per_position"] = [round(sum(s.per_position[i] * (s.num_drafts or 0) for s in same_k) / n, 3)
                                          for i in range(k)]


def evaluate(config: Config, host: str, recent: list[dict[str, Any]]) -> list[Alert]:
    """The alert rules over the host's recent samples, newest last."""
    if not recent:
        return []
    rules = config.watch.rules
    last = recent[-1]
    alerts: list[Alert] = []
    profile = config.profiles.get(str(last.get("profile")))
    if last.get("note") == "no deployment recorded":
        return []
    down = recent[-rules.down_after:]
    if len(down) == rules.down_after and not any(s.get("up") for s in down):
        why = "; ".join(down[-1].get("errors") or []) or f"/health answered {down[-1].get('health')}"
        alerts.append(Alert("down", f"{host}: the server is down",
                            f"/health failed {rules.down_after} watches in a row ({why[:300]})"))
    if profile is not None and profile.method != "none":
        method = normalize_method(profile.method) or profile.method
        kb = load_knowledge()
        floor = rules.acceptance_floor.get(method, kb.method(method).break_even_mean or 1.5)
        window_ = [s for s in recent if s.get("mean") is not None][-rules.low_acceptance_samples:]
        if len(window_) == rules.low_acceptance_samples and all(s["mean"] < floor for s in window_):
            means = ", ".join(f"{s['mean']:.2f}" for s in window_)
            alerts.append(Alert("acceptance", f"{host}: acceptance collapsed ({method})",
                                f"mean acceptance length {means} — below the floor of {floor} for {method} "
                                f"in {len(window_)} samples in a row"))
        baseline = profile.baseline_tps
        measured = [s["single_tps"] for s in recent if isinstance(s.get("single_tps"), int | float)]
        measured = measured[-rules.low_acceptance_samples:]
        # like acceptance, judged over several samples: one slow interval is not an incident
        if baseline and len(measured) == rules.low_acceptance_samples and all(t < baseline for t in measured):
            shown = ", ".join(f"{t:.1f}" for t in measured)
            alerts.append(Alert("slow", f"{host}: speculation slower than the baseline",
                                f"{shown} tok/s for one request in {len(measured)} samples, baseline "
                                f"{baseline:.1f} tok/s", "warning"))
    kv = last.get("kv")
    if isinstance(kv, int | float) and kv >= rules.kv_saturated and (last.get("waiting") or 0) > 0:
        alerts.append(Alert("kv", f"{host}: KV cache saturated",
                            f"KV cache usage {kv:.1f}% with {last.get('waiting'):.0f} request(s) waiting", "warning"))
    if last.get("errors") and last.get("reachable"):
        alerts.append(Alert("errors", f"{host}: new error lines in the log", "\n".join(last["errors"][-5:])))
    return alerts


class WatchRuntime(Protocol):
    """What one watch needs (bot.app.services.Services provides it)."""

    config: Config
    store: Store
    manager: Any

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
    rules = rt.config.watch.rules
    recent = [d for _, _, d in rt.store.samples(host, limit=max(rules.down_after, rules.low_acceptance_samples,
                                                                  rules.resolve_after) + 1)]
    alerts = evaluate(rt.config, host, [*recent, dict(sample)])
    sample["alerts"] = [a.kind for a in alerts]
    rt.store.add_sample(host, bool(sample.get("up")), dict(sample))
    if alerts:
        rt.manager.on_alerts(host, host, alerts)
    else:
        rt.manager.on_healthy(host, health_streak(rt.config, [*recent, dict(sample)]))
    return sample


def shows_health(config: Config, d: dict[str, Any]) -> bool | None:
    """True: this sample shows the deployment healthy; False: it shows a problem; None: it shows nothing
    (an idle server: no traffic, so no acceptance measured — it can neither resolve nor break a streak)."""
    if d.get("alerts") or not d.get("up"):
        return False
    profile = config.profiles.get(str(d.get("profile")))
    if profile is not None and profile.method != "none" and d.get("mean") is None:
        return None
    return True


def health_streak(config: Config, samples: list[dict[str, Any]]) -> int:
    """Samples that showed health, newest back to the last one that showed a problem (idle ones skipped)."""
    streak = 0
    for d in reversed(samples):
        shown = shows_health(config, d)
        if shown is False:
            break
        if shown:
            streak += 1
    return streak


def summarize_day(samples: list[tuple[float, bool, dict[str, Any]]]) -> dict[str, Any]:
    """24 hours of samples -> the numbers of a health report."""
    if not samples:
        return {"samples": 0}
    ups = sum(1 for _, up, _ in samples if up)
    acc = sum(float(d.get("accepted") or 0) for _, _, d in samples)
    drafts = sum(float(d.get("drafts") or 0) for _, _, d in samples)
    drafted = sum(float(d.get("drafted") or 0) for _, _, d in samples)
    # accepted tokens by position, summed over the windows that measured them (rate x drafts)
    by_pos: list[float] = []
    pos_drafts = 0.0
    for _, _, d in samples:
        rates, n = d.get("per_position"), d.get("drafts")
        if not isinstance(rates, list) or not rates or not isinstance(n, int | float) or n <= 0:
            continue
        if len(rates) != len(by_pos):
            if by_pos:  # k changed within the period (a redeploy): keep the latest setting's windows
                by_pos, pos_drafts = [], 0.0
            by_pos = [0.0] * len(rates)
        by_pos = [a + float(r) * float(n) for a, r in zip(by_pos, rates, strict=True)]
        pos_drafts += float(n)
    requests = _counter_growth([d.get("requests_total") for _, _, d in samples])
    tps = [float(d["gen_tps"]) for _, _, d in samples if isinstance(d.get("gen_tps"), int | float)]
    single = [float(d["single_tps"]) for _, _, d in samples if isinstance(d.get("single_tps"), int | float)]
    return {
        "samples": len(samples), "up_fraction": ups / len(samples), "up_now": samples[-1][1],
        "mean_acceptance": (1 + acc / drafts) if drafts else None, "drafts": drafts, "accepted": acc,
        "drafted": drafted, "per_position": [a / pos_drafts for a in by_pos] if pos_drafts else [],
        "requests": requests, "gen_tps": (sum(tps) / len(tps)) if tps else None,
        "single_tps": (sum(single) / len(single)) if single else None,
        "first": samples[0][0], "last": samples[-1][0],
    }


def _counter_growth(values: list[Any]) -> float | None:
    """How much a counter grew, across restarts (a drop means the server restarted at zero)."""
    nums = [float(v) for v in values if isinstance(v, int | float) and not math.isnan(float(v))]
    if len(nums) < 2:
        return None
    total = 0.0
    for a, b in itertools.pairwise(nums):
        total += (b - a) if b >= a else b
    return total


def now() -> float:
    return time.time()
