"""`lock [HOST]`: who holds the host's deploy lock, since when, and whether its process is gone (read-only;
`unlock` breaks it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, Verb

if TYPE_CHECKING:
    from bot.core.results.notice import Notice


@dataclass(frozen=True)
class Args:
    host: str | None = _host.host()


def run(call: Call, args: Args) -> Notice:
    from bot.app.watching import records
    from bot.core.results.notice import Notice
    from bot.errors import InputError

    if args.host is None:
        raise InputError("`lock` needs a host")
    held = records.lock_of(call.graph.store, call.config, args.host)
    if held is None:
        return Notice(f"{args.host} is not locked")
    gone = "; its process is gone (`unlock` breaks it)" if held.stale else ""
    return Notice(f"{args.host} is locked by {held.owner} for {held.operation}, {held.age / 60:.0f} min{gone}")


VERB: Verb[Args, Notice] = Verb(
    name="lock", summary="who holds the host's deploy lock, and since when",
    chat=("host",), args=Args, run=run, results=("bot.core.results.notice.Notice",),
    cli_help="Who holds HOST's deploy lock, since when, and whether its process is gone.",
)
