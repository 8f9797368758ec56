"""One chat dispatcher for every front end (Slack, the terminal console): text -> Command -> use case.

Like Errbot's `process_message`: the front end says who typed what and how it can reply; the
dispatcher audits, parses, answers help, authorizes, and tells the front end what happens next:
a reply, a plan to confirm (deploy, stop), or work to run. Planning and running go through here too,
so every front end writes the same audit rows. Nothing here knows Slack or a terminal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from bot.app import ops
from bot.app.commands import USAGE, Command, CommandError, parse
from bot.config import Config
from bot.core.report import Report
from bot.engine.playbook import Progress, ProgressFn
from bot.errors import SpecopsError
from bot.store import Store

__all__ = ["USAGE", "ChatDispatcher", "Command", "Decision", "Progress", "ProgressFn", "Who"]

Next = Literal["reply", "confirm", "run"]


@dataclass(frozen=True)
class Who:
    """Who typed it, where. `user` is the front end's stable id (Slack `U…`, `user@host` in a terminal)."""

    source: str  # slash | mention | button | console
    user: str
    team: str | None = None
    channel: str | None = None


@dataclass
class Decision:
    next: Next
    audit: int
    text: str = ""  # for `reply`: what to say
    command: Command | None = None


class ChatDispatcher:
    def __init__(self, config: Config, store: Store, default_host: str | None = None) -> None:
        self.config = config
        self.store = store
        self.default_host = default_host if default_host is not None else config.slack.default_host

    def help_text(self) -> str:
        """The commands, then what they can name here: a user should not have to ask for the hosts."""
        hosts = ", ".join(f"`{h}`" for h in sorted(self.config.hosts)) or "none configured"
        profiles = ", ".join(f"`{p}`" for p in sorted(self.config.profiles)) or "none configured"
        default = f" (default `{self.default_host}`)" if self.default_host in self.config.hosts else ""
        return f"{USAGE}\n*Hosts:* {hosts}{default}\n*Profiles:* {profiles}"

    # --- audit -----------------------------------------------------------------------------------

    def begin(self, who: Who, text: str, plan_id: str | None = None) -> int:
        """The audit row, written before anything runs (a crash still leaves it)."""
        return self.store.audit_begin(source=who.source, text=text, team=who.team, user=who.user,
                                      channel=who.channel, plan_id=plan_id)

    def end(self, audit: int, result: str, detail: str = "") -> None:
        self.store.audit_end(audit, result, detail)

    def closed(self, who: Who, text: str, result: str, detail: str = "") -> int:
        """The audit row of a turn that runs nothing (help, usage, wrong workspace): one write, not two."""
        return self.store.audit_closed(source=who.source, text=text, result=result, detail=detail, team=who.team,
                                       user=who.user, channel=who.channel)

    # --- the turn --------------------------------------------------------------------------------

    def decide(self, text: str, who: Who, *, team_ok: bool = True,
               may_run: Callable[[Command], str | None] = lambda _cmd: None) -> Decision:
        """Audit, parse, help, authorize. `may_run` returns a refusal for a command this user may not run.

        Every turn leaves one audit row. A turn answered at once (help, usage, another workspace) writes
        it whole, after the parse (which is pure: no I/O); a command writes its row before `may_run` (which
        may ask Slack for a user group) and before anything runs, and the caller closes it."""
        if not team_ok:
            return Decision("reply", self.closed(who, text, "refused", "wrong workspace"),
                            "This specops bot serves another workspace.")
        try:
            cmd = parse(text, self.config, self.default_host)
        except CommandError as exc:
            return Decision("reply", self.closed(who, text, "usage", str(exc)), str(exc))
        except Exception as exc:  # a bug in the parser: still audited
            self.closed(who, text, "error", f"internal error: {type(exc).__name__}: {exc}")
            raise
        if cmd.verb == "help":
            return Decision("reply", self.closed(who, text, "ok", "help"), self.help_text(), cmd)
        audit = self.begin(who, text)
        refusal = may_run(cmd)
        if refusal:
            self.end(audit, "refused", f"not allowed: {cmd.text()}")
            return Decision("reply", audit, refusal, cmd)
        return Decision("confirm" if cmd.destructive else "run", audit, "", cmd)

    def plan(self, cmd: Command, owner: str) -> Report:
        """What `cmd` would do (a dry run). Raises SpecopsError with a short message."""
        return ops.run_command(Command(cmd.verb, cmd.host, cmd.profile, dry_run=True), self.config, owner=owner)

    def run(self, cmd: Command, audit: int, owner: str, *, progress: ProgressFn | None = None,
            cancel: threading.Event | None = None, note: str = "") -> Report:
        """Run the command and close its audit row with the outcome. SpecopsError is audited, then raised."""
        try:
            report = ops.run_command(cmd, self.config, owner=owner, progress=progress, cancel=cancel)
        except SpecopsError as exc:
            self.end(audit, "error", str(exc))
            raise
        except Exception as exc:
            self.end(audit, "error", f"internal error: {type(exc).__name__}: {exc}")
            raise
        status = report.operation.status if report.operation else "ok"
        self.end(audit, status if status != "ok" else report.verdict, f"{cmd.text()}: {report.headline}{note}")
        return report
