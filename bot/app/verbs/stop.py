"""`stop [HOST]`: stop exactly the server specops started, by its recorded PID."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, ChatArgs, Exit, Opt, Verb

if TYPE_CHECKING:
    from bot.core.report import Report


def run(call: Call, args: ChatArgs) -> Report:
    from bot.app import ops

    return ops.stop(_host.request(call, args.host, dry_run=args.dry_run))


def cli(call: Call, o: dict[str, object]) -> tuple[Report, Exit]:
    from bot.app import ops

    report = ops.stop(_host.request(call, str(o["host"]), dry_run=bool(o["dry_run"])))
    return report, _host.report_exit(report)


VERB = Verb(
    name="stop", usage="stop [HOST]", summary="stop the server specops started, by its PID (you confirm)",
    chat=("host",), run=run, access="change",
    cli_help="Stop exactly the server specops started on HOST, by its recorded PID.",
    cli_options=(_host.HOST, Opt("dry_run", "--dry-run", "bool", False,
                                 help="print what would be stopped; stop nothing")),
    cli=cli,
)
