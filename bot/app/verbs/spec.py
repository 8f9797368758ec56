"""What a verb declares, once: its arguments (a frozen dataclass whose fields are its options), its chat words, its
help line, whether it changes a host (then it is authorized, planned and confirmed), how it runs, what it returns and
how a command line that ran it ends.

Chat, the console and the CLI build the same `Args` from the same declarations (bot/app/verbs/grammar.py); the chat
parser, `help`, the dispatcher and the `specops VERB` commands are generated from them (bot/app/verbs/__init__.py
holds the registry).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

if TYPE_CHECKING:  # the graph is built by the adapters; a verb only receives it
    from bot.app.services import Services
    from bot.config import Config
    from bot.engine.playbook import ProgressFn

# what a chat word names: the chat parser checks each against the inventory
ChatArg = Literal["profile", "host", "selector", "targets"]
# the Args field each chat word fills (a rollout's hosts or groups are its `hosts`)
CHAT_FIELD: dict[str, str] = {"profile": "profile", "host": "host", "selector": "selector", "targets": "hosts"}
_WORD_USAGE: dict[str, str] = {"profile": "PROFILE", "host": "[HOST]", "selector": "[SELECTOR]",
                               "targets": "HOSTS|GROUP"}
# who may ask for it: `read` anyone the workspace lets in; `change` only the deployers (plan, then confirm)
Access = Literal["read", "change"]
OptType = Literal["str", "int", "float", "bool", "path", "paths"]
# an Args field's annotation -> how both parsers read its text
_TYPES: dict[str, OptType] = {"str": "str", "int": "int", "float": "float", "bool": "bool", "Path": "path",
                              "tuple[Path, ...]": "paths"}

A = TypeVar("A")
R = TypeVar("R")


@dataclass(frozen=True)
class Opt:
    """One option of a verb, as both parsers read it. `flag` None: a positional argument on the command line."""

    name: str  # the Args field
    flag: str | None
    type: OptType = "str"
    default: object = None
    help: str = ""
    required: bool = False  # on the command line (chat's words have their own defaults: the host)
    low: float | None = None  # bounds, checked by both parsers
    high: float | None = None
    metavar: str | None = None
    # a text option's own check (raises InputError), run where chat reads the value, so a bad one is refused
    # before a plan is made; the command line checks it where the verb reads its options
    check: Callable[[str], object] | None = None
    convert: Callable[[str], str] | None = None  # the one form of a text value, whichever parser read it
    cli_only: bool = False  # a file or URL on the bot's machine, or how a process ends: never from chat


def checked_by(module: str, function: str) -> Callable[[str], object]:
    """An option's check that lives in a use case, imported only when a value is checked (the registry is read by
    every command line; the use cases' imports are theirs)."""

    def check(text: str) -> object:
        import importlib

        return getattr(importlib.import_module(module), function)(text)

    check.__name__ = f"{module}.{function}"
    return check


def opt(flag: str | None, default: Any = None, *, help: str = "", required: bool = False,
        low: float | None = None, high: float | None = None, metavar: str | None = None,
        check: Callable[[str], object] | None = None, convert: Callable[[str], str] | None = None,
        cli_only: bool = False) -> Any:
    """A field of a verb's Args that is one of its options (its name and type are the field's)."""
    meta = {"flag": flag, "help": help, "required": required, "low": low, "high": high, "metavar": metavar,
            "check": check, "convert": convert, "cli_only": cli_only}
    return field(default=default, metadata={"opt": meta})


_OPTIONS: dict[type, tuple[Opt, ...]] = {}


def options_of(args: type) -> tuple[Opt, ...]:
    """The options an Args dataclass declares, in field order."""
    known = _OPTIONS.get(args)
    if known is None:
        known = _OPTIONS[args] = tuple(
            Opt(f.name, type=_TYPES[str(f.type).removesuffix(" | None")], default=f.default, **f.metadata["opt"])
            for f in dataclasses.fields(args) if "opt" in f.metadata)
    return known


@dataclass
class Call:
    """Everything a verb's run receives: the object graph, who asks, and how to report and stop."""

    services: Services | None  # None: not built yet (see `build`), or a command line with no config
    owner: str
    progress: ProgressFn | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    note: Callable[[str], None] = lambda _text: None  # a side remark (the CLI's stderr; chat drops it)
    in_chat: bool = False  # a chat message holds less than a terminal (fleet lists at most what fits)
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
class Exit:
    """How a command-line run of the verb ends: its exit code and a last line for stderr."""

    code: int = 0
    note: str = ""


def _exit_zero(_result: object, _args: object) -> Exit:
    return Exit()


@dataclass(frozen=True)
class Verb(Generic[A, R]):
    name: str
    summary: str  # the help line
    chat: tuple[ChatArg, ...]  # the chat words, in order; `profile` is required, `host` defaults
    args: type[A]  # a frozen dataclass: the options (spec.opt fields) chat, the console and the CLI fill alike
    run: Callable[[Call, A], R]  # the one run (a change verb's plan: its Args with dry_run=True)
    access: Access = "read"
    # the result types `run` returns, by import path (named, not imported: a verb's module loads none of them until it
    # runs); each has its presenter in present/render.PRESENTERS, and a test holds them equal to run's annotation
    results: tuple[str, ...] = ("bot.core.report.Report",)
    cli_help: str = ""
    exit: Callable[[R, A], Exit] = _exit_zero  # how a command line that ran it ends
    needs: Callable[[Config], str | None] = lambda _config: None  # a chat refusal when the config lacks a part
    config: Literal["required", "optional"] = "required"  # optional: a command line without a config still runs
    cancellable: bool = False  # a chat Cancel button, and Ctrl-C on the command line, stop it cleanly
    on_interrupt: str = "interrupted: finishing the current step (Ctrl-C again to leave at once)"

    def __post_init__(self) -> None:
        if self.changes and self.option("dry_run") is None:  # chat plans a change by running it with dry_run
            raise TypeError(f"verb {self.name} changes a host but its Args have no dry_run")

    @property
    def changes(self) -> bool:
        return self.access == "change"

    @property
    def usage(self) -> str:
        """The chat form, from the words and the options chat takes: `deploy PROFILE [HOST] [--dry-run] [--force]`."""
        parts = [self.name, *(_WORD_USAGE[w] for w in self.chat)] + (["[--dry-run]"] if self.changes else [])
        # the rest are in the summary: the Slack manifests' usage_hint (1000 characters at most) repeats every usage
        force = [o for o in self.chat_options if o.name == "force"]
        parts += ["[--force]"] * len(force) + (["[options]"] if len(self.chat_options) > len(force) else [])
        return " ".join(parts)

    @property
    def options(self) -> tuple[Opt, ...]:
        return options_of(self.args)

    @property
    def chat_options(self) -> tuple[Opt, ...]:
        """The options chat takes as `--flag value` (the words fill the others; --dry-run is the plan's)."""
        words = {CHAT_FIELD[w] for w in self.chat}
        return tuple(o for o in self.options if not o.cli_only and o.type not in ("path", "paths")
                     and o.flag is not None and o.name not in words and o.name != "dry_run")

    def option(self, name: str) -> Opt | None:
        return next((o for o in self.options if o.name == name), None)
