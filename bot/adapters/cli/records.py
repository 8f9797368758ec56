"""`specops audit`, `incidents`, `history` and `schedule …`: what the store remembers."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from bot.adapters.cli import common
from bot.errors import SpecopsError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from bot.app.watching.records import Store
    from bot.redact import Redactor

T = TypeVar("T", bound="DataclassInstance")  # a record: the store's dataclasses, the listing's JobRow

commands = typer.Typer()  # merged into the `specops` app by cli/main.py


def _store() -> closing[Store]:
    """The store alone: reading the records needs only `settings.state`, no inventory."""
    from bot.app.services import open_store

    return closing(open_store(common.settings()))


FORMAT_HELP = "text (a table; long cells cut with …) | md | json (one document: a list of objects)"


def _formats() -> list[str]:
    from bot.present.records import LIST_FORMATS

    return list(LIST_FORMATS)


FormatOpt = Annotated[str, typer.Option("--format", help=FORMAT_HELP, autocompletion=_formats)]


def _checked(fmt: str) -> str:
    from bot.present.records import LIST_FORMATS

    if fmt not in LIST_FORMATS:
        common.fail(f"unknown --format {fmt!r}; choose one of {', '.join(LIST_FORMATS)}")
    return fmt


def _redacted(items: Sequence[T], redactor: Redactor) -> list[T]:
    """Each record with its strings redacted before a cell is cut: a cut secret would no longer match."""
    return [dataclasses.replace(x, **{f.name: redactor.obj(getattr(x, f.name))
                                      for f in dataclasses.fields(x) if f.init})
            for x in items]


def _show(fmt: str, items: Sequence[T], as_json: Callable[[Sequence[T]], object],
          as_table: Callable[[Sequence[T], bool], str]) -> None:
    """The records in `fmt`, through the redactor the config's secrets teach (as every other output)."""
    import json

    redactor = common.redactor(common.config_if_any())
    clean = _redacted(items, redactor)
    if fmt == "json":
        typer.echo(json.dumps(redactor.obj(as_json(clean)), indent=2, ensure_ascii=False))
    else:
        typer.echo(redactor.text(as_table(clean, fmt == "md")), nl=False)


@commands.command()
def audit(
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 50,
    fmt: FormatOpt = "text",
) -> None:
    """Every command and button press, newest first: who, where, what, the plan, the result, when."""
    from bot.app.watching import records
    from bot.present.records import audit_json, audit_table

    _checked(fmt)
    with _store() as store:
        entries = records.audit_entries(store, limit)
    _show(fmt, entries, audit_json, audit_table)


@commands.command()
def replicas(fmt: FormatOpt = "text") -> None:
    """The bots serving on this state store: which leads (runs the schedules), their last heartbeat."""
    from bot.app.watching import records
    from bot.present.records import replicas_json, replicas_table

    _checked(fmt)
    with _store() as store:
        rows = records.replicas(store)
    _show(fmt, rows, replicas_json, replicas_table)


schedule_app = typer.Typer(help="The scheduled jobs: watches and daily health reports.", no_args_is_help=True)
commands.add_typer(schedule_app, name="schedule")


@schedule_app.command("list")
def schedule_list(fmt: FormatOpt = "text") -> None:
    """The jobs in the job store (the SQLite file of settings.state), with their next run."""
    from bot.adapters.scheduler import Scheduler
    from bot.present.records import JobRow, jobs_json, jobs_table

    _checked(fmt)
    sched = Scheduler(common.config()).start(paused=True)
    try:
        jobs = [JobRow(job.id, job.next_run_time, str(job.trigger)) for job in sched.jobs()]
    finally:
        sched.shutdown()
    _show(fmt, jobs, jobs_json, jobs_table)


@schedule_app.command("run")
def schedule_run(job_id: Annotated[str, typer.Argument(help="e.g. watch:a6000 or report:a6000")]) -> None:
    """Run one job now, in this terminal (incidents and reports are printed, not posted)."""
    from bot.adapters import scheduler

    cfg = common.config()
    jobs = scheduler.job_ids(cfg)
    if job_id not in jobs:
        common.fail(f"unknown job {job_id!r}; jobs: {', '.join(sorted(jobs)) or 'none (see watch: in the config)'}")
    from bot.adapters.print_notifier import PrintNotifier
    from bot.app.services import build_services
    from bot.app.watching.health import health_report, report_period

    svc = scheduler.install(build_services(cfg, notifier=PrintNotifier()))
    try:
        if job_id.startswith("report:"):
            # print it; never claim the period: the bot's scheduled report still posts it
            kwargs = jobs[job_id]["kwargs"]
            period = report_period(kwargs.get("cron"), kwargs.get("timezone", "UTC"))
            if svc.store.reports.posted(job_id, period):
                typer.echo(f"(the report for {period} was already posted by the bot)", err=True)
            report, _ = health_report(cfg, svc.store, kwargs["host"], period)
            svc.notifier.health_report(kwargs["host"], report, None)
            return
        func = getattr(scheduler, jobs[job_id]["func"].split(":")[1])
        func(**jobs[job_id]["kwargs"])
    finally:
        svc.close()


