"""`status [HOST]`: what is running and what it logged last (no probe)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, Verb

if TYPE_CHECKING:
    from bot.core.report import Report


@dataclass(frozen=True)
class Args:
    host: str | None = _host.host()
    chart: Path | None = _host.chart()


def run(call: Call, args: Args) -> Report:
    from bot.app.operations import ops

    return ops.status(_host.request(call, args.host))


VERB: Verb[Args, Report] = Verb(
    name="status", summary="what is running and what it logged last (no probe)",
    chat=("host",), args=Args, run=run, exit=_host.report_exit_of,
    cli_help="What is running on HOST and what it logged last (no probe).",
)
