"""`report [HOST]`: the health report of a host from its recorded watches (what the daily report posts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, Exit, Verb

if TYPE_CHECKING:
    from bot.core.report import Report
    from bot.core.results.health import HealthReport


@dataclass(frozen=True)
class Args:
    host: str | None = _host.host()


def run(call: Call, args: Args) -> HealthReport | Report:
    from bot.app import ops

    return ops.health(_host.request(call, args.host))


def _exit(result: HealthReport | Report, _args: Args) -> Exit:
    from bot.core.report import Report

    return _host.report_exit(result) if isinstance(result, Report) else Exit(0)


VERB: Verb[Args, HealthReport | Report] = Verb(
    name="report", summary="the health report of a host", chat=("host",), args=Args, run=run, exit=_exit,
    results=("bot.core.results.health.HealthReport", "bot.core.report.Report"),
    cli_help="The health report of HOST from its recorded watches (what the daily report posts).",
)
