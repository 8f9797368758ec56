"""Diagnosis from Prometheus: one instance (`diagnose --prometheus`) or the whole fleet (`fleet`).

Each instance's window goes through the same triage as a log. What Prometheus cannot say — the
method, the vLLM version, the drafter — comes from the config when the instance is one of its hosts:
an instance `ADDRESS:PORT` is the host at that address whose deployment (the one recorded, else the
only profile on that port) serves on that port. Otherwise the verdict rests on the counters alone,
and the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.app.diagnose import diagnose_parsed
from bot.app.prometheus_source import InstanceWindow, PrometheusSource, selector_of, shown_window
from bot.config import Config, PrometheusSettings
from bot.core.logparse import ParsedLog
from bot.core.report import Report
from bot.core.triage.context import Flags
from bot.errors import InputError

ORDER = {"failing": 0, "degraded": 1, "unknown": 2, "healthy": 3}


@dataclass
class Placed:
    host: str | None = None
    profile: str | None = None


def place(config: Config | None, instance: str, state_reader: Any = None) -> Placed:
    """The configured host and profile behind `ADDRESS:PORT`, if any."""
    if config is None or ":" not in instance:
        return Placed()
    address, _, port_text = instance.rpartition(":")
    address = address.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        return Placed()
    on_port = [name for name, p in config.profiles.items() if p.port == port]
    for host_name, host in config.hosts.items():
        if host.address != address:
            continue
        recorded = state_reader(host_name) if state_reader else None
        if recorded in on_port:
            return Placed(host_name, recorded)
        if len(on_port) == 1:
            return Placed(host_name, on_port[0])
        return Placed(host_name, None)
    return Placed()


def flags_for(config: Config | None, placed: Placed, labels: dict[str, str], win: InstanceWindow) -> Flags:
    profile = config.profiles.get(placed.profile or "") if config and placed.profile else None
    model = labels.get("model_name")
    if profile is None:
        return Flags(target_model=model, host=placed.host, server_alive=win.up, health_ok=win.up,
                     origin="Prometheus")
    return Flags(vllm_version=profile.vllm.version, method=None if profile.method == "none" else profile.method,
                 target_model=profile.served_model_name or profile.model, drafter=profile.drafter,
                 drafter_config=profile.drafter_config, num_speculative_tokens=profile.num_speculative_tokens,
                 baseline_tps=profile.baseline_tps, host=placed.host, server_alive=win.up, health_ok=win.up,
                 origin="the profile")


def _recorded(config: Config | None) -> Any:
    if config is None:
        return None
    from bot.app.records import latest_profile

    return lambda host: latest_profile(config.settings, host)


def judge(config: Config | None, win: InstanceWindow, url: str, seconds: float) -> tuple[Report, Placed]:
    placed = place(config, win.instance, _recorded(config))
    flags = flags_for(config, placed, win.labels, win)
    notes = [f"from Prometheus ({url}): instance {win.instance}, counters' increase over the last "
             f"{shown_window(seconds)}"]
    if placed.profile:
        notes.append(f"method, version and drafter from the profile {placed.profile} (host {placed.host})")
    else:
        notes.append("no configured host serves this instance: judged on the counters alone (method and "
                     "version unknown)")
    if win.up is False:
        notes.append("Prometheus cannot scrape it now (up == 0)")
    notes += win.notes
    report = diagnose_parsed(ParsedLog(), flags, win.sample, notes=notes,
                             source=f"Prometheus {url} · {win.instance} · last {shown_window(seconds)}")
    return report, placed


def settings_for(config: Config | None, url: str | None) -> PrometheusSettings:
    if url:
        base = config.prometheus if config and config.prometheus else None
        data = base.model_dump() if base else {}
        data["url"] = url
        try:
            return PrometheusSettings.model_validate(data)
        except ValueError:
            raise InputError(f"--prometheus {url!r}: give the server's URL, like http://prometheus:9090") from None
    if config is not None and config.prometheus is not None:
        return config.prometheus
    raise InputError("which Prometheus? give --prometheus URL, or `prometheus: {url: …}` in the config")


def diagnose_instance(config: Config | None, settings: PrometheusSettings, instance: str,
                      seconds: float) -> Report:
    selector = selector_of(instance)
    if not selector:
        raise InputError("--instance: which instance? e.g. --instance 10.0.0.5:8000 or 'job=\"vllm\"'")
    with PrometheusSource(settings) as source:
        wins = source.window(selector, seconds)
    if not wins:
        raise InputError(f"Prometheus ({settings.url}) scrapes no vLLM server matching {{{selector}}} "
                         "(no vllm:num_requests_running series)")
    if len(wins) > 1:
        raise InputError(f"{{{selector}}} matches {len(wins)} instances ({', '.join(sorted(wins))}): "
                         "narrow it, or run `specops fleet` for all of them")
    report, _ = judge(config, next(iter(wins.values())), settings.url, seconds)
    return report


@dataclass
class FleetLine:
    instance: str
    labels: dict[str, str]
    report: Report
    window: InstanceWindow
    host: str | None = None
    profile: str | None = None

    def as_json(self) -> dict[str, Any]:
        m = self.report.metrics
        top = self.report.findings[0] if self.report.findings else None
        return {
            "instance": self.instance, "labels": self.labels, "verdict": self.report.verdict,
            "host": self.host, "profile": self.profile,
            "metrics": {
                "mean_acceptance_length": m.mean_acceptance_length, "per_position": m.per_position,
                "num_drafts": round(self.window.sample.num_drafts or 0) if self.window.sample else 0,
                "tokens_per_s": None if self.window.tokens_per_s is None else round(self.window.tokens_per_s, 2),
                "running": self.window.running, "waiting": self.window.waiting,
                "kv_cache_usage": None if self.window.kv_usage is None else round(self.window.kv_usage, 4),
                "up": self.window.up,
            },
            "top_finding": None if top is None else {
                "id": top.id, "title": top.title, "severity": top.severity, "confidence": top.confidence,
                "upstream": [u.url for u in top.upstream]},
            "headline": self.report.headline,
        }


@dataclass
class FleetReport:
    url: str
    selector: str
    seconds: float
    lines: list[FleetLine] = field(default_factory=list)

    def totals(self) -> dict[str, Any]:
        by: dict[str, int] = {}
        for line in self.lines:
            by[line.report.verdict] = by.get(line.report.verdict, 0) + 1
        drafts = sum(line.window.sample.num_drafts or 0 for line in self.lines if line.window.sample)
        accepted = sum(line.window.sample.accepted for line in self.lines if line.window.sample)
        tps = [line.window.tokens_per_s for line in self.lines if line.window.tokens_per_s is not None]
        return {"instances": len(self.lines), "by_verdict": by,
                "tokens_per_s": round(sum(tps), 2) if tps else None,
                "mean_acceptance_length": round(1 + accepted / drafts, 3) if drafts else None,
                "drafts": round(drafts)}

    def as_json(self) -> dict[str, Any]:
        return {"prometheus": self.url, "selector": self.selector, "window": shown_window(self.seconds),
                "instances": [line.as_json() for line in self.lines], "totals": self.totals()}


def fleet_report_for_chat(report: FleetReport) -> Report:
    """The fleet as a Report, for the chat front ends: the worst verdict, one note per instance, and the top
    finding of each instance that is not healthy (titled with its instance)."""
    from bot.core.report import MetricsOut

    verdicts = [line.report.verdict for line in report.lines]
    worst = min(verdicts, key=lambda v: ORDER.get(v, 9)) if verdicts else "unknown"
    totals = report.totals()
    findings = []
    for line in report.lines:
        if line.report.verdict in ("failing", "degraded") and line.report.findings:
            top = line.report.findings[0].model_copy()
            top.title = f"{line.instance}: {top.title}"
            findings.append(top)
    counts = ", ".join(f"{n} {v}" for v, n in sorted(totals["by_verdict"].items(), key=lambda kv: ORDER.get(kv[0], 9)))
    notes = [f"{line.instance} — {line.report.verdict} · mean acceptance "
             f"{line.report.metrics.mean_acceptance_length if line.report.metrics.mean_acceptance_length else '—'}"
             + (f" · {line.window.tokens_per_s:.1f} tok/s" if line.window.tokens_per_s is not None else "")
             + (f" · {line.host}/{line.profile}" if line.profile else "") for line in report.lines]
    return Report(verdict=worst, headline=f"Fleet: {counts or 'no vLLM instance'} ({totals['instances']} instances, "
                  f"last {shown_window(report.seconds)})", metrics=MetricsOut(
                      mean_acceptance_length=totals["mean_acceptance_length"]), findings=findings, notes=notes,
                  source=f"Prometheus {report.url}" + (f" · {{{report.selector}}}" if report.selector else ""),
                  context={"fleet": report.as_json()})


def fleet(config: Config | None, settings: PrometheusSettings, selector: str, seconds: float) -> FleetReport:
    sel = selector_of(selector)
    with PrometheusSource(settings) as source:
        wins = source.window(sel, seconds)
    out = FleetReport(settings.url, sel, seconds)
    for win in wins.values():
        report, placed = judge(config, win, settings.url, seconds)
        out.lines.append(FleetLine(win.instance, win.labels, report, win, placed.host, placed.profile))
    out.lines.sort(key=lambda line: (ORDER.get(line.report.verdict, 9),
                                     line.report.metrics.mean_acceptance_length or 99.0, line.instance))
    return out
