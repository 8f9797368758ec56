"""`stop [HOST] [--dry-run]`: stop exactly the server specops started, by its recorded PID."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, Verb

if TYPE_CHECKING:
    from bot.core.results.operation import OperationResult


@dataclass(frozen=True)
class Args:
    host: str | None = _host.host()
    dry_run: bool = _host.dry_run("print what would be stopped; stop nothing")


def run(call: Call, args: Args) -> OperationResult:
    from bot.app.operations import ops

    return ops.stop(_host.request(call, args.host, dry_run=args.dry_run))


VERB: Verb[Args, OperationResult] = Verb(
    name="stop", summary="stop the server specops started, by its PID (you confirm)",
    chat=("host",), args=Args, run=run, exit=_host.operation_exit_of, access="change",
    results=("bot.core.results.operation.OperationResult",),
    cli_help="Stop exactly the server specops started on HOST, by its recorded PID.",
)
