"""`unlock [HOST] [--dry-run] [--force]`: break the host's deploy lock after a crash (shows who holds it; you
confirm). A lock younger than settings.lock_stale_after whose process is alive is broken only with --force, from
chat as from the command line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, Verb, opt

if TYPE_CHECKING:
    from bot.core.results.notice import Notice


@dataclass(frozen=True)
class Args:
    host: str | None = _host.host()
    force: bool = opt("--force", False, help="break a lock younger than settings.lock_stale_after")
    dry_run: bool = _host.dry_run("say who holds the lock; break nothing")


def run(call: Call, args: Args) -> Notice:
    from bot.app.watching import records
    from bot.core.results.notice import Notice
    from bot.errors import InputError

    if args.host is None:
        raise InputError("`unlock` needs a host")
    call.config.host(args.host)
    store = call.graph.store
    if args.dry_run:
        held = records.lock_of(store, call.config, args.host)
        if held is None:
            return Notice(f"{args.host} is not locked")
        records.refuse_unforced(call.config, args.host, held, force=args.force)
        why = " — its process is gone" if held.stale else ""
        return Notice(f"would break the lock on {args.host}: {held.operation} by {held.owner}, "
                      f"{held.age / 60:.0f} min old{why}")
    broken = records.break_lock(store, call.config, args.host, force=args.force)
    if broken is None:
        return Notice(f"{args.host} is not locked")
    return Notice(f"lock on {args.host} broken (held by {broken.owner} for {broken.operation}, "
                  f"{broken.age / 60:.0f} min)")


VERB: Verb[Args, Notice] = Verb(
    name="unlock",
    summary="break the host's deploy lock after a crash (shows who holds it; you confirm; a young lock only with "
            "`--force`)",
    chat=("host",), args=Args, run=run, access="change", results=("bot.core.results.notice.Notice",),
    cli_help="Break HOST's deploy lock (after a crash). Shows who held it.",
)
