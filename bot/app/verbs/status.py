"""`status [HOST]`: what is running and what it logged last (no probe)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, ChatArgs, Exit, Verb

if TYPE_CHECKING:
    from bot.core.report import Report


def run(call: Call, args: ChatArgs) -> Report:
    from bot.app import ops

    return ops.status(_host.request(call, args.host))


def cli(call: Call, o: dict[str, object]) -> tuple[Report, Exit]:
    from bot.app import ops

    report = ops.status(_host.request(call, str(o["host"])))
    return report, _host.report_exit(report)


VERB = Verb(
    name="status", usage="status [HOST]", summary="what is running and what it logged last (no probe)",
    chat=("host",), run=run,
    cli_help="What is running on HOST and what it logged last (no probe).",
    cli_options=(_host.HOST, _host.CHART), cli=cli,
)
