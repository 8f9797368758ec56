"""One chat dispatcher for every front end (Slack, the terminal console): text -> Command -> use case.

Like Errbot's `process_message`: the front end says who typed what and how it can reply; the
dispatcher audits, parses, answers help, authorizes, and tells the front end what happens next:
a reply, a plan to confirm (deploy, stop), or work to run. Planning and running go through here too,
so every front end writes the same audit rows. Nothing here knows Slack or a terminal.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from bot.app.commands import USAGE, Command, CommandError, audit_text, parse, parse_paste, paste_command, split_message
from bot.app.diagnosis.paste import PastedFile
from bot.app.services import Services
from bot.app.verbs import REGISTRY
from bot.app.verbs.spec import Call
from bot.core.report import Report
from bot.core.results.health import HealthReport
from bot.core.results.operation import OperationResult
from bot.engine.playbook import Progress, ProgressFn
from bot.errors import SpecopsError
from bot.store.audit import AuditNotWritten, AuditRow

__all__ = ["AuditNotWritten", "AuditRow", "ChatDispatcher", "Decision", "Progress", "ProgressFn", "Who"]

Next = Literal["reply", "confirm", "run"]


@dataclass(frozen=True)
class Who:
    """Who typed it, where. `user` is the front end's stable id (Slack `U…`, `user@host` in a terminal)."""

    source: str  # slash | mention | shortcut | button | console
    user: str
    team: str | None = None
    channel: str | None = None


@dataclass
class Decision:
    next: Next
    audit: AuditRow  # queued; committed before anything it is for runs
    text: str = ""  # for `reply`: what to say
    command: Command | None = None


