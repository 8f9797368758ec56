"""What a verb declares, once: its grammar in chat and on the command line, its help line, whether it
changes a host (then it is authorized, planned and confirmed), how it runs and what it returns.

The chat parser, `help`, the dispatcher, the console, Slack and the CLI are generated from these
declarations (bot/app/verbs/__init__.py holds the registry).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # the graph is built by the adapters; a verb only receives it
    from bot.app.services import Services
    from bot.config import Config
    from bot.engine.playbook import ProgressFn

# what a chat word names: the chat parser checks each against the inventory
ChatArg = Literal["profile", "host", "selector", "targets"]
# who may ask for it: `read` anyone the workspace lets in; `change` only the deployers (plan, then confirm)
Access = Literal["read", "change"]
OptType = Literal["str", "int", "float", "bool", "path", "paths", "count"]


@dataclass(frozen=True)
class Opt:
    """One command-line parameter. `flag` None: a positional argument."""

    name: str  # the keyword the verb's `cli` callable receives
    flag: str | None
    type: OptType = "str"
    default: object = None
    help: str = ""
    required: bool = False
    low: float | None = None  # bounds, checked by the command line's parser
    high: float | None = None
    metavar: str | None = None
    # a text option's own check (raises InputError), run where chat reads the value, so a bad one is refused
    # before a plan is made; the command line checks it where the verb reads its options
    check: Callable[[str], object] | None = None


@dataclass
class Call:
    """Everything a verb's run receives: the object graph, who asks, and how to report and stop."""

    services: Services | None  # None: not built yet (see `build`), or a command line with no config
    owner: str
    progress: ProgressFn | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    note: Callable[[str], None] = lambda _text: None  # a side remark (the CLI's stderr; chat drops it)
    # the graph, built on first need (`diagnose --log` reads no config and opens no store); None: there is no
    # config at all; a config that does not load raises its ConfigError, wherever it is reached for
    build: Callable[[], Services | None] | None = None
    _tried: bool = field(default=False, repr=False)

    def _built(self) -> Services | None:
        if self.services is None and self.build is not None and not self._tried:
            self._tried = True
            self.services = self.build()
        return self.services

    @property
    def graph(self) -> Services:
        built = self._built()
        if built is None:
            from bot.config import config_candidates
            from bot.errors import ConfigError

            where = " or ".join(str(c) for c in config_candidates())
            raise ConfigError(f"no config: none at {where}; `specops init` writes one, or give --config FILE / set "
                              "SPECOPS_CONFIG")
        return built

    @property
    def config(self) -> Config:
        return self.graph.config

    @property
    def config_or_none(self) -> Config | None:
        """The config if there is one (a verb that also runs without: fleet, diagnose --prometheus); one that
        does not load is an error, not silently none."""
        built = self._built()
        return built.config if built is not None else None

    def graph_if_built(self) -> Services | None:
        return self.services


def owner_here() -> str:
    """Who runs a command line, as a lock and the audit name it."""
    from bot.identity import default_owner

    return default_owner()


@dataclass(frozen=True)
class ChatArgs:
    """A chat command's words, checked: what the registry's grammar found."""

    host: str | None = None
    profile: str | None = None
    selector: str | None = None
    dry_run: bool = False
    options: tuple[tuple[str, object], ...] = ()  # the verb's chat_options given, (Opt name, checked value)

    def option(self, name: str, default: object = None) -> object:
        return next((value for key, value in self.options if key == name), default)


@dataclass(frozen=True)
class Exit:
    """How a command-line run of the verb ends: its exit code and a last line for stderr."""

    code: int = 0
    note: str = ""


@dataclass(frozen=True)
class Verb:
    name: str
    usage: str  # the chat form, e.g. "deploy PROFILE [HOST] [--dry-run]"
    summary: str  # the help line
    chat: tuple[ChatArg, ...]  # the chat words, in order; `profile` is required, `host` defaults
    run: Callable[[Call, ChatArgs], object]  # the chat run (and its plan: dry_run=True)
    access: Access = "read"
    result: str = "Report"  # the result type's name, for the docs and the renderer table
    cli_help: str = ""
    cli_options: tuple[Opt, ...] = ()
    chat_options: tuple[str, ...] = ()  # the cli_options chat takes too (after a selector), by name: same bounds
    # the command-line run: (call, the options by name) -> the result and how the process ends
    cli: Callable[[Call, dict[str, object]], tuple[object, Exit]] | None = None
    needs: Callable[[Config], str | None] = lambda _config: None  # a chat refusal when the config lacks a part
    config: Literal["required", "optional"] = "required"  # optional: a command line without a config still runs
    cancellable: bool = False  # a chat Cancel button, and Ctrl-C on the command line, stop it cleanly
    on_interrupt: str = "interrupted: finishing the current step (Ctrl-C again to leave at once)"

    @property
    def changes(self) -> bool:
        return self.access == "change"

    def option(self, name: str) -> Opt | None:
        """One of cli_options, by name."""
        return next((opt for opt in self.cli_options if opt.name == name), None)

