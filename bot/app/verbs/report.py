"""`report [HOST]`: the health report of a host from its recorded watches (what the daily report posts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.app.verbs import _host
from bot.app.verbs.spec import Call, ChatArgs, Verb

if TYPE_CHECKING:
    from bot.core.report import Report


def run(call: Call, args: ChatArgs) -> Report:
    from bot.app import ops

    return ops.health(_host.request(call, args.host))


VERB = Verb(name="report", usage="report [HOST]", summary="the health report of a host", chat=("host",), run=run)
