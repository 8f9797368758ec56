"""The health report of a host: its recorded watch samples, through the same triage as `diagnose`."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from bot.app.diagnosis.diagnose import diagnose_parsed
from bot.app.diagnosis.facts import profile_flags
from bot.app.watching.watch import summarize_day
from bot.config import Config
from bot.core.parsed_log import ParsedLog, SpecDecodeSample
from bot.core.results.health import HealthOut, HealthReport
from bot.store.facade import Store

DAY = 24 * 3600.0


def report_period(cron: str | None, timezone: str, now: datetime | None = None) -> str:
    """The scheduled fire time this run belongs to (the last one not after now): the period's key."""
    import zoneinfo

    from apscheduler.triggers.cron import CronTrigger

    tz = zoneinfo.ZoneInfo(timezone)
    now = now or datetime.now(tz)
    if not cron:
        return now.strftime("%Y-%m-%d")
    trigger = CronTrigger.from_crontab(cron, timezone=tz)
    t = now - timedelta(days=8)
    last: datetime | None = None
    while True:
        nxt = trigger.get_next_fire_time(last, t)
        if nxt is None or nxt > now:
            break
        last = nxt
        t = nxt + timedelta(seconds=1)
    return (last or now).strftime("%Y-%m-%d %H:%M")


def span_label(first: float, last: float) -> str:
    """The span the samples cover, e.g. `2026-12-01 06:10 – 2026-12-02 06:00` (local time)."""
    fmt = "%Y-%m-%d %H:%M"
    a, b = time.strftime(fmt, time.localtime(first)), time.strftime(fmt, time.localtime(last))
    if a[:10] == b[:10]:
        return f"{a} – {b[11:]}"
    return f"{a} – {b}"


def window_sample(day: dict[str, object]) -> SpecDecodeSample | None:
    """The period's speculative-decoding counters as one window sample the triage can judge."""
    drafts = day.get("drafts")
    if not isinstance(drafts, int | float) or drafts <= 0:
        return None
    accepted = float(day.get("accepted") or 0)  # type: ignore[arg-type]
    per_pos = [float(x) for x in day.get("per_position") or []]  # type: ignore[attr-defined]
    drafted = float(day.get("drafted") or 0)  # type: ignore[arg-type]
    if drafted <= 0 and per_pos:
        drafted = float(drafts) * len(per_pos)
    return SpecDecodeSample(form="prometheus", mean_acceptance_length=1 + accepted / float(drafts),
                            accepted=round(accepted), drafted=round(drafted), per_position=per_pos,
                            avg_draft_acceptance_rate=(100.0 * accepted / drafted) if drafted else None,
                            num_drafts=float(drafts))


# (host, samples, baseline tok/s, the window the axis spans) -> PNG
ChartFn = Callable[[str, list[tuple[float, bool, dict[str, Any]]], float | None, tuple[float, float] | None],
                   bytes | None]


def health_report(config: Config, store: Store, host: str, period: str | None = None,
                  chart: ChartFn | None = None) -> tuple[HealthReport, bytes | None]:
    """The report of the last 24 h of watches, and its trend chart when `chart` (a presenter) is given."""
    now = time.time()
    samples = store.samples.for_host(host, since=now - DAY)
    day = summarize_day(samples)
    profile_name = samples[-1][2].get("profile") if samples else None
    profile = config.served_profile(profile_name, host)
    label = span_label(samples[0][0], samples[-1][0]) if samples else (period or "the last 24 h")
    prom = window_sample(day)
    known = config.hosts.get(host)  # a Prometheus-only instance is watched too, with no inventory entry
    flags = profile_flags(profile, host=host, env=known.vllm_env if known else None,
                          floors=config.watch.rules.first_position_floor,
                          server_alive=day.get("up_now") if samples else None)
    notes = [f"health report over {label}" + (f" (period {period})" if period and period != label else "")]
    if prom is not None:
        notes.append(f"speculative-decoding counters summed over {int(day.get('samples', 0))} watch sample(s)")
    report = diagnose_parsed(ParsedLog(), flags, prom, notes=notes, source=f"{host} watches")
    if prom is not None:  # the mean is the watches' counters summed: it is over them, not over one window
        report.metrics.samples = int(day.get("samples", 0))
    incidents = store.incidents.unresolved(host)
    health = HealthOut(period=label, samples=int(day.get("samples", 0)), up_now=day.get("up_now"),
                              up_fraction=day.get("up_fraction"), requests=day.get("requests"),
                              gen_tps=day.get("gen_tps"), single_tps=day.get("single_tps"),
                              baseline_tps=profile.baseline_tps if profile else None,
                              mean_acceptance=day.get("mean_acceptance"),
                              open_incidents=[f"#{i.id} {i.title} (since "
                                              f"{time.strftime('%H:%M', time.localtime(i.opened_at))})"
                                              for i in incidents])
    state = "no watches yet" if not samples else ("up" if day.get("up_now") else "DOWN")
    png = (chart(host, samples, profile.baseline_tps if profile else None, (now - DAY, now))
           if chart and len(samples) >= 2 else None)
    return HealthReport(host, f"Health report {host} ({label}): {state}, verdict {report.verdict}", health, report), png
