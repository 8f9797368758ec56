"""The chat verbs as `specops` commands, generated from the registry (bot/app/verbs/): each verb's options
become a typer command whose run is the same for all — build the verb's Args as chat does (app/verbs/grammar.py),
build the graph, run the verb (Ctrl-C cancels a cancellable one cleanly), print its result by type, write its
chart, exit as the verb says."""

from __future__ import annotations

import inspect
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from bot.adapters.cli import common
from bot.app.verbs import REGISTRY
from bot.app.verbs.grammar import build_args
from bot.app.verbs.spec import Call, Exit, Opt, Verb, owner_here

_TYPES: dict[str, Any] = {"str": str | None, "int": int | None, "float": float | None, "bool": bool,
                          "path": Path | None, "paths": list[Path] | None}
FORMAT = Opt("format", "--format", help="md | text | slack | json (default: text on a terminal, md in a pipe)")


def _parameter(opt: Opt) -> inspect.Parameter:
    if opt.flag is None:  # a positional: required, unless its Opt gives a default (rollout --resume has none)
        info: Any = typer.Argument(... if opt.default is None else opt.default, help=opt.help, metavar=opt.metavar)
        kind: Any = str
    else:
        default = ... if opt.required else opt.default
        metavar = opt.metavar or ("FILE" if opt.type in ("path", "paths") else None)
        info = typer.Option(default, opt.flag, help=opt.help, metavar=metavar, min=opt.low, max=opt.high)
        kind = str if opt.required else _TYPES[opt.type]
    return inspect.Parameter(opt.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=kind)


Execute = Callable[[Verb[Any, Any], dict[str, Any]], None]


def _command(verb: Verb[Any, Any], execute: Execute) -> Any:
    options = (*verb.options, FORMAT)

    def command(**values: Any) -> None:
        execute(verb, values)

    params = [_parameter(o) for o in options]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__name__ = verb.name
    command.__doc__ = verb.cli_help
    return command


def register(app: typer.Typer, execute: Execute | None = None) -> None:
    """Every verb of the registry as `specops VERB`; `execute` (default: `run`) receives the options typer read."""
    for verb in REGISTRY.values():
        app.command(name=verb.name, help=verb.cli_help)(_command(verb, execute or run))


def run(verb: Verb[Any, Any], values: dict[str, Any]) -> None:
    from bot.errors import SpecopsError

    fmt = common.pick_format(values.pop("format"))
    chart: Path | None = values.get("chart")
    if chart is not None:
        from bot.present.charts import chart_path_problem

        problem = chart_path_problem(chart)
        if problem:
            common.fail(problem)
    to_stdout = chart is not None and str(chart) == "-"  # the PNG on stdout: the report goes to stderr
    if chart is not None and not to_stdout and chart.is_dir():
        common.fail(f"--chart {chart} is a folder: give a file name, e.g. {chart / (verb.name + '.png')}")
    if chart is not None and not to_stdout and not chart.parent.is_dir():
        common.fail(f"--chart {chart}: there is no folder {chart.parent} (specops makes none)")
    try:  # the options as chat would read them: a bad one is refused before anything runs
        args = build_args(verb, values)
    except SpecopsError as exc:
        common.fail(str(exc), code=exc.exit_code)
    # a verb that needs the inventory loads it before anything runs; the others build the graph when they reach
    # for it (`diagnose --log` reads no config and opens no database)
    svc = common.services(common.config()) if verb.config == "required" else None
    call = Call(svc, owner_here(), common.progress_printer(), note=common.note, build=common.graph)
    try:
        audit = _audit_begin(verb, call, values)
    except SpecopsError as exc:  # the row could not be written: nothing ran
        common.fail(str(exc), code=exc.exit_code)
    try:
        result = _cancellable(verb, call, args) if verb.cancellable else verb.run(call, args)
        end = Exit(130, verb.exit(result, args).note) if call.cancel.is_set() else verb.exit(result, args)
    except SpecopsError as exc:
        _audit_end(call, audit, "error", str(exc))
        # an error names what it could not reach, a Prometheus URL with its password included: redacted too
        common.fail(_redactor(call, values).text(str(exc)), code=exc.exit_code)  # the exit code: bot.errors
    except BaseException as exc:
        _audit_end(call, audit, "error", f"interrupted ({type(exc).__name__})")
        raise
    else:
        if audit is not None:  # only then: a read (diagnose --log) imports nothing of the store's
            from bot.app.chat import outcome_of

            status, headline = outcome_of(result)
            _audit_end(call, audit, status, headline)
    finally:
        built = call.graph_if_built()
        if built is not None:
            built.close()
    if to_stdout:
        import contextlib

        with contextlib.redirect_stdout(sys.stderr):
            common.emit(result, fmt, _redactor(call, values), None)
    else:
        common.emit(result, fmt, _redactor(call, values), chart.parent if chart else None)
    if chart is not None:
        _write_chart(result, chart)
    if end.note:
        common.note(end.note)
    raise typer.Exit(end.code)


