"""What every `specops` command shares: the global options' state, errors and notes on stderr, the config,
the object graph, the output format, and printing a result through the graph's redactor."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from bot.app.services import Services
    from bot.config import Config, Settings
    from bot.redact import Redactor

FORMATS = ("md", "text", "slack", "json")
STATE: dict[str, Any] = {"config": None, "json": False, "quiet": False}
PIPE_PROGRESS_EVERY = 3.0  # seconds between "still running" lines when stderr is a pipe or a file


def fail(message: str, code: int = 2) -> NoReturn:
    if STATE["json"]:
        # a script asked for JSON: it gets the error as JSON too, on the stream it parses
        typer.echo(json.dumps({"error": {"message": message, "exit_code": code}}))
    typer.echo(f"specops: error: {message}", err=True)
    raise typer.Exit(code)


def note(message: str) -> None:
    """A side remark on stderr (progress, "chart written"); -q silences it."""
    if not STATE["quiet"]:
        typer.echo(message, err=True)


def config() -> Config:
    from bot.config import load_config
    from bot.errors import ConfigError

    try:
        return load_config(STATE["config"])
    except ConfigError as exc:
        fail(str(exc))


def config_if_any() -> Config | None:
    from bot.config import load_config
    from bot.errors import ConfigError

    try:
        return load_config(STATE["config"])
    except ConfigError:
        return None


def settings() -> Settings:
    """Only `settings` (the database): audit, incidents and history need no inventory."""
    from bot.config import load_settings
    from bot.errors import ConfigError

    try:
        return load_settings(STATE["config"])
    except ConfigError as exc:
        fail(str(exc))


def checked_config(code: int = 2) -> Config:
    """The config after `config check`: a bot must not start (and be restarted forever by systemd)
    on a config that names a host or playbook that is not there. A problem exits `code` (`serve`: 78)."""
    from bot.app.configuration.configcheck import check

    result = check(STATE["config"])
    for w in result.warnings:
        note(f"warning: {w}")
    if not result.ok or result.config is None:
        fail("the config has problems (`specops config check` lists them):\n  " + "\n  ".join(result.problems),
             code=code)
    return result.config


def services(cfg: Config) -> Services:
    from bot.app.services import build_services

    return build_services(cfg)


def graph() -> Services | None:
    """The graph over the config the global options name; None when there is no config at all. A config that
    does not load raises its ConfigError."""
    from bot.app.services import build_services
    from bot.config import find_config, load_config

    if find_config(STATE["config"]) is None:
        return None
    return build_services(load_config(STATE["config"]))


def redactor(cfg: Config | None = None) -> Redactor:
    """For the commands that print without a graph: it knows the config's secrets and the environment's."""
    from bot.redact import redactor_for

    return redactor_for(cfg)


def pick_format(fmt: str | None) -> str:
    if fmt is None:
        return "text" if sys.stdout.isatty() else "md"
    if fmt not in FORMATS:
        fail(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


def emit(result: object, fmt: str, redact: Redactor, attach_dir: Path | None = None) -> None:
    """`result` rendered by its type, redacted; a long report's full form goes to a file beside."""
    from bot.present.render import render

    rendered = render(result, fmt)  # type: ignore[arg-type]
    text = redact.text(rendered.text)
    if fmt == "text":
        from rich.console import Console

        Console(highlight=False, soft_wrap=True).print(text, end="")
    else:
        sys.stdout.write(text)
    for name, content in rendered.attachments:
        target = (attach_dir or Path.cwd()) / name
        target.write_text(redact.text(content), encoding="utf-8")
        typer.echo(f"(long report attached as {target})", err=True)


def progress_printer() -> Any:
    """One line per step. On a terminal the running line is redrawn in place (elapsed time, what the
    server is doing) and becomes the step's final line; in a pipe a running step prints a line every
    few seconds, so a log of a long start shows it moving."""
    live = sys.stderr.isatty() and not os.environ.get("TERM", "").startswith("dumb")
    last: dict[str, Any] = {"step": None, "printed": 0.0, "open": False}

    def show(p: Any) -> None:
        if STATE["quiet"]:
            return
        if p.status == "running":
            _running(p, live, last)
            return
        if live and last["open"]:
            sys.stderr.write("\r\x1b[K")
            last["open"] = False
        typer.echo(p.line(), err=True)
        last["step"] = None

    return show


def _running(p: Any, live: bool, last: dict[str, Any]) -> None:
    now = time.monotonic()
    if live:
        import shutil

        width = shutil.get_terminal_size((100, 20)).columns - 1
        line = p.line()
        sys.stderr.write("\r\x1b[K" + (line if len(line) <= width else line[: width - 1] + "…"))
        sys.stderr.flush()
        last["open"] = True
    elif last["step"] != p.step or now - last["printed"] >= PIPE_PROGRESS_EVERY:
        typer.echo(p.line(), err=True)
        last["printed"] = now
    last["step"] = p.step


class SigintCounter:
    """Counts Ctrl-C presses instead of raising KeyboardInterrupt. A KeyboardInterrupt is lost when it lands
    in a finalizer or callback the interpreter runs on the main thread ("Exception ignored in ..."): a
    counter read by the waiting loop cannot be swallowed. Use as a context manager on the main thread."""

    def __init__(self) -> None:
        self.presses = 0
        self._old: Any = None

    def _hit(self, signum: int, frame: object) -> None:
        self.presses += 1  # no lock, no raise: safe whatever the main thread was doing

    def __enter__(self) -> SigintCounter:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._hit)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
