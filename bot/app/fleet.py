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

from bot.app.diagnosis.facts import profile_flags
from bot.app.prometheus.promql import selector_of
from bot.app.prometheus.source import InstanceWindow, PrometheusSource, shown_window
from bot.app.watching.records import latest_profile
from bot.config import Config, PrometheusSettings
from bot.core.parsed_log import ParsedLog
from bot.core.report import Report, build_report
from bot.core.results.fleet import (
    VERDICT_ORDER,
    FleetLine,
    FleetMetrics,
    FleetReport,
    FleetTotals,
    FleetWindow,
    Judged,
    Omitted,
    TopFinding,
)
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.differential import Diagnosis
from bot.core.triage.evidence import Readings
from bot.core.triage.knowledge import default_knowledge
from bot.errors import InputError
from bot.store.facade import Store

__all__ = [
    "ORDER", "Placed", "diagnose_instance", "flags_for", "fleet", "judge", "place", "readings_of", "settings_for",
    "window_of"
]

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
                         health_ok=win.up, floors=config.watch.rules.first_position_floor if config else None)


def _recorded(config: Config | None, store: Store | None) -> RecordedProfile | None:
    """What the records say each host runs; `store` None: no records yet (reading the fleet creates none)."""
    if config is None or store is None:
        return None
    return lambda host: latest_profile(store, host)


def readings_of(config: Config | None, win: InstanceWindow, url: str, seconds: float,
                recorded: RecordedProfile | None = None) -> tuple[Readings, Placed]:
    """What the triage reads of the instance's window, on the profile the config places it on (`recorded`: what
    the records say is deployed on a host, when two profiles share the port)."""
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
    return Readings(parsed=ParsedLog(), flags=flags, prom=win.sample, notes=tuple(notes),
                    source=f"Prometheus {url} · {win.instance} · {judged}", metrics_from="prometheus"), placed


def judge(config: Config | None, win: InstanceWindow, url: str, seconds: float,
          recorded: RecordedProfile | None = None) -> tuple[Report, Placed]:
    """The instance's window through the triage, as a whole Report (`diagnose --prometheus`)."""
    readings, placed = readings_of(config, win, url, seconds, recorded)
    return build_report(diagnose(readings)), placed


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


@dataclass(frozen=True)
class _Seen:
    """One instance judged: what its line shows, kept small (a fleet holds 10,000 of these, not Reports)."""

    judged: Judged
    metrics: FleetMetrics
    placed: Placed
    win: InstanceWindow

    def key(self) -> tuple[int, float, str]:
        """Worst first; within a verdict the lowest acceptance first, then by name."""
        return (ORDER.get(self.judged.verdict, 9), self.metrics.mean_acceptance_length or 99.0, self.win.instance)


def _summary(dx: Diagnosis, win: InstanceWindow) -> tuple[Judged, FleetMetrics]:
    """The diagnosis as the fleet keeps it: what its line shows, read from the Report (its rounding, its headline)."""
    report = build_report(dx)
    m = report.metrics
    top = TopFinding.of(dx.findings[0]) if dx.findings else None
    judged = Judged(report.verdict, report.headline, top, dx.notes)
    metrics = FleetMetrics(
        mean_acceptance_length=m.mean_acceptance_length, per_position=tuple(m.per_position),
        num_drafts=round(win.sample.num_drafts or 0) if win.sample else 0,
        tokens_per_s=None if win.tokens_per_s is None else round(win.tokens_per_s, 2),
        running=win.running, waiting=win.waiting,
        kv_cache_usage=None if win.kv_usage is None else round(win.kv_usage, 4), up=win.up)
    return judged, metrics


def _totals(seen: Sequence[_Seen]) -> FleetTotals:
    """Summed over the unrounded windows: the fleet's numbers are not sums of the shown ones."""
    by: dict[str, int] = {}
    for one in seen:
        by[one.judged.verdict] = by.get(one.judged.verdict, 0) + 1
    wins = [one.win for one in seen]
    drafts = sum(w.sample.num_drafts or 0 for w in wins if w.sample)
    accepted = sum(w.sample.accepted for w in wins if w.sample)
    tps = [w.tokens_per_s for w in wins if w.tokens_per_s is not None]
    return FleetTotals(instances=len(seen), by_verdict=by, tokens_per_s=round(sum(tps), 2) if tps else None,
                       mean_acceptance_length=round(1 + accepted / drafts, 3) if drafts else None,
                       drafts=round(drafts))


def _listed(seen: list[_Seen], limit: int | None, only_problems: bool) -> tuple[list[_Seen], Omitted]:
    """The instances the report lists (worst first: `seen` is sorted) and the rest, counted by verdict."""
    shown = [one for one in seen if one.judged.verdict != "healthy"] if only_problems else seen
    if limit is not None:
        shown = shown[:limit]
    listed = {id(one) for one in shown}
    by: dict[str, int] = {}
    for one in seen:
        if id(one) not in listed:
            by[one.judged.verdict] = by.get(one.judged.verdict, 0) + 1
    return shown, Omitted(by)


def fleet(config: Config | None, settings: PrometheusSettings, selector: str, seconds: float, *,
          store: Store | None = None, limit: int | None = None, only_problems: bool = False) -> FleetReport:
    """Every instance `selector` matches, worst first. `store`: the object graph's, whose records place an
    instance on the profile deployed there. `limit`: list at most this many; `only_problems`: list none that is
    healthy — every instance is judged and counted either way (the totals, "… and N more (healthy: M)").

    Each instance goes through the core's whole triage (its verdict is the one `diagnose --prometheus` gives,
    never a cheaper guess: a healthy-looking curve can still hide a warning, e.g. a k the acceptance model finds
    material gain in lowering), but the fleet keeps only what a line shows, not the Reports."""
    if limit is not None and limit < 0:
        raise InputError(f"--limit {limit}: give 0 or more instances to list")
    sel = selector_of(selector)
    with PrometheusSource(settings) as source:
        wins = source.window(sel, seconds)
    recorded = _recorded(config, store)
    todo: list[tuple[InstanceWindow, Readings]] = []
    placed: list[Placed] = []
    for win in wins.values():
        readings, where = readings_of(config, win, settings.url, seconds, recorded)
        todo.append((win, readings))
        placed.append(where)
    knowledge = default_knowledge()
    seen = [_Seen(*_summary(diagnose(readings, knowledge), win), where, win)
            for (win, readings), where in zip(todo, placed, strict=True)]
    del todo
    seen.sort(key=_Seen.key)
    shown, omitted = _listed(seen, limit, only_problems)
    lines = tuple(FleetLine(one.win.instance, one.win.labels, one.judged, one.metrics, one.placed.host,
                            one.placed.profile, window_of(one.win, seconds)) for one in shown)
    return FleetReport(settings.url, sel, seconds, shown_window(seconds), lines, _totals(seen), omitted)
