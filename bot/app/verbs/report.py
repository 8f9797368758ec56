"""`report [HOST]`: the health report of a host from its recorded watches (what the daily report posts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, Exit, Verb

if TYPE_CHECKING:
    from bot.core.results.health import HealthReport


@dataclass(frozen=True)
class Args:
    host: str | None = _host.host()


def run(call: Call, args: Args) -> HealthReport:
    from bot.app.operations import ops

    return ops.health(_host.request(call, args.host))


def _exit(_result: HealthReport, _args: Args) -> Exit:
    return Exit(0)  # a report, not a check: `diagnose --fail-on` is the one for cron jobs


VERB: Verb[Args, HealthReport] = Verb(
    name="report", summary="the health report of a host", chat=("host",), args=Args, run=run, exit=_exit,
    results=("bot.core.results.health.HealthReport",),
    cli_help="The health report of HOST from its recorded watches (what the daily report posts).",
)
