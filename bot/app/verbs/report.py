"""`report [HOST]`: the health report of a host from its recorded watches (what the daily report posts)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, Verb

if TYPE_CHECKING:
    from bot.core.report import Report


@dataclass(frozen=True)
class Args:
    host: str | None = _host.host()


def run(call: Call, args: Args) -> Report:
    from bot.app import ops

    return ops.health(_host.request(call, args.host))


VERB: Verb[Args, Report] = Verb(
    name="report", summary="the health report of a host", chat=("host",), args=Args, run=run,
    exit=_host.report_exit_of,
    cli_help="The health report of HOST from its recorded watches (what the daily report posts).",
)
