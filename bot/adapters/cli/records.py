"""`specops audit`, `incidents`, `history` and `schedule …`: what the store remembers."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.adapters.cli import common
from bot.errors import SpecopsError

if TYPE_CHECKING:
    from bot.app.records import Store

commands = typer.Typer()  # merged into the `specops` app by cli/main.py


def _store() -> closing[Store]:
    """The store alone: reading the records needs only `settings.state`, no inventory."""
    from bot.app.services import open_store

    return closing(open_store(common.settings()))


@commands.command()
def audit(
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 50,
) -> None:
    """Every command and button press: who, where, what, the plan, the result, when."""
    from bot.app import records
    from bot.present.records import audit_line

    with _store() as store:
        for e in records.audit_entries(store, limit):
            typer.echo(audit_line(e))


schedule_app = typer.Typer(help="The scheduled jobs: watches and daily health reports.", no_args_is_help=True)
commands.add_typer(schedule_app, name="schedule")


@schedule_app.command("list")
def schedule_list() -> None:
    """The jobs in the job store (the SQLite file of settings.state), with their next run."""
    from bot.adapters.scheduler import Scheduler

    sched = Scheduler(common.config()).start(paused=True)
    try:
        for job in sched.jobs():
            typer.echo(f"{job.id:<24} next {job.next_run_time}  {job.trigger}")
    finally:
        sched.shutdown()


@schedule_app.command("run")
def schedule_run(job_id: Annotated[str, typer.Argument(help="e.g. watch:a6000 or report:a6000")]) -> None:
    """Run one job now, in this terminal (incidents and reports are printed, not posted)."""
    from bot.adapters import scheduler

    cfg = common.config()
    jobs = scheduler.job_ids(cfg)
    if job_id not in jobs:
        common.fail(f"unknown job {job_id!r}; jobs: {', '.join(sorted(jobs)) or 'none (see watch: in the config)'}")
    from bot.adapters.print_notifier import PrintNotifier
    from bot.app.health import health_report, report_period
    from bot.app.services import build_services

    svc = scheduler.install(build_services(cfg, notifier=PrintNotifier()))
    try:
        if job_id.startswith("report:"):
            # print it; never claim the period: the bot's scheduled report still posts it
            kwargs = jobs[job_id]["kwargs"]
            period = report_period(kwargs.get("cron"), kwargs.get("timezone", "UTC"))
            if svc.store.report_posted(job_id, period):
                typer.echo(f"(the report for {period} was already posted by the bot)", err=True)
            report, _ = health_report(cfg, svc.store, kwargs["host"], period)
            svc.notifier.health_report(kwargs["host"], report, None)
            return
        func = getattr(scheduler, jobs[job_id]["func"].split(":")[1])
        func(**jobs[job_id]["kwargs"])
    finally:
        svc.close()


@commands.command()
def incidents(limit: Annotated[int, typer.Option(min=1, max=10_000)] = 30) -> None:
    """Incidents, newest first, with their timelines."""
    from bot.app import records
    from bot.present.records import incident_line

    with _store() as store:
        for inc in records.incidents(store, limit):
            typer.echo(incident_line(inc))


@commands.command()
def history(
    host: Annotated[str, typer.Argument(help="a host of the inventory")],
    hours: Annotated[float, typer.Option(min=0.01, max=24 * 8)] = 24.0,
    chart: Annotated[Path | None, typer.Option("--chart", help="the PNG to write (default: HOST-history.png)")] = None,
    out: Annotated[Path | None, typer.Option("--out", hidden=True, help="deprecated: --chart")] = None,
) -> None:
    """The acceptance and throughput trend of HOST from its watches, as a chart."""
    import time

    from bot.app import records
    from bot.app.watch import summarize_day
    from bot.present.charts import trend_chart, write_png

    if out is not None:  # the old name still works: scripts written for it keep running
        typer.echo("specops: --out is deprecated, use --chart PATH", err=True)
    until = time.time()  # the window asked, which the chart's time axis spans whatever the watches cover

    try:
        with _store() as store:
            samples = records.samples(store, host, hours)
    except SpecopsError as exc:
        common.fail(str(exc), code=exc.exit_code)
    cfg = common.config_if_any()
    if cfg is not None and host not in cfg.hosts:
        from bot.config import suggest

        common.fail(f"unknown host {host!r}{suggest(host, cfg.hosts)}; known: {', '.join(sorted(cfg.hosts)) or 'none'}")
    if not samples:
        common.fail(f"no watches of {host} in the last {hours:g} h; is the scheduler running?")
    day = summarize_day(samples)
    profile = cfg.profiles.get(str(samples[-1][2].get("profile"))) if cfg else None
    png = trend_chart(host, samples, profile.baseline_tps if profile else None, window=(until - hours * 3600, until))
    target = chart or out or Path(f"{host}-history.png")
    try:
        path = write_png(png, target)
    except OSError as exc:
        common.fail(f"cannot write chart {target}: {exc.strerror or exc}")
    mean = day.get("mean_acceptance")
    watches = f"{day['samples']} watch{'es' if day['samples'] != 1 else ''}"
    typer.echo(f"{host}: {watches} in the last {hours:g} h, up {day['up_fraction'] * 100:.1f}%"
               + (f", mean acceptance {mean:.2f}" if mean else ""))
    typer.echo(f"chart written to {path}")


