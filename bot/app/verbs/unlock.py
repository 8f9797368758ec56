"""`unlock [HOST]`: break the host's deploy lock after a crash (shows who holds it; you confirm)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, ChatArgs, Exit, Opt, Verb

if TYPE_CHECKING:
    from bot.core.report import Report
    from bot.core.results.notice import Notice


def run(call: Call, args: ChatArgs) -> Report:
    from bot.app import ops

    return ops.unlock(_host.request(call, args.host, dry_run=args.dry_run))


def cli(call: Call, o: dict[str, object]) -> tuple[Notice, Exit]:
    from bot.app import records

    host = str(o["host"])
    held = records.break_lock(call.graph.store, call.config, host, force=bool(o["force"]))
    from bot.core.results.notice import Notice

    if held is None:
        return Notice(f"{host} is not locked"), Exit()
    return Notice(f"lock on {host} broken (held by {held.owner} for {held.operation}, {held.age / 60:.0f} min)"), Exit()


VERB = Verb(
    name="unlock", usage="unlock [HOST]",
    summary="break the host's deploy lock after a crash (shows who holds it; you confirm)",
    chat=("host",), run=run, access="change", result="Report | Notice",
    cli_help="Break HOST's deploy lock (after a crash). Shows who held it.",
    cli_options=(_host.HOST, Opt("force", "--force", "bool", False,
                                 help="break a lock younger than settings.lock_stale_after")),
    cli=cli,
)
