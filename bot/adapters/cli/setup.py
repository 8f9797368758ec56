"""`specops init`, `config check|path` and `version`: setting specops up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from bot.adapters.cli import common
from bot.errors import SpecopsError

commands = typer.Typer()  # merged into the `specops` app by cli/main.py


@commands.command()
def init(
    path: Annotated[Path | None, typer.Option(
        "--path", help="where to write the config (default: $XDG_CONFIG_HOME/specops/config.yaml)")] = None,
    deploy_files: Annotated[Path | None, typer.Option(
        "--deploy-files", help="write the deploy files here instead: Slack manifests, systemd unit, Containerfile "
                               "(with the specops wheel it installs, in wheels/), Prometheus alert and recording "
                               "rules, the Grafana dashboard (grafana/) and their READMEs")] = None,
    force: Annotated[bool, typer.Option(help="overwrite what is there")] = False,
) -> None:
    """Write a commented starting config (the example's profiles, a host to fill in), or the deploy files."""
    from bot.app.configuration import setup

    try:
        if deploy_files is not None:
            done = setup.write_deploy_files(deploy_files, force=force)
            for written in done.written:
                typer.echo(f"wrote {written}")
            if done.no_wheel:
                common.note(f"warning: {done.no_wheel}")
            return
        target = setup.write_config(path, force=force)
    except SpecopsError as exc:
        common.fail(str(exc), code=exc.exit_code)
    typer.echo(f"wrote {target}")
    typer.echo("next: edit hosts.a6000, then `specops config check`")


config_app = typer.Typer(help="The config file: check it, show where it is.", no_args_is_help=True)
commands.add_typer(config_app, name="config")


@config_app.command("check")
def config_check(fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text") -> None:
    """Validate the config: schema, cron and time zone, names that must exist, files. Every problem of the file
    in one run, each as `file:line: path: problem (did you mean …)`, then how many; exit 2 on any."""
    from bot.app.configuration.configcheck import check

    if fmt not in ("text", "json"):
        common.fail(f"--format {fmt!r}: text or json")
    result = check(common.STATE["config"])
    if fmt == "json":
        typer.echo(json.dumps({"path": str(result.path) if result.path else None, "ok": result.ok,
                               "problems": result.problems, "warnings": result.warnings}, indent=2))
    else:
        for w in result.warnings:
            typer.echo(f"warning: {w}", err=True)
        for p in result.problems:  # file:line: first, as an editor's quickfix list and promtool's lines read
            typer.echo(p, err=True)
        if result.ok:
            typer.echo(f"{result.path}: ok" + (f" ({len(result.warnings)} warning(s))" if result.warnings else ""))
        else:
            n = len(result.problems)
            typer.echo(f"{result.path or 'config'}: {n} problem{'s' if n != 1 else ''}", err=True)
    if not result.ok:
        raise typer.Exit(2)


@config_app.command("path")
def config_path() -> None:
    """Which config file specops would use, and where it looks."""
    from bot.config import config_candidates, find_config

    found = find_config(common.STATE["config"])
    typer.echo(str(found) if found else "none found")
    for c in config_candidates():
        common.note(f"looked at {c}{' (exists)' if c.is_file() else ''}")


@commands.command()
def version() -> None:
    """Print the specops version."""
    from bot import __version__

    typer.echo(__version__)


