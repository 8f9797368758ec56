"""`deploy PROFILE [HOST]`: bring a profile up on a host (plan, confirm, run the playbook, triage)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, ChatArgs, Exit, Opt, Verb

if TYPE_CHECKING:
    from bot.core.report import Report


def run(call: Call, args: ChatArgs) -> Report:
    from bot.app import ops

    return ops.deploy(_host.request(call, args.host, args.profile, dry_run=args.dry_run,
                                    force=bool(args.option("force", False))))


def cli(call: Call, o: dict[str, object]) -> tuple[Report, Exit]:
    from bot.app import ops

    report = ops.deploy(_host.request(call, str(o["host"]), str(o["profile"]), dry_run=bool(o["dry_run"]),
                                      force=bool(o.get("force", False))))
    return report, _host.report_exit(report)


VERB = Verb(
    name="deploy", usage="deploy PROFILE [HOST] [--dry-run] [--force]",
    summary="bring a profile up (shows the plan; you confirm)",
    chat=("profile", "host"), run=run, access="change", cancellable=True,
    chat_options=("force",),
    cli_help="Deploy PROFILE on HOST: the checks before launch (`specops check`; a refusal stops here unless "
             "--force), pre-flight, config file, start, wait for /health, probe, first metrics, triage.",
    cli_options=(Opt("profile", None, help="a profile of the config, e.g. dflash"), _host.HOST, _host.DRY_RUN,
                 _host.FORCE, _host.CHART),
    cli=cli,
)