def _redactor(call: Call, values: dict[str, Any]) -> Any:
    """The graph's redactor (or one for the environment when no graph was built), taught the credentials of any
    URL given on the command line (`--prometheus http://user:password@…`)."""
    built = call.graph_if_built()
    redact = built.redactor if built is not None else common.redactor(None)
    for value in values.values():
        if isinstance(value, str):
            redact.learn_url(value)
    return redact


def _audit_begin(verb: Verb[Any, Any], call: Call, values: dict[str, Any]) -> Any:
    """A command that changes a host is audited as chat's are (source `cli`, who ran it, the command line), its
    row committed before it runs; a plan (--dry-run) changes nothing and is not."""
    if not verb.changes or values.get("dry_run"):
        return None
    svc = call.graph_if_built()
    if svc is None:
        return None
    line = "specops " + " ".join(sys.argv[1:])
    row = svc.store.audit.queue(source="cli", text=svc.redactor.text(line), user=call.owner)
    row.committed()
    return row


def _audit_end(call: Call, row: Any, result: str, detail: str) -> None:
    svc = call.graph_if_built()
    if row is not None and svc is not None:
        svc.store.audit.queue_end(row, result, svc.redactor.text(detail))


def _write_chart(result: object, path: Path) -> None:
    from bot.present.charts import write_png
    from bot.present.render import chart_of

    png = chart_of(result)
    if png is None:
        common.note("specops: no per-position rates to chart")
        return
    if str(path) == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(png)
        sys.stdout.buffer.flush()
        return
    try:
        path = write_png(png, path)
    except OSError as exc:
        common.fail(f"cannot write chart {path}: {exc.strerror or exc}")
    common.note(f"chart written to {path}")


def _cancellable(verb: Verb[Any, Any], call: Call, args: object) -> object:
    """The run in a worker; the first Ctrl-C asks it to stop cleanly (a deploy or tune restores what it
    changed), the second leaves at once."""
    box: dict[str, Any] = {}
    done = threading.Event()  # not Thread.join: a Ctrl-C inside join() can leave the thread looking finished

    def work() -> None:
        try:
            box["result"] = verb.run(call, args)
        except BaseException as exc:  # handed to the main thread
            box["error"] = exc
        finally:
            done.set()

    # Ctrl-C is counted, never raised: a KeyboardInterrupt landing in a finalizer the main thread runs is
    # printed as "Exception ignored" and lost, and the sweep would run to its end
    with common.SigintCounter() as ctrl_c:
        threading.Thread(target=work, name=f"specops-{verb.name}", daemon=True).start()
        while not done.is_set():
            done.wait(0.1)
            if ctrl_c.presses >= 2:
                common.note("specops: left without restoring; check the host with `specops status`")
                raise SystemExit(130)
            if ctrl_c.presses and not call.cancel.is_set():
                common.note(verb.on_interrupt)
                call.cancel.set()
        if ctrl_c.presses:
            call.cancel.set()  # a press in the last moment before the work ended still counts
    if "error" in box:
        raise box["error"]
    return box["result"]
