"""APScheduler 3.x: watches and daily health reports, kept in the store's SQLite file.

Jobs are textual references (`bot.scheduler:watch_job`) with JSON-able arguments, explicit ids
and `replace_existing=True`, so a restart (even after SIGKILL) finds them again without copies.
Reports are idempotent per (report, period): two fires of the same report post once.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.config import Config
from bot.incidents import IncidentManager, Notifier, PrintNotifier
from bot.metrics import ParsedLog, SpecDecodeSample
from bot.report import HealthOut, Report
from bot.store import Store
from bot.watch import HostWatch, collect, evaluate, summarize_day

log = logging.getLogger("specops.scheduler")
DAY = 24 * 3600.0
KEEP_SAMPLES = 8 * DAY


@dataclass
class Runtime:
    """What jobs need at run time. Jobs in the job store are only names and JSON arguments."""

    config: Config
    store: Store
    notifier: Notifier
    manager: IncidentManager
    hosts: dict[str, HostWatch] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def watch_state(self, host: str) -> HostWatch:
        with self.lock:
            return self.hosts.setdefault(host, HostWatch())


_RUNTIME: Runtime | None = None


def install(config: Config, notifier: Notifier | None = None, diagnose: Any = None) -> Runtime:
    global _RUNTIME
    store = Store(config.settings.state)
    notifier = notifier or PrintNotifier()
    _RUNTIME = Runtime(config, store, notifier, IncidentManager(config, store, notifier, diagnose))
    return _RUNTIME


def runtime() -> Runtime:
    if _RUNTIME is None:
        raise RuntimeError("the scheduler runtime is not installed")
    return _RUNTIME


# --- jobs (textual references: keep their names and arguments stable) -------------------------------

def watch_job(host: str) -> None:
    rt = runtime()
    if host not in rt.config.hosts:
        log.warning("watch for unknown host %s skipped", host)
        return
    sample = collect(rt.config, host, rt.watch_state(host))
    rules = rt.config.watch.rules
    recent = [d for _, _, d in rt.store.samples(host, limit=max(rules.down_after, rules.low_acceptance_samples,
                                                                  rules.resolve_after) + 1)]
    alerts = evaluate(rt.config, host, [*recent, sample])
    sample["alerts"] = [a.kind for a in alerts]
    rt.store.add_sample(host, bool(sample.get("up")), sample)
    if alerts:
        rt.manager.on_alerts(host, host, alerts)
    else:
        streak = 0
        for d in reversed([*recent, sample]):
            if d.get("alerts") or not d.get("up"):
                break
            streak += 1
        rt.manager.on_healthy(host, streak)


def report_job(host: str, cron: str | None = None, timezone: str = "UTC", period: str | None = None) -> bool:
    """Post the health report of `host` once per period. Returns whether it posted."""
    rt = runtime()
    when = period or report_period(cron, timezone)
    if not rt.store.claim_report(f"report:{host}", when):
        log.info("report %s for %s already posted", host, when)
        return False
    report, chart = health_report(rt.config, rt.store, host, when)
    rt.notifier.health_report(host, report, chart)
    return True


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


def health_report(config: Config, store: Store, host: str, period: str) -> tuple[Report, bytes | None]:
    from bot.ops import diagnose_parsed
    from bot.triage.context import Flags

    samples = store.samples(host, since=time.time() - DAY)
    day = summarize_day(samples)
    profile_name = samples[-1][2].get("profile") if samples else None
    profile = config.profiles.get(str(profile_name))
    prom = None
    if day.get("drafts"):
        drafts, acc = float(day["drafts"]), float(day["accepted"])
        prom = SpecDecodeSample(form="prometheus", mean_acceptance_length=1 + acc / drafts, accepted=int(acc),
                                drafted=0, per_position=[], avg_draft_acceptance_rate=None, num_drafts=drafts)
    flags = Flags(method=None if not profile or profile.method == "none" else profile.method,
                  vllm_version=profile.vllm.version if profile else None, drafter=profile.drafter if profile else None,
                  baseline_tps=profile.baseline_tps if profile else None, host=host,
                  server_alive=day.get("up_now") if samples else None)
    report = diagnose_parsed(ParsedLog(), flags, prom, notes=[f"health report for {period}"], source=f"{host} watches")
    incidents = store.open_incidents(host)
    report.health = HealthOut(period=period, samples=int(day.get("samples", 0)), up_now=day.get("up_now"),
                              up_fraction=day.get("up_fraction"), requests=day.get("requests"),
                              gen_tps=day.get("gen_tps"), single_tps=day.get("single_tps"),
                              baseline_tps=profile.baseline_tps if profile else None,
                              mean_acceptance=day.get("mean_acceptance"),
                              open_incidents=[f"#{i.id} {i.title} (since "
                                              f"{time.strftime('%H:%M', time.localtime(i.opened_at))})"
                                              for i in incidents])
    state = "no watches yet" if not samples else ("up" if day.get("up_now") else "DOWN")
    report.headline = f"Health report {host} ({period}): {state}, verdict {report.verdict}"
    chart = None
    if len(samples) >= 2:
        from bot.charts import trend_chart

        chart = trend_chart(host, samples, profile.baseline_tps if profile else None)
    return report, chart


# --- the scheduler ---------------------------------------------------------------------------------

def job_ids(config: Config) -> dict[str, dict[str, Any]]:
    """Every job the config asks for, by id."""
    w = config.watch
    hosts = w.hosts if w.hosts is not None else list(config.hosts)
    jobs: dict[str, dict[str, Any]] = {}
    for host in hosts:
        if w.interval > 0:
            jobs[f"watch:{host}"] = {"func": "bot.scheduler:watch_job", "trigger": "interval",
                                     "seconds": w.interval, "kwargs": {"host": host},
                                     "misfire_grace_time": max(1, int(w.interval)), "coalesce": True}
        if w.report_cron:
            jobs[f"report:{host}"] = {"func": "bot.scheduler:report_job", "trigger": "cron",
                                      "cron": w.report_cron, "kwargs": {"host": host, "cron": w.report_cron,
                                                                        "timezone": w.timezone},
                                      "misfire_grace_time": 3600, "coalesce": True}
    return jobs


class Scheduler:
    def __init__(self, config: Config, workers: int = 8) -> None:
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
        from apscheduler.schedulers.background import BackgroundScheduler

        self.config = config
        url = f"sqlite:///{config.settings.state.expanduser()}"
        self.scheduler = BackgroundScheduler(
            jobstores={"default": SQLAlchemyJobStore(url=url, tablename="apscheduler_jobs")},
            executors={"default": ThreadPoolExecutor(max_workers=workers)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 30},
            timezone=config.watch.timezone,
        )

    def sync(self) -> list[str]:
        """Make the job store hold exactly the configured jobs (ids stable across restarts)."""
        from apscheduler.triggers.cron import CronTrigger

        wanted = job_ids(self.config)
        for job in self.scheduler.get_jobs():
            if job.id not in wanted and job.id.split(":", 1)[0] in ("watch", "report"):
                job.remove()
        for jid, spec in wanted.items():
            if spec["trigger"] == "cron":
                trigger: Any = CronTrigger.from_crontab(spec["cron"], timezone=self.config.watch.timezone)
                self.scheduler.add_job(spec["func"], trigger, id=jid, kwargs=spec["kwargs"], replace_existing=True,
                                       misfire_grace_time=spec["misfire_grace_time"], coalesce=True)
            else:
                self.scheduler.add_job(spec["func"], "interval", seconds=spec["seconds"], id=jid,
                                       kwargs=spec["kwargs"], replace_existing=True,
                                       misfire_grace_time=spec["misfire_grace_time"], coalesce=True)
        return sorted(wanted)

    def start(self, paused: bool = False) -> Scheduler:
        self.scheduler.start(paused=paused)
        self.sync()
        return self

    def jobs(self) -> list[Any]:
        return list(self.scheduler.get_jobs())

    def shutdown(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
