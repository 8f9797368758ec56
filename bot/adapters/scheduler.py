"""APScheduler 3.x: watches and daily health reports, kept in the store's SQLite file.

Jobs are textual references (`bot.adapters.scheduler:watch_job`) with JSON-able arguments, explicit ids
and `replace_existing=True`, so a restart (even after SIGKILL) finds them again without copies.
Reports are idempotent per (report, period): two fires of the same report post once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from bot.app.services import Services
from bot.app.watching.health import health_report, report_period
from bot.app.watching.watch import watch_once
from bot.config import Config
from bot.core.results.health import HealthReport
from bot.present.charts import trend_chart

log = logging.getLogger("specops.scheduler")

_SERVICES: Services | None = None


@runtime_checkable
class ResumableReports(Protocol):
    """A notifier whose report is several calls (Slack: the message, then the chart in its thread) and can
    go on from the message an earlier try posted."""

    def deliver_report(self, host: str, report: HealthReport, chart_png: bytes | None,
                       resume: tuple[str, str] | None, on_posted: Callable[[str, str], None]) -> bool: ...


def install(services: Services) -> Services:
    """Give the jobs their object graph (jobs in the job store are only names and JSON arguments)."""
    global _SERVICES
    _SERVICES = services
    return services


def runtime() -> Services:
    if _SERVICES is None:
        raise RuntimeError("the scheduler's services are not installed")
    return _SERVICES


# --- jobs (textual references: keep their names and arguments stable) -------------------------------

def watch_job(host: str) -> None:
    watch_once(runtime(), host)


def report_job(host: str, cron: str | None = None, timezone: str = "UTC", period: str | None = None,
               stale_after: float | None = None) -> bool:
    """Post the health report of `host` once per period: claim, post, then mark posted (a claim that never
    became a post is tried again). Returns whether it posted."""
    svc = runtime()
    when = period or report_period(cron, timezone)
    key = f"report:{host}"
    claimed = (svc.store.reports.claim(key, when) if stale_after is None
               else svc.store.reports.claim(key, when, stale_after=stale_after))
    if claimed is None:
        log.info("report %s for %s already claimed or posted", host, when)
        return False
    report, chart = health_report(svc.config, svc.store, host, when, chart=trend_chart)
    if not svc.store.reports.holds_claim(key, when, claimed):
        # this replica was stopped between its claim and now, and another took the period over: posting now would
        # post the period twice
        log.warning("report %s for %s was taken over by another replica meanwhile; not posted here", host, when)
        return False
    notifier = svc.notifier
    if isinstance(notifier, ResumableReports):
        # the message is saved the moment it exists: a post that fails after it (the chart) is continued
        # there by the next try, never posted as a second copy
        def posted(channel: str, ts: str) -> None:
            svc.store.reports.set_message(key, when, channel, ts)

        ok = notifier.deliver_report(host, report, chart, svc.store.reports.message(key, when), posted)
    else:
        ok = notifier.health_report(host, report, chart)
    if not ok:
        log.warning("report %s for %s was not posted; it is tried again later", host, when)
        return False
    svc.store.reports.mark_posted(key, when)
    return True


def retry_unposted() -> list[str]:
    """At start: the reports a killed bot (or a Slack error) claimed and never posted."""
    svc = runtime()
    done = []
    for key, period in svc.store.reports.unposted():
        host = key.split(":", 1)[1]
        # this process just started: whoever claimed these is gone
        if host in svc.config.watched() and report_job(host, period=period, stale_after=0.0):
            done.append(f"{key} {period}")
    return done


def prune_job() -> None:
    runtime().prune()


# --- the scheduler ---------------------------------------------------------------------------------

def job_ids(config: Config) -> dict[str, dict[str, Any]]:
    """Every job the config asks for, by id."""
    w = config.watch
    hosts = config.watched()  # watch.hosts when given, else the hosts that serve (not a Proxmox or jump host)
    jobs: dict[str, dict[str, Any]] = {}
    for host in hosts:
        if w.interval > 0:
            jobs[f"watch:{host}"] = {"func": "bot.adapters.scheduler:watch_job", "trigger": "interval",
                                     "seconds": w.interval, "kwargs": {"host": host},
                                     "misfire_grace_time": max(1, int(w.interval)), "coalesce": True}
        if w.report_cron:
            jobs[f"report:{host}"] = {"func": "bot.adapters.scheduler:report_job", "trigger": "cron",
                                      "cron": w.report_cron, "kwargs": {"host": host, "cron": w.report_cron,
                                                                        "timezone": w.timezone},
                                      "misfire_grace_time": 3600, "coalesce": True}
    if hosts:
        jobs["prune:samples"] = {"func": "bot.adapters.scheduler:prune_job", "trigger": "interval",
                                 "seconds": 3600.0, "kwargs": {}, "misfire_grace_time": 3600, "coalesce": True}
    return jobs


class Scheduler:
    def __init__(self, config: Config, workers: int = 8) -> None:
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
        from apscheduler.schedulers.background import BackgroundScheduler

        self.config = config
        from bot.app.services import state_engine_url

        url = state_engine_url(config.settings)  # the job store beside the state: a SQLite file or PostgreSQL
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
            if job.id not in wanted and job.id.split(":", 1)[0] in ("watch", "report", "prune"):
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
        from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED

        from bot.adapters.selfmetrics import count_scheduled

        self.scheduler.add_listener(lambda ev: count_scheduled(ev.job_id, ev.exception is None),
                                    EVENT_JOB_EXECUTED | EVENT_JOB_ERROR)
        self.scheduler.start(paused=paused)
        self.sync()
        return self

    def jobs(self) -> list[Any]:
        return list(self.scheduler.get_jobs())

    def shutdown(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)


class LeaderSchedules:
    """The schedules of the leading replica: a scheduler started when this replica takes the lead, shut down
    when it loses it (a new one each time: APScheduler's executors do not start twice). The job store is
    shared, so the next leader finds the same jobs and their next run times."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.current: Scheduler | None = None
        self._lock = threading.Lock()

    def lead(self) -> None:
        with self._lock:
            if self.current is None:
                self.current = Scheduler(self.config).start()
        # reports a killed leader claimed and never posted
        threading.Thread(target=_retry_reports, name="specops-report-retry", daemon=True).start()

    def lose(self) -> None:
        with self._lock:
            current, self.current = self.current, None
        if current is not None:
            current.shutdown()

    @property
    def running(self) -> bool:
        current = self.current
        return current is not None and bool(current.scheduler.running)


def _retry_reports() -> None:
    try:
        for done in retry_unposted():
            log.info("posted %s, which an earlier run claimed and never posted", done)
    except Exception:
        log.exception("retrying unposted reports failed")
