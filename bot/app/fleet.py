"""Diagnosis from Prometheus: one instance (`diagnose --prometheus`) or the whole fleet (`fleet`).

Each instance's window goes through the same triage as a log. What Prometheus cannot say — the
method, the vLLM version, the drafter — comes from the config when the instance is one of its hosts:
an instance `ADDRESS:PORT` is the host at that address whose deployment (the one recorded, else the
only profile on that port) serves on that port. Otherwise the verdict rests on the counters alone,
and the report says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.app.diagnose import diagnose_parsed
from bot.app.facts import profile_flags
from bot.app.prometheus_source import InstanceWindow, PrometheusSource, selector_of, shown_window
from bot.app.records import latest_profile
from bot.config import Config, PrometheusSettings
from bot.core.logparse import ParsedLog
from bot.core.report import Report
from bot.core.results.fleet import VERDICT_ORDER, FleetLine, FleetMetrics, FleetReport, FleetTotals, FleetWindow
from bot.core.triage.context import Flags
from bot.errors import InputError
from bot.store import Store

__all__ = ["ORDER", "FleetLine", "FleetReport", "Placed", "diagnose_instance", "flags_for", "fleet",
           "judge", "place", "settings_for", "window_of"]

ORDER = VERDICT_ORDER
RecordedProfile = Callable[[str], str | None]  # host -> the profile specops last deployed there


@dataclass
class Placed:
    host: str | None = None
    profile: str | None = None


def place(config: Config | None, instance: str, state_reader: RecordedProfile | None = None) -> Placed:
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
    known = config.hosts.get(placed.host or "") if config else None
    return profile_flags(profile, host=placed.host, env=known.vllm_env if known else None, server_alive=win.up,
                         health_ok=win.up)


def _recorded(config: Config | None, store: Store | None) -> RecordedProfile | None:
    """What the records say each host runs; `store` None: no records yet (reading the fleet creates none)."""
    if config is None or store is None:
        return None
    return lambda host: latest_profile(store, host)


def judge(config: Config | None, win: InstanceWindow, url: str, seconds: float,
          recorded: RecordedProfile | None = None) -> tuple[Report, Placed]:
    """The instance's window through the triage, on the profile the config places it on (`recorded`: what the
    records say is deployed on a host, when two profiles share the port)."""
    placed = place(config, win.instance, recorded)
    flags = flags_for(config, placed, win.labels, win)
    span = window_of(win, seconds)
    said = span.describe()
    notes = [f"from Prometheus ({url}): instance {win.instance}, counters' increase over the last "
             f"{shown_window(seconds)}" if said is None else
             f"from Prometheus ({url}): instance {win.instance}, last {shown_window(seconds)} asked; {said}"]
    if placed.profile:
        notes.append(f"method, version and drafter from the profile {placed.profile} (host {placed.host})")
    else:
        notes.append("no configured host serves this instance: judged on the counters alone (method and "
                     "version unknown)")
    if win.up is False:
        notes.append("Prometheus cannot scrape it now (up == 0)")
    notes += win.notes
    judged = f"last {shown_window(seconds)}"
    if span.mixed:
        judged += f" ({span.restarts} restart{'s' if span.restarts != 1 else ''} in it; {span.judged})"
    report = diagnose_parsed(ParsedLog(), flags, win.sample, notes=notes,
                             source=f"Prometheus {url} · {win.instance} · {judged}")
    return report, placed


def window_of(win: InstanceWindow, seconds: float) -> FleetWindow:
    """The part of the asked window the instance is judged on (the source clamps it to the current server)."""
    span = win.span
    if span is None:
        return FleetWindow(seconds, 0, "window")
    return FleetWindow(span.seconds, span.restarts,
                       "too short to judge" if span.too_short else "since the current server started")


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


def diagnose_instance(config: Config | None, settings: PrometheusSettings, instance: str, seconds: float, *,
                      store: Store | None = None) -> Report:
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
    report, _ = judge(config, next(iter(wins.values())), settings.url, seconds, _recorded(config, store))
    return report


def _metrics(report: Report, win: InstanceWindow) -> FleetMetrics:
    m = report.metrics
    return FleetMetrics(
        mean_acceptance_length=m.mean_acceptance_length, per_position=tuple(m.per_position),
        num_drafts=round(win.sample.num_drafts or 0) if win.sample else 0,
        tokens_per_s=None if win.tokens_per_s is None else round(win.tokens_per_s, 2),
        running=win.running, waiting=win.waiting,
        kv_cache_usage=None if win.kv_usage is None else round(win.kv_usage, 4), up=win.up)


def _totals(lines: Sequence[FleetLine], wins: Sequence[InstanceWindow]) -> FleetTotals:
    """Summed over the unrounded windows: the fleet's numbers are not sums of the shown ones."""
    by: dict[str, int] = {}
    for line in lines:
        by[line.verdict] = by.get(line.verdict, 0) + 1
    drafts = sum(w.sample.num_drafts or 0 for w in wins if w.sample)
    accepted = sum(w.sample.accepted for w in wins if w.sample)
    tps = [w.tokens_per_s for w in wins if w.tokens_per_s is not None]
    return FleetTotals(instances=len(lines), by_verdict=by, tokens_per_s=round(sum(tps), 2) if tps else None,
                       mean_acceptance_length=round(1 + accepted / drafts, 3) if drafts else None,
                       drafts=round(drafts))


def fleet(config: Config | None, settings: PrometheusSettings, selector: str, seconds: float, *,
          store: Store | None = None) -> FleetReport:
    """Every instance `selector` matches, worst first. `store`: the object graph's, whose records place an
    instance on the profile deployed there."""
    sel = selector_of(selector)
    with PrometheusSource(settings) as source:
        wins = list(source.window(sel, seconds).values())
    recorded = _recorded(config, store)
    lines = []
    for win in wins:
        report, placed = judge(config, win, settings.url, seconds, recorded)
        lines.append(FleetLine(win.instance, win.labels, report, _metrics(report, win), placed.host, placed.profile,
                               window_of(win, seconds)))
    lines.sort(key=lambda line: (ORDER.get(line.verdict, 9), line.metrics.mean_acceptance_length or 99.0,
                                 line.instance))
    return FleetReport(settings.url, sel, seconds, shown_window(seconds), tuple(lines), _totals(lines, wins))
