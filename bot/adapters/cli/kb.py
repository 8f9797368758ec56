"""`specops kb …` (the knowledge base and the atlas) and `specops eval` (the real-case score)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from bot.adapters.cli import common
from bot.errors import SpecopsError

commands = typer.Typer()  # merged into the `specops` app by cli/main.py


kb_app = typer.Typer(help="The knowledge base: sourced failure signatures and known upstream issues.",
                     no_args_is_help=True)
commands.add_typer(kb_app, name="kb")


@kb_app.command("list")
def kb_list(
    fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text",
    family: Annotated[str | None, typer.Option(help="only this family")] = None,
) -> None:
    """Every entry: id, kind, family, title (JSON: with its sources and fixtures)."""
    from bot.app.evaluation import kb

    folder = kb.fixtures_dir()
    fixtures = kb.load_fixtures(folder) if folder else {}
    items = [e for e in kb.entries() if family is None or e.family == family]
    if family is not None and not items:
        common.fail(f"no family {family!r}; families: {', '.join(sorted(kb.FAMILY_TITLES))}")
    if fmt == "json":
        typer.echo(json.dumps([kb.entry_summary(e, fixtures) for e in items], indent=2, ensure_ascii=False))
        return
    if fmt != "text":
        common.fail(f"--format {fmt!r}: text or json")
    from bot.present.kb import entry_line

    for e in items:
        typer.echo(entry_line(e))
    typer.echo(f"{len(items)} entries", err=True)


@kb_app.command("show")
def kb_show(entry_id: Annotated[str, typer.Argument(help="an entry id (see `specops kb list`)")],
            fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text") -> None:
    """One entry with its patterns, cause, versions, fix, remediation and sources."""
    from bot.app.evaluation import kb

    try:
        e = kb.show(entry_id)
    except SpecopsError as exc:
        common.fail(str(exc), code=exc.exit_code)
    if fmt == "json":
        typer.echo(e.model_dump_json(indent=2))
        return
    from bot.present.kb import entry_lines

    for line in entry_lines(e):
        typer.echo(line)


@kb_app.command("search")
def kb_search(text: Annotated[str, typer.Argument(help="a log line, or words")]) -> None:
    """Entries a log line matches, or whose words contain every word given."""
    from bot.app.evaluation import kb

    try:
        hits = kb.search(text)
    except SpecopsError as exc:
        common.fail(str(exc), code=exc.exit_code)
    if not hits:
        typer.echo("no entry matches", err=True)
        raise typer.Exit(1)
    for e in hits:
        typer.echo(f"{e.id:<52} {e.family:<18} {e.title}")


@kb_app.command("atlas")
def kb_atlas(
    line: Annotated[str, typer.Argument(help="one line of a vLLM log (an error, a warning, an exception)")],
    vllm_version: Annotated[str | None, typer.Option("--vllm-version", help="the release that printed it")] = None,
    platform: Annotated[str | None, typer.Option(
        "--platform", help="cuda | rocm | cpu | xpu | tpu: which platform's file, when several raise the line")] = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text",
) -> None:
    """Where vLLM's own released source prints or raises LINE: file, function, releases, condition, flags, link."""
    from bot.app.evaluation import kb

    if fmt not in ("text", "json"):
        common.fail(f"--format {fmt!r}: text or json")
    if platform is not None and platform not in ("cuda", "rocm", "cpu", "xpu", "tpu"):
        common.fail(f"--platform {platform!r}: cuda, rocm, cpu, xpu or tpu")
    try:
        out = kb.atlas(line, vllm_version, platform)
    except SpecopsError as exc:
        common.fail(str(exc), code=exc.exit_code)
    if fmt == "json":
        typer.echo(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        from bot.present.atlas import atlas_lines

        for text in atlas_lines(out):
            typer.echo(text)
    if not out["found"]:
        raise typer.Exit(1)


@kb_app.command("check")
def kb_check(
    fixtures: Annotated[Path | None, typer.Option(help="the fixtures folder (default: tests/fixtures/kb)")] = None,
) -> None:
    """Validate every entry; every fixture must match its own patterns and no other entry may claim it first."""
    from bot.app.evaluation import kb

    try:
        result = kb.check(fixtures)
    except SpecopsError as exc:
        common.fail(str(exc), code=exc.exit_code)
    except ValueError as exc:  # an entry that does not validate
        common.fail(f"the knowledge base does not load: {exc}", code=1)
    fams = ", ".join(f"{k} {v}" for k, v in sorted(result.by_family.items()))
    typer.echo(f"{result.entries} entries, {result.fixtures} fixtures ({fams})")
    for p in result.problems:
        typer.echo(f"problem: {p}", err=True)
    if result.problems:
        raise typer.Exit(1)
    typer.echo("ok")


@kb_app.command("compile")
def kb_compile() -> None:
    """Write bot/core/knowledge/compiled.json from the YAML (what a diagnosis loads in milliseconds)."""
    from bot.app.evaluation import kb

    try:
        path = kb.compile_now()
    except ValueError as exc:  # an entry that does not validate
        common.fail(f"the knowledge base does not load: {exc}", code=1)
    except OSError as exc:
        common.fail(f"cannot write the compiled knowledge base: {exc}", code=1)
    typer.echo(f"wrote {path}")


@commands.command("eval")
def eval_cases(
    directory: Annotated[Path, typer.Argument(help="a folder of cases: DIR/<case>/{log.txt,context.json,expect.json}")],
    fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text",
    floor: Annotated[float, typer.Option(min=0.0, max=1.0, help="exit 1 below this share of cases right")] = 0.0,
    max_false_alarms: Annotated[int, typer.Option(min=0, help="exit 1 above this many false alarms")] = 1_000_000,
) -> None:
    """Score the diagnosis on real cases: the cause its thread established, and false alarms on healthy runs."""
    from bot.app.evaluation import evaluate

    try:
        result = evaluate.run(directory)
    except SpecopsError as exc:
        common.fail(str(exc), code=exc.exit_code)
    if fmt == "json":
        typer.echo(json.dumps(result.as_json(), indent=2, ensure_ascii=False))
    else:
        from bot.present.kb import eval_lines

        for line in eval_lines(result):
            typer.echo(line)
    if result.score < floor or result.false_alarms > max_false_alarms:
        typer.echo(f"specops: below the floor ({floor:.0%} right, at most {max_false_alarms} false alarm(s))", err=True)
        raise typer.Exit(1)