incidents_app = typer.Typer(invoke_without_command=True)
commands.add_typer(incidents_app, name="incidents")
LimitOpt = Annotated[int, typer.Option(min=1, max=10_000, help="at most this many, newest first")]


@incidents_app.callback()
def incidents(ctx: typer.Context, limit: LimitOpt = 30, fmt: FormatOpt = "text") -> None:
    """Incidents, newest first: state, host, when opened, how many events, the last one.
    `specops incidents show ID` prints one incident's timeline (opened, alerts, acknowledged, resolved:
    when, by whom or what, and why)."""
    if ctx.invoked_subcommand is None:
        _incident_list(limit, fmt)


@incidents_app.command("list")
def incidents_list(limit: LimitOpt = 30, fmt: FormatOpt = "text") -> None:
    """Incidents, newest first (the same as `specops incidents`)."""
    _incident_list(limit, fmt)


def _incident_list(limit: int, fmt: str) -> None:
    from bot.app.watching import records
    from bot.present.records import incidents_json, incidents_table

    _checked(fmt)
    with _store() as store:
        found = records.incidents(store, limit)
    _show(fmt, found, incidents_json, incidents_table)


@incidents_app.command("show", short_help="One incident's timeline: when, what, by whom, why.")
def incidents_show(
    incident_id: Annotated[int, typer.Argument(metavar="ID", help="the incident's number (`specops incidents`)")],
    fmt: FormatOpt = "text",
) -> None:
    """One incident and its timeline, oldest first: when, what happened, by whom or what, and why."""
    from bot.app.watching import records
    from bot.present.records import incident_show, incident_show_json

    _checked(fmt)
    try:
        with _store() as store:
            inc = records.incident(store, incident_id)
    except SpecopsError as exc:
        common.fail(str(exc), code=exc.exit_code)
    _show(fmt, [inc], lambda incs: incident_show_json(incs[0]), lambda incs, md: incident_show(incs[0], md))


@commands.command()
def history(
    host: Annotated[str, typer.Argument(help="a host of the inventory")],
    hours: Annotated[float, typer.Option(min=0.01, max=24 * 8)] = 24.0,
    chart: Annotated[Path | None, typer.Option("--chart", help="the PNG to write (default: history-HOST.png)")] = None,
    out: Annotated[Path | None, typer.Option("--out", hidden=True, help="deprecated: --chart")] = None,
) -> None:
    """The acceptance and throughput trend of HOST from its watches, as a chart."""
    import time

    from bot.app.watching import records
    from bot.app.watching.watch import summarize_day
    from bot.present.charts import chart_path_problem, trend_chart, write_png
    from bot.present.names import history_file_name

    if out is not None:  # the old name still works: scripts written for it keep running
        typer.echo("specops: --out is deprecated, use --chart PATH", err=True)
    problem = chart_path_problem(chart or out or Path("x.png"))
    if problem:
        common.fail(problem)
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
    target = chart or out or Path(history_file_name(host))
    if str(target) == "-":  # the PNG on stdout; what it shows on stderr
        import sys

        sys.stdout.buffer.write(png)
        sys.stdout.buffer.flush()
        mean = day.get("mean_acceptance")
        typer.echo(f"{host}: {day['samples']} watch(es) in the last {hours:g} h"
                   + (f", mean acceptance {mean:.2f}" if mean else ""), err=True)
        return
    try:
        path = write_png(png, target)
    except OSError as exc:
        common.fail(f"cannot write chart {target}: {exc.strerror or exc}")
    mean = day.get("mean_acceptance")
    watches = f"{day['samples']} watch{'es' if day['samples'] != 1 else ''}"
    typer.echo(f"{host}: {watches} in the last {hours:g} h, up {day['up_fraction'] * 100:.1f}%"
               + (f", mean acceptance {mean:.2f}" if mean else ""))
    typer.echo(f"chart written to {path}")


