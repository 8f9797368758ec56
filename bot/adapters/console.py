"""`specops chat`: the chat commands in a terminal, through the same Command -> ops -> Report path.

Like Errbot's text backend: every command the bot knows runs here too, with the same plan-then-
confirm for deploy and stop.
"""

from __future__ import annotations

import getpass
import socket
from collections.abc import Callable

from rich.console import Console as RichConsole

from bot.app import ops
from bot.app.commands import USAGE, Command, CommandError, parse
from bot.config import Config
from bot.core.report import Report
from bot.engine.playbook import Progress
from bot.errors import SpecopsError
from bot.present.render import render
from bot.redact import REDACTOR
from bot.store import Store


class ChatConsole:
    def __init__(self, config: Config, *, ask: Callable[[str], str] = input, out: RichConsole | None = None,
                 fmt: str = "text") -> None:
        self.config = config
        self.ask = ask
        self.out = out or RichConsole(highlight=False, soft_wrap=True)
        self.fmt = fmt
        self.owner = f"{getpass.getuser()}@{socket.gethostname()} (console)"
        self.store = Store(config.settings.state)

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
        audit = self.store.audit_begin(source="console", text=text, user=self.owner)
        try:
            cmd = parse(text, self.config, self.config.slack.default_host)
        except CommandError as exc:
            self.say(str(exc).replace("`", "'"))
            self.store.audit_end(audit, "usage", str(exc))
            return None
        if cmd.verb == "help":
            self.say(USAGE.replace("*", "").replace("`", ""))
            self.store.audit_end(audit, "ok", "help")
            return None
        if cmd.destructive:
            plan = self._run(Command(cmd.verb, cmd.host, cmd.profile, dry_run=True), audit)
            if plan is None:
                return None
            self.show(plan)
            answer = self.ask(f"Type 'yes' to {cmd.text()}: ")
            if answer.strip().lower() != "yes":
                self.say("Cancelled; nothing ran.")
                self.store.audit_end(audit, "cancelled", cmd.text())
                return None
        report = self._run(cmd, audit)
        if report is not None:
            self.show(report)
            status = report.operation.status if report.operation else report.verdict
            self.store.audit_end(audit, status, f"{cmd.text()}: {report.headline}")
        return report

    def _run(self, cmd: Command, audit: int) -> Report | None:
        def progress(p: Progress) -> None:
            if p.status != "running":
                self.say(f"  {p.line()}")

        try:
            return ops.run_command(cmd, self.config, owner=self.owner, progress=progress)
        except SpecopsError as exc:
            self.say(f"error: {exc}")
            self.store.audit_end(audit, "error", str(exc))
            return None
