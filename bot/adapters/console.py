"""`specops chat`: the chat commands in a terminal, through the same Command -> ops -> Report path.

Like Errbot's text backend: every command the bot knows runs here too, with the same plan-then-
confirm for deploy and stop.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable

from rich.console import Console as RichConsole

from bot.app.chat import USAGE, ChatDispatcher, Command, Progress, Who
from bot.app.services import build_services
from bot.config import Config
from bot.core.report import Report
from bot.errors import SpecopsError
from bot.present.render import render
from bot.redact import REDACTOR


class ChatConsole:
    def __init__(self, config: Config, *, ask: Callable[[str], str] = input, out: RichConsole | None = None,
                 fmt: str = "text") -> None:
        self.config = config
        self.ask = ask
        self.out = out or RichConsole(highlight=False, soft_wrap=True)
        self.fmt = fmt
        self.owner = f"{getpass.getuser()}@{socket.gethostname()} (console)"
        self.services = build_services(config, redactor=REDACTOR)
        self.chat = ChatDispatcher(config, self.services.store)

    def say(self, text: str, markup: bool = False) -> None:
        self.out.print(REDACTOR.text(text), markup=markup, highlight=False)

    def show(self, report: Report) -> None:
        rendered = render(report, "text" if self.fmt == "text" else "md")
        self.out.print(REDACTOR.text(rendered.text), end="", markup=self.fmt == "text", highlight=False)

    def loop(self) -> None:
        self.say("specops chat — `help` lists the commands, `quit` leaves.")
        while True:
            try:
                line = self.ask("specops> ")
            except (EOFError, KeyboardInterrupt):
                self.say("")
                return
            if line.strip().lower() in ("quit", "exit", "q"):
                return
            if line.strip():
                self.handle(line)

    def handle(self, text: str) -> Report | None:
        decision = self.chat.decide(text, Who("console", self.owner))
        if decision.next == "reply":
            shown = USAGE.replace("*", "").replace("`", "") if decision.text == USAGE else decision.text
            self.say(shown.replace("`", "'"))
            return None
        cmd = decision.command
        assert cmd is not None
        if decision.next == "confirm":
            try:
                plan = self.chat.plan(cmd, self.owner)
            except SpecopsError as exc:
                self.say(f"error: {exc}")
                self.chat.end(decision.audit, "error", str(exc))
                return None
            self.show(plan)
            try:
                answer = self.ask(f"Type 'yes' to {cmd.text()}: ")
            except (EOFError, KeyboardInterrupt):
                answer = ""
            if answer.strip().lower() != "yes":
                self.say("Cancelled; nothing ran.")
                self.chat.end(decision.audit, "cancelled", cmd.text())
                return None
        return self._run(cmd, decision.audit)

    def _run(self, cmd: Command, audit: int) -> Report | None:
        def progress(p: Progress) -> None:
            if p.status != "running":
                self.say(f"  {p.line()}")

        try:
            report = self.chat.run(cmd, audit, self.owner, progress=progress)
        except SpecopsError as exc:
            self.say(f"error: {exc}")
            return None
        self.show(report)
        return report
