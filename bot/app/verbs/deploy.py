"""`deploy PROFILE [HOST]`: bring a profile up on a host (plan, confirm, run the playbook, triage)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, Verb, opt

if TYPE_CHECKING:
    from bot.core.results.operation import OperationResult


@dataclass(frozen=True)
class Args:
    profile: str | None = opt(None, help="a profile of the config, e.g. dflash")
    host: str | None = _host.host()
    dry_run: bool = _host.dry_run()
    force: bool = _host.force()
    chart: Path | None = _host.chart()


def run(call: Call, args: Args) -> OperationResult:
    from bot.app.operations import ops

    return ops.deploy(_host.request(call, args.host, args.profile, dry_run=args.dry_run, force=args.force))


VERB: Verb[Args, OperationResult] = Verb(
    name="deploy", summary="bring a profile up (shows the plan; you confirm)",
    chat=("profile", "host"), args=Args, run=run, exit=_host.operation_exit_of,
    results=("bot.core.results.operation.OperationResult",), access="change", cancellable=True,
    cli_help="Deploy PROFILE on HOST: the checks before launch (`specops check`; a refusal stops here unless "
             "--force), pre-flight, config file, start, wait for /health, probe, first metrics, triage.",
)