class ChatDispatcher:
    def __init__(self, services: Services, default_host: str | None = None) -> None:
        self.services = services
        self.config = services.config
        self.store = services.store
        self.default_host = default_host if default_host is not None else self.config.slack.default_host

    def help_text(self) -> str:
        """The commands, then what they can name here: a user should not have to ask for the hosts."""
        hosts = ", ".join(f"`{h}`" for h in sorted(self.config.hosts)) or "none configured"
        profiles = ", ".join(f"`{p}`" for p in sorted(self.config.profiles)) or "none configured"
        default = f" (default `{self.default_host}`)" if self.default_host in self.config.hosts else ""
        return f"{USAGE}\n*Hosts:* {hosts}{default}\n*Profiles:* {profiles}"

    # --- audit -----------------------------------------------------------------------------------

    def queue(self, who: Who, text: str, *, plan_id: str | None = None, result: str = "started",
              closed: bool = False, detail: str = "") -> AuditRow:
        """The audit row, handed to the store's writer: this returns at once (a Slack acknowledgement does
        not wait on SQLite), and what the row is for waits for `committed()` before it starts."""
        return self.store.audit.queue(source=who.source, text=text, team=who.team, user=who.user, channel=who.channel,
                                      plan_id=plan_id, result=result, closed=closed, detail=detail)

    def begin(self, who: Who, text: str, plan_id: str | None = None) -> AuditRow:
        """The audit row, committed when this returns (a crash still leaves it): for a caller that acts next."""
        row = self.queue(who, text, plan_id=plan_id)
        row.committed()
        return row

    def end(self, audit: AuditRow, result: str, detail: str = "") -> None:
        """The row's outcome, queued after the row (never before it)."""
        self.store.audit.queue_end(audit, result, detail)

    # --- the turn --------------------------------------------------------------------------------

    def decide(self, text: str, who: Who, *, team_ok: bool = True,
               may_run: Callable[[Command], str | None] = lambda _cmd: None, attachments: int = 0) -> Decision:
        """Audit, parse, help, authorize. `may_run` returns a refusal for a command this user may not run.
        `attachments`: the files the message carries (with `diagnose …`, they are the log to diagnose).

        Every turn leaves one audit row, queued here and committed by the store's writer thread, so the
        answer does not wait on SQLite. A turn answered at once (help, usage, another workspace) queues it
        whole, after the parse (pure: no I/O); a command queues its row before `may_run` (which may ask
        Slack for a user group), `plan` and `run` wait until it is committed before they start, and the
        caller closes it. A pasted log is audited as its command line and a size and hash, never as text."""
        return self._decide(audit_text(text, attachments), who, team_ok, may_run,
                            lambda: parse_paste(text, attachments) or parse(text, self.config, self.default_host))

    def decide_message(self, message_text: str, options: Sequence[str] | None, who: Who, *, team_ok: bool = True,
                       attachments: int = 0) -> Decision:
        """Diagnose someone's message (a message shortcut): its text and files are the log, `options` the flags
        (`--method dflash`, …; None: those of the message's own leading `diagnose …` line, if any)."""
        own, log = split_message(message_text)
        words = own if options is None else list(options)

        def command() -> Command:
            return paste_command(words, log, attachments)

        try:
            described = command().text()
        except CommandError:
            described = f"diagnose {' '.join(words)[:200]} (a message)".replace("  ", " ")
        return self._decide(described, who, team_ok, lambda _cmd: None, command)

    def _decide(self, text: str, who: Who, team_ok: bool, may_run: Callable[[Command], str | None],
                parse_it: Callable[[], Command]) -> Decision:
        if not team_ok:
            return Decision("reply", self.queue(who, text, result="refused", closed=True, detail="wrong workspace"),
                            "This specops bot serves another workspace.")
        try:
            cmd = parse_it()
        except CommandError as exc:
            return Decision("reply", self.queue(who, text, result="usage", closed=True, detail=str(exc)), str(exc))
        except Exception as exc:  # a bug in the parser: still audited
            self.queue(who, text, result="error", closed=True, detail=f"internal error: {type(exc).__name__}: {exc}")
            raise
        if cmd.verb == "help":
            return Decision("reply", self.queue(who, text, result="ok", closed=True, detail="help"), self.help_text(),
                            cmd)
        audit = self.queue(who, cmd.text() if cmd.paste is not None else text)
        refusal = may_run(cmd)
        if refusal:
            self.end(audit, "refused", f"not allowed: {cmd.text()}")
            return Decision("reply", audit, refusal, cmd)
        return Decision("confirm" if cmd.destructive else "run", audit, "", cmd)

    def plan(self, cmd: Command, owner: str, audit: AuditRow | None = None) -> object:
        """What `cmd` would do (a dry run), once its audit row is committed. Raises SpecopsError with a short
        message (AuditNotWritten if the row could not be written: then nothing ran)."""
        if audit is not None:
            audit.committed()
        return self._run_verb(dataclasses.replace(cmd, dry_run=True), owner)

    def run(self, cmd: Command, audit: AuditRow, owner: str, *, progress: ProgressFn | None = None,
            cancel: threading.Event | None = None, note: str = "", files: Sequence[PastedFile] = ()) -> object:
        """Run the command once its audit row is committed, and close the row with the outcome. SpecopsError
        is audited, then raised; AuditNotWritten (the row could not be written) is raised and nothing ran.
        A pasted diagnosis reads `files` (the attachments' texts, as the front end read them) too."""
        audit.committed()
        if files:
            note += "; read " + "; ".join(f.describe() for f in files)
        try:
            result = self._run_verb(cmd, owner, progress, cancel, files)
        except SpecopsError as exc:
            self.end(audit, "error", str(exc))
            raise
        except Exception as exc:
            self.end(audit, "error", f"internal error: {type(exc).__name__}: {exc}")
            raise
        status, headline = outcome_of(result)
        self.end(audit, status, f"{cmd.text()}: {headline}{note}")
        return result

    def _run_verb(self, cmd: Command, owner: str, progress: ProgressFn | None = None,
                  cancel: threading.Event | None = None, files: Sequence[PastedFile] = ()) -> object:
        call = Call(self.services, owner, progress, cancel or threading.Event(), in_chat=True)
        args = cmd.args()
        if cmd.paste is not None and files:  # the attached files, read by the front end once the job runs
            args = dataclasses.replace(args, files=tuple(files))
        return REGISTRY[cmd.verb].run(call, args)


def refused_before_launch(result: object) -> bool:
    """A plan whose deploy its checks before launch refuse: nothing to confirm (only `--force` goes past)."""
    return isinstance(result, OperationResult) and result.operation.status == "refused"


def outcome_of(result: object) -> tuple[str, str]:
    """What the audit says of a result: its status (an operation's, else the verdict) and its headline."""
    if isinstance(result, Report):
        status = result.operation.status if result.operation else "ok"
        return (status if status != "ok" else result.verdict), result.headline
    if isinstance(result, HealthReport):
        return result.verdict, result.headline
    if isinstance(result, OperationResult):
        forced = result.operation.forced
        # a deploy forced past a refusing check says what it went past, where the audit keeps it
        return result.status, result.headline + (f" (--force past: {'; '.join(forced)})" if forced else "")
    return str(getattr(result, "status", None) or "ok"), str(getattr(result, "headline", ""))
