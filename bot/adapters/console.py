"""`specops chat`: the chat commands in a terminal, through the same Command -> ops -> Report path.

Like Errbot's text backend: every command the bot knows runs here too, with the same plan-then-
confirm for deploy and stop.
"""

from __future__ import annotations

import getpass
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console as RichConsole

from bot.app.chat import AuditRow, ChatDispatcher, Progress, Who, refused_before_launch
from bot.app.commands import USAGE, Command
from bot.app.services import Services, build_services
from bot.config import Config
from bot.errors import SpecopsError
from bot.present.chat_syntax import chat_syntax
from bot.present.render import render, short_text


class ChatConsole:
    def __init__(self, config: Config, *, ask: Callable[[str], str] = input, out: RichConsole | None = None,
                 fmt: str = "text", services: Services | None = None) -> None:
        self.config = config
        self.ask = ask
        self.out = out or RichConsole(highlight=False, soft_wrap=True)
        self.fmt = fmt
        self.owner = f"{getpass.getuser()}@{socket.gethostname()} (console)"
        self.services = services or build_services(config)
        self.redactor = self.services.redactor
        self.chat = ChatDispatcher(self.services)

    def say(self, text: str, markup: bool = False) -> None:
        self.out.print(self.redactor.text(text), markup=markup, highlight=False)

    def show(self, result: object) -> None:
        """Any verb's result, by its type: the same renderer Slack and the CLI use."""
        rendered = render(result, "text" if self.fmt == "text" else "md")
        self.out.print(self.redactor.text(chat_syntax(rendered.text, prefix="")), end="",
                       markup=self.fmt == "text", highlight=False)

    def loop(self) -> None:
        history = _line_editing() if self.ask is input and sys.stdin.isatty() else None
        self.say("specops chat — `help` lists the commands, hosts and profiles; `quit` leaves.")
        try:
            self._loop()
        finally:
            # the audit writer is a daemon thread: a session ended by EOF exits the process at once, and a
            # row's outcome still queued ('cancelled' at the confirmation) would be lost, the row left 'started'
            self.services.store.audit.flush()
            if history is not None:
                import readline

                try:
                    history.parent.mkdir(parents=True, exist_ok=True)
                    readline.write_history_file(history)
                except OSError:
                    pass  # history is a convenience; never fail the session for it

    def _loop(self) -> None:
        while True:
            try:
                line = self.ask("specops> ")
            except EOFError:  # Ctrl-D: the session ends, as a shell's does
                self.say("")
                return
            except KeyboardInterrupt:  # Ctrl-C or a stop signal: the caller says what it stopped and cleaned up
                self.say("")
                raise
            if line.strip().lower() in ("quit", "exit", "q"):
                return
            if line.strip():
                self.handle(line)

    def handle(self, text: str) -> object | None:
        decision = self.chat.decide(text, Who("console", self.owner))
        if decision.next == "reply":
            shown = decision.text.replace("*", "").replace("`", "") if decision.text.startswith(USAGE) \
                else decision.text
            self.say(shown.replace("`", "'"))
            return None
        cmd = decision.command
        assert cmd is not None
        if decision.next == "confirm":
            try:
                plan = self.chat.plan(cmd, self.owner, decision.audit)
            except SpecopsError as exc:
                self.say(f"error: {exc}")
                self.chat.end(decision.audit, "error", str(exc))
                return None
            self.show(plan)
            if refused_before_launch(plan):
                self.say(f"Refused before launch; nothing ran. Fix what refuses it, or `{cmd.text()} --force` to "
                         "deploy anyway.".replace("`", "'"))
                self.chat.end(decision.audit, "refused", f"{cmd.text()}: refused before launch")
                return None
            stopped: KeyboardInterrupt | None = None  # Ctrl-C or a stop signal: cancel, then end the session
            try:
                answer = self.ask(f"Type 'yes' to {cmd.text()}: ")
            except EOFError:
                answer = ""
            except KeyboardInterrupt as exc:
                answer, stopped = "", exc
            if answer.strip().lower() != "yes":
                self.say(("\n" if stopped else "") + "Cancelled; nothing ran.")
                self.chat.end(decision.audit, "cancelled", cmd.text())
                if stopped is not None:
                    raise stopped
                return None
        return self._run(cmd, decision.audit)

    def _run(self, cmd: Command, audit: AuditRow) -> object | None:
        def progress(p: Progress) -> None:
            # a deploy or stop shows its steps; a read (status, diagnose) only its answer
            if p.status != "running" and cmd.destructive:
                self.say(f"  {p.line()}")

        try:
            report = self.chat.run(cmd, audit, self.owner, progress=progress)
        except SpecopsError as exc:
            self.say(f"error: {exc}")
            return None
        if cmd.verb == "status" and self.fmt == "text":
            self.say(short_text(report, f"diagnose {cmd.host or ''}"))
        else:
            self.show(report)
        return report


def _line_editing() -> Path | None:
    """Line editing and history for input() (GNU readline or libedit), kept between sessions."""
    try:
        import readline
    except ImportError:  # a Python built without it: plain input still works
        return None
    state = Path(os.environ.get("XDG_STATE_HOME") or Path("~/.local/state").expanduser())
    history = state / "specops" / "chat_history"
    readline.set_history_length(1000)
    try:
        readline.read_history_file(history)
    except OSError:
        pass  # the first session
    return history
