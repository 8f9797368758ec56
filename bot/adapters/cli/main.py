"""The `specops` command: the global options, the command table, and the one error boundary.

The chat verbs' commands are generated from the registry (cli/verbs.py); the others live in cli/records.py,
cli/kb.py, cli/setup.py and cli/sim.py. Heavy imports happen inside the commands so `--help` stays fast.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from bot.adapters.cli import common
from bot.errors import EXIT_INTERNAL, EXIT_INTERRUPTED

EPILOG = """\b
Config: --config FILE, else $SPECOPS_CONFIG, else $XDG_CONFIG_HOME/specops/config.yaml
(~/.config/specops/), else /etc/specops/specops.yaml. `specops init` writes one.
Global options (--config, -q, -v) may come before or after the command.
\b
Exit codes: 0 ok | 1 the operation failed, or --fail-on matched | 2 bad input or config |
70 internal error (SPECOPS_DEBUG=1 shows it) | 130 interrupted | `serve` only (sysexits, for
systemd): 78 a config or secret to fix, 69 Slack unavailable at start, 75 the port is in use
\b
NO_COLOR=1 turns colour off; --format json turns errors into JSON on stdout too."""

app = typer.Typer(
    name="specops",
    help="ChatOps for speculative-decoding deployments of vLLM: deploy, diagnose, report.",
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # rich help costs ~90 ms of imports; `--help` must start fast
    context_settings={"help_option_names": ["-h", "--help"]},
)

GLOBAL_FLAGS = ("-q", "--quiet", "-v", "--verbose", "-vv")


def _show_version(value: bool) -> None:
    if value:
        from bot import __version__

        typer.echo(f"specops {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    config: Annotated[Path | None, typer.Option(
        "--config", help="the specops config file (default: see below)")] = None,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="errors only: no progress, no notes")] = False,
    verbose: Annotated[int, typer.Option("-v", "--verbose", count=True, help="log more (-vv: debug)")] = 0,
    version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True,
                                          help="print the version and exit")] = False,
) -> None:
    import logging

    common.STATE["config"] = config
    common.STATE["quiet"] = quiet
    level = logging.ERROR if quiet else (logging.DEBUG if verbose > 1 else logging.INFO if verbose else
                                         logging.WARNING)
    logging.basicConfig(level=level, format="specops: %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)
    # paramiko's transport thread logs a lost host with its traceback; the CLI says what failed (the step, the
    # host) itself, so paramiko speaks only at -vv, for debugging
    logging.getLogger("paramiko").setLevel(logging.DEBUG if verbose > 1 else logging.CRITICAL + 1)


def hoist_globals(argv: list[str]) -> list[str]:
    """Move the global options to the front, so `specops diagnose --log x --config c` works like
    `specops --config c diagnose --log x` (click only reads a group's options before the command)."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            rest.extend(argv[i:])
            break
        if tok == "--config" and i + 1 < len(argv):
            front += argv[i:i + 2]
            i += 2
            continue
        if tok.startswith("--config=") or tok in GLOBAL_FLAGS:
            front.append(tok)
        else:
            rest.append(tok)
        i += 1
    return front + rest


def _wants_json(argv: list[str]) -> bool:
    return any(a == "--format=json" for a in argv) or any(
        a == "--format" and b == "json" for a, b in itertools.pairwise(argv))


def _command_of(argv: list[str]) -> str | None:
    """The command argv names, after the global options `hoist_globals` put first; None when an option
    (--help, --version, one click refuses) comes first."""
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--config":
            i += 2
        elif tok.startswith("--config=") or tok in GLOBAL_FLAGS:
            i += 1
        else:
            return None if tok.startswith("-") else tok
    return None


def _app_for(argv: list[str]) -> typer.Typer:
    """`app` holding only the command argv runs. typer turns every command it holds into a click command on
    each run (each option's annotations evaluated, ~25 ms for all of them) to then run one. Anything else —
    no command, an option first, a name that is no command, shell completion — gets the whole app, so the
    group's help, "No such command ... Did you mean" and completion stay click's."""
    name = _command_of(argv)
    if name is None or "_SPECOPS_COMPLETE" in os.environ:
        return app
    from typer.main import get_command_name

    commands = [c for c in app.registered_commands
                if c.callback is not None and (c.name or get_command_name(c.callback.__name__)) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if len(commands) + len(groups) != 1:
        return app
    import copy

    slim = copy.copy(app)  # the same callback, settings and completion options; one command
    slim.registered_commands, slim.registered_groups = commands, groups
    return slim


def main() -> None:
    try:
        _run()
    finally:
        # main() is the process's last act. At exit the interpreter's collector walks every object still alive
        # (modules, the knowledge base, the scanner), ~25 ms on a diagnosis; frozen, they are still freed as
        # the modules are torn down, only not walked
        gc.freeze()


def _run() -> None:
    from typer.exceptions import Abort, TyperException

    argv = hoist_globals(sys.argv[1:])
    common.STATE["json"] = _wants_json(argv)
    try:
        rc = _app_for(argv)(args=argv, prog_name="specops", standalone_mode=False)
    except Abort:
        typer.echo("specops: interrupted", err=True)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except TyperException as exc:  # a usage error: click's words (typer carries its own click), our JSON if asked
        code = int(getattr(exc, "exit_code", 2))
        if common.STATE["json"]:
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            typer.echo(json.dumps({"error": {"message": message, "exit_code": code}}))
        if hasattr(exc, "show"):
            exc.show()
        else:
            typer.echo(f"specops: error: {exc}", err=True)
        raise SystemExit(code) from None
    except KeyboardInterrupt:
        typer.echo("specops: interrupted", err=True)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except BrokenPipeError:
        # `specops diagnose ... | head`: the reader left; exit quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None
    except Exception as exc:  # never a traceback for the user; SPECOPS_DEBUG=1 shows it
        if os.environ.get("SPECOPS_DEBUG"):
            raise
        said = _expected(exc)
        if said is not None:  # a command that does not say its own errors: the store's trouble is still not a bug
            message, code = said
            if common.STATE["json"]:
                typer.echo(json.dumps({"error": {"message": message, "exit_code": code}}))
            typer.echo(f"specops: error: {message}", err=True)
            raise SystemExit(code) from None
        typer.echo(f"specops: internal error: {type(exc).__name__}: {exc} (SPECOPS_DEBUG=1 shows the traceback)",
                   err=True)
        raise SystemExit(EXIT_INTERNAL) from None
    raise SystemExit(rc if isinstance(rc, int) else 0)


def _expected(exc: Exception) -> tuple[str, int] | None:
    """specops' own errors and the state store's (a server gone, a password refused) as (message, exit code): exit 1
    or 2 as documented above, never 70 — 70 says a bug."""
    from bot.errors import SpecopsError
    from bot.redact import redactor_for

    if isinstance(exc, SpecopsError):
        return redactor_for(None).text(str(exc)), int(exc.exit_code)
    # the database's own errors (SQLAlchemy's, or a driver's raised unwrapped), named by their package: the store is
    # behind the app layer, not imported here
    if type(exc).__module__.split(".", 1)[0] in ("sqlalchemy", "psycopg", "sqlite3", "_sqlite3"):
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return redactor_for(None).text(f"state store unavailable: {first}"), 1
    return None


def _register() -> None:
    from bot.adapters.cli import kb, records, setup, sim, verbs

    verbs.register(app)
    for module in (kb, records, setup, sim):
        app.registered_commands += module.commands.registered_commands
        app.registered_groups += module.commands.registered_groups


_register()


if __name__ == "__main__":
    main()
