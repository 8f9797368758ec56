"""The `specops` command. Heavy imports happen inside the commands so `--help` stays fast."""

from __future__ import annotations

import gc
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from bot.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, SpecopsError

EPILOG = """\b
Config: --config FILE, else $SPECOPS_CONFIG, else $XDG_CONFIG_HOME/specops/config.yaml
(~/.config/specops/), else /etc/specops/config.yaml. `specops init` writes one.
Global options (--config, -q, -v) may come before or after the command.
\b
Exit codes: 0 ok | 1 the operation failed, or --fail-on matched | 2 bad input or config |
3 the bot could not start | 70 internal error (SPECOPS_DEBUG=1 shows it) | 130 interrupted
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

FORMATS = ("md", "text", "slack", "json")
_STATE: dict[str, Any] = {"config": None, "json": False, "quiet": False}
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

    _STATE["config"] = config
    _STATE["quiet"] = quiet
    level = logging.ERROR if quiet else (logging.DEBUG if verbose > 1 else logging.INFO if verbose else
                                         logging.WARNING)
    logging.basicConfig(level=level, format="specops: %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)


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


def _config() -> Any:
    from bot.config import load_config
    from bot.errors import ConfigError
    from bot.redact import REDACTOR, register_config_secrets

    try:
        config = load_config(_STATE["config"])
    except ConfigError as exc:
        fail(str(exc))
    register_config_secrets(config, REDACTOR)  # the CLI prints through the process redactor
    return config


def _settings() -> Any:
    """Only `settings` (the database): audit, incidents and history need no inventory."""
    from bot.config import load_settings
    from bot.errors import ConfigError

    try:
        return load_settings(_STATE["config"])
    except ConfigError as exc:
        fail(str(exc))


def _checked_config() -> Any:
    """The config after `config check`: a bot must not start (and be restarted forever by systemd)
    on a config that names a host or playbook that is not there."""
    from bot.app.configcheck import check
    from bot.redact import REDACTOR, register_config_secrets

    result = check(_STATE["config"])
    for w in result.warnings:
        note(f"warning: {w}")
    if not result.ok or result.config is None:
        fail("the config has problems (`specops config check` lists them):\n  " + "\n  ".join(result.problems))
    register_config_secrets(result.config, REDACTOR)  # the check loaded it; no second read
    return result.config


def _config_if_any() -> Any:
    from bot.config import load_config
    from bot.errors import ConfigError

    try:
        return load_config(_STATE["config"])
    except ConfigError:
        return None


PIPE_PROGRESS_EVERY = 3.0  # seconds between "still running" lines when stderr is a pipe or a file


def _progress_printer() -> Any:
    """One line per step. On a terminal the running line is redrawn in place (elapsed time, what the
    server is doing) and becomes the step's final line; in a pipe a running step prints a line every
    few seconds, so a log of a long start shows it moving."""
    import time

    live = sys.stderr.isatty() and not os.environ.get("TERM", "").startswith("dumb")
    last: dict[str, Any] = {"step": None, "printed": 0.0, "open": False}

    def show(p: Any) -> None:
        if _STATE["quiet"]:
            return
        now = time.monotonic()
        if p.status == "running":
            if live:
                sys.stderr.write("\r\x1b[K" + p.line()[: _width() - 1])
                sys.stderr.flush()
                last["open"] = True
            elif last["step"] != p.step or now - last["printed"] >= PIPE_PROGRESS_EVERY:
                typer.echo(p.line(), err=True)
                last["printed"] = now
            last["step"] = p.step
            return
        if live and last["open"]:
            sys.stderr.write("\r\x1b[K")
            last["open"] = False
        typer.echo(p.line(), err=True)
        last["step"] = None

    return show


def _width() -> int:
    import shutil

    return shutil.get_terminal_size((100, 20)).columns


def _host_op(fn_name: str, host: str, profile: str | None, dry_run: bool, fmt: str | None,
             probe: bool = True) -> None:
    from bot.app import ops

    out_fmt = _pick_format(fmt)
    cfg = _config()
    req = ops.HostRequest(cfg, host, profile, dry_run=dry_run, probe=probe, progress=_progress_printer())
    try:
        report = getattr(ops, fn_name)(req)
    except SpecopsError as exc:
        fail(str(exc), code=exc.exit_code)  # each error class carries its exit code (bot.errors)
    emit(report, out_fmt)
    if report.operation is not None and report.operation.status == "failed":
        raise typer.Exit(1)
    _exit_for_verdict(report)


def fail(message: str, code: int = 2) -> None:
    if _STATE["json"]:
        # a script asked for JSON: it gets the error as JSON too, on the stream it parses
        typer.echo(json.dumps({"error": {"message": message, "exit_code": code}}))
    typer.echo(f"specops: error: {message}", err=True)
    raise typer.Exit(code)


def note(message: str) -> None:
    """A side remark on stderr (progress, "chart written"); -q silences it."""
    if not _STATE["quiet"]:
        typer.echo(message, err=True)


def _load_json_file(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        fail(f"cannot read {what} {path}: {exc.strerror or exc}")
    except (ValueError, UnicodeDecodeError) as exc:
        fail(f"{what} {path} is not valid JSON: {exc}")
    if not isinstance(data, dict):
        fail(f"{what} {path} must hold a JSON object")
    result: dict[str, Any] = data
    return result


def _pick_format(fmt: str | None) -> str:
    if fmt is None:
        return "text" if sys.stdout.isatty() else "md"
    if fmt not in FORMATS:
        fail(f"unknown --format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


def emit(report: Any, fmt: str, attach_dir: Path | None = None) -> None:
    from bot.present.render import render
    from bot.redact import REDACTOR

    rendered = render(report, fmt)  # type: ignore[arg-type]
    rendered.text = REDACTOR.text(rendered.text)
    if fmt == "text":
        from rich.console import Console

        Console(highlight=False, soft_wrap=True).print(rendered.text, end="")
    else:
        sys.stdout.write(rendered.text)
    for name, content in rendered.attachments:
        target = (attach_dir or Path.cwd()) / name
        target.write_text(REDACTOR.text(content), encoding="utf-8")
        typer.echo(f"(long report attached as {target})", err=True)


@app.command()
def diagnose(
    log: Annotated[Path | None, typer.Option("--log", help="a vLLM server log (any size); - reads stdin")] = None,
    metrics: Annotated[list[Path] | None, typer.Option(
        "--metrics", help="a /metrics scrape; give two (or one file with two) for a window")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="md | text | slack | json (default: text "
                                                             "on a terminal, md in a pipe)")] = None,
    chart: Annotated[Path | None, typer.Option("--chart", help="write the per-position chart (PNG)")] = None,
    all_history: Annotated[bool, typer.Option("--all", help="scan the whole log, not the head and tail")] = False,
    samples: Annotated[int, typer.Option(min=1, max=100_000, help="judge the last N samples")] = 30,
    vllm_version: Annotated[str | None, typer.Option(help="vLLM version on the host, e.g. 0.20.1")] = None,
    method: Annotated[str | None, typer.Option(help="dflash | mtp | eagle3 | ngram | draft_model")] = None,
    target_model: Annotated[str | None, typer.Option(help="the served (target) model")] = None,
    drafter: Annotated[str | None, typer.Option(help="the drafter, e.g. z-lab/Qwen3.6-27B-DFlash")] = None,
    drafter_config: Annotated[Path | None, typer.Option(help="the drafter's config.json")] = None,
    num_speculative_tokens: Annotated[int | None, typer.Option(min=1, max=64)] = None,
    baseline_tps: Annotated[float | None, typer.Option(
        min=0.0, help="tokens/s of the baseline for one request (the brief's MTP: 73.5)")] = None,
    host: Annotated[str | None, typer.Option(
        help="a host to diagnose over SSH; with --log, the name used in advice")] = None,
    profile: Annotated[str | None, typer.Option(help="with --host: the profile, if not the one recorded")] = None,
    probe: Annotated[bool, typer.Option(help="with --host: send a completion probe")] = True,
    fail_on: Annotated[str, typer.Option(
        help="exit 1 when the verdict is this or worse: degraded | failing | never (for cron jobs)")] = "never",
    prometheus: Annotated[str | None, typer.Option(
        help="a Prometheus that scrapes the server (default: the config's prometheus.url), with --instance")] = None,
    instance: Annotated[str | None, typer.Option(
        help="with --prometheus: the instance, HOST:PORT or a label selector like 'job=\"vllm\"'")] = None,
    since: Annotated[str, typer.Option(help="with --prometheus: the window, e.g. 30m, 1h")] = "1h",
) -> None:
    """Diagnose a host over SSH (--host), a vLLM log and/or /metrics scrape offline (--log, --metrics), or an
    instance from Prometheus (--prometheus URL --instance HOST:PORT)."""
    if fail_on not in FAIL_ON:
        fail(f"--fail-on {fail_on!r}: choose one of {', '.join(FAIL_ON)}")
    _STATE["fail_on"] = fail_on
    if prometheus is not None or instance is not None:
        if log is not None or metrics or host is not None:
            fail("--prometheus/--instance read Prometheus: not with --log, --metrics or --host")
        _diagnose_prometheus(prometheus, instance, since, _pick_format(fmt))
        return
    from bot.app.diagnose import DiagnoseRequest, diagnose_offline
    from bot.core.triage.context import Flags
    from bot.errors import InputError

    if host is not None and log is None and not metrics:
        _host_op("diagnose_host", host, profile, False, fmt, probe=probe)
        return
    out_fmt = _pick_format(fmt)
    if log is None and not metrics:
        fail("nothing to diagnose: give --host HOST, or --log FILE and/or --metrics FILE")
    if vllm_version is not None:
        from bot.core.triage.context import parse_version

        if parse_version(vllm_version) is None:
            fail(f"--vllm-version {vllm_version!r} is not a version like 0.20.1")
    if method is not None:
        from bot.core.triage.knowledge import KNOWN_METHODS, normalize_method

        if normalize_method(method) not in KNOWN_METHODS:
            fail(f"--method {method!r} is not one of {', '.join(sorted(KNOWN_METHODS))}")
    cfg = _load_json_file(drafter_config, "drafter config") if drafter_config else None
    flags = Flags(vllm_version=vllm_version, method=method, target_model=target_model, drafter=drafter,
                  drafter_config=cfg, num_speculative_tokens=num_speculative_tokens,
                  baseline_tps=baseline_tps, host=host)
    spool = _spool_stream(log) if log is not None else None
    try:
        report = diagnose_offline(DiagnoseRequest(log=spool.name if spool else log, metrics=list(metrics or []),
                                                  flags=flags, samples=samples, full=all_history,
                                                  log_label=("stdin" if str(log) == "-" else str(log))
                                                  if spool else None))
    except InputError as exc:
        fail(str(exc).replace(str(spool.name), str(log)) if spool else str(exc))
    finally:
        if spool is not None:
            Path(spool.name).unlink(missing_ok=True)
    emit(report, out_fmt, chart.parent if chart else None)
    if chart is not None:
        from bot.present.charts import acceptance_chart

        if not report.metrics.per_position:
            typer.echo("specops: no per-position rates to chart", err=True)
        else:
            if chart.is_dir():
                fail(f"--chart {chart} is a folder: give a file name, e.g. {chart / 'acceptance.png'}")
            try:
                written = acceptance_chart(report, chart)
            except OSError as exc:
                fail(f"cannot write chart {chart}: {exc.strerror or exc}")
            note(f"chart written to {written}")
    _exit_for_verdict(report)


def _diagnose_prometheus(url: str | None, instance: str | None, since: str, fmt: str) -> None:
    from bot.app.fleet import diagnose_instance, settings_for
    from bot.app.prometheus_source import parse_since
    from bot.errors import SpecopsError

    if not instance:
        fail("--prometheus needs --instance HOST:PORT (or a selector); `specops fleet` shows every instance")
        return
    config = _config_if_any()
    try:
        settings = settings_for(config, url)
        report = diagnose_instance(config, settings, instance, parse_since(since))
    except SpecopsError as exc:
        fail(str(exc), code=exc.exit_code)
    emit(report, fmt)
    _exit_for_verdict(report)


@app.command()
def doctor(
    host: Annotated[str, typer.Option(help="the host (inventory name) that runs vLLM")],
    profile: Annotated[str | None, typer.Option(help="the profile to check for (default: the one deployed)")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="text | md | json")] = None,
) -> None:
    """Is the GPU host ready? Devices, driver versions, /dev/shm, disk, vLLM, the port, stale servers — and,
    when the inventory names it (hosts.H.proxmox), the Proxmox side: vfio-pci vs nvidia, the LXC config."""
    from bot.app.doctor import doctor as run_doctor
    from bot.errors import SpecopsError
    from bot.present.doctor import render_doctor
    from bot.redact import REDACTOR

    out_fmt = _pick_format(fmt)
    if out_fmt == "slack":
        fail("doctor prints text, md or json")
    config = _config()
    try:
        result = run_doctor(config, host, profile)
    except SpecopsError as exc:
        fail(str(exc), code=exc.exit_code)
    sys.stdout.write(REDACTOR.text(render_doctor(result.as_json(), out_fmt).text))
    if result.status == "failed":
        raise typer.Exit(1)


@app.command()
def tune(
    profile: Annotated[str, typer.Argument(help="the profile to tune (its model, vLLM, host settings)")],
    host: Annotated[str, typer.Option(help="the host (inventory name) to measure on")],
    k: Annotated[str, typer.Option("--k", help="num_speculative_tokens to try, e.g. 1,2,4,8")] = "1,2,4,8",
    methods: Annotated[str, typer.Option(help="methods to try (none: no speculation)")] = "dflash,mtp,none",
    concurrency: Annotated[str, typer.Option(help="concurrent requests to measure at, e.g. 1,8")] = "1,8",
    requests: Annotated[int, typer.Option(help="completions per setting and concurrency")] = 4,
    prompts: Annotated[Path | None, typer.Option(help="the probe workload (YAML; default: the shipped set)")]
    = None,
    keep_best: Annotated[bool, typer.Option("--keep-best", help="leave the best setting serving")] = False,
    current: Annotated[bool, typer.Option("--current/--no-current",
                                          help="measure the profile's own k too (the gain over it is measured)")]
    = True,
    chart: Annotated[Path | None, typer.Option("--chart", help="write tok/s vs k (PNG)")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="text | md | json")] = None,
) -> None:
    """Measure the best speculative setting on the host: deploy each method x k, drive a fixed workload,
    measure tok/s (one request and under load), acceptance and time to first token; then restore what was
    serving (or keep the best). Ctrl-C restores too."""
    import threading

    from bot.app import tune as tuning
    from bot.present.tune import render_tune, tune_chart
    from bot.redact import REDACTOR

    out_fmt = _pick_format(fmt)
    if out_fmt == "slack":
        fail("tune prints text, md or json")
    if chart is not None and chart.is_dir():
        fail(f"--chart {chart} is a folder: give a file name, e.g. {chart / 'tune.png'}")
    try:
        ks = tuning.parse_ks(k)
        method_list = tuning.parse_methods(methods)
        levels = tuning.parse_concurrency(concurrency)
        tuning.check_requests(requests)
        workload = tuning.load_prompts(prompts)
    except SpecopsError as exc:
        fail(str(exc), code=exc.exit_code)
    cfg = _config()
    cancel = threading.Event()

    def progress(p: Any) -> None:
        if p.status == "running":
            note(f"[{p.step}/{p.total}] {p.name.removeprefix('tune ')}: {p.message}")
        else:
            note(f"[{p.step}/{p.total}] {p.name.removeprefix('tune ')}: {p.status} — {p.message}")

    req = tuning.TuneRequest(cfg, host, profile, ks=ks, methods=method_list, concurrency=levels, requests=requests,
                             workload=workload, keep_best=keep_best, include_current=current, progress=progress,
                             cancel=cancel)
    try:
        planned = tuning.plan(req)
    except SpecopsError as exc:
        fail(str(exc), code=exc.exit_code)
    for s in planned["skipped"]:
        note(f"skipping {s['method']}" + (f" k={s['k']}" if s.get("k") else "") + f": {s['reason']}")
    box: dict[str, Any] = {}
    done = threading.Event()  # not Thread.join: a Ctrl-C inside join() can leave the thread looking finished

    def work() -> None:
        try:
            box["result"] = tuning.tune(req)
        except BaseException as exc:  # handed to the main thread
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=work, name="specops-tune", daemon=True)
    worker.start()
    interrupted = False
    while not done.is_set():
        try:
            done.wait(0.2)
        except KeyboardInterrupt:
            if not interrupted:
                note("interrupted: finishing the current step, then restoring the previous deployment "
                     "(Ctrl-C again to leave at once)")
                interrupted = True
                cancel.set()
            else:
                note("specops: left without restoring; check the host with `specops status`")
                raise SystemExit(130) from None
    error = box.get("error")
    if isinstance(error, SpecopsError):
        fail(str(error), code=error.exit_code)
    if error is not None:
        raise error
    result = box["result"]
    sys.stdout.write(REDACTOR.text(render_tune(result, out_fmt).text))
    if chart is not None:
        try:
            note(f"chart written: {tune_chart(result, chart)}")
        except OSError as exc:
            fail(f"cannot write chart {chart}: {exc.strerror or exc}")
    if interrupted or result.get("cancelled"):
        raise typer.Exit(130)
    if result.get("recommended") is None or (result.get("restored") or {}).get("status") == "failed":
        raise typer.Exit(1)


@app.command()
def fleet(
    prometheus: Annotated[str | None, typer.Option(help="the Prometheus URL (default: the config's prometheus.url)")]
    = None,
    selector: Annotated[str, typer.Option(help="label matchers, e.g. 'job=\"vllm\"' (added to the config's)")]
    = "",
    since: Annotated[str, typer.Option(help="the window, e.g. 30m, 1h")] = "1h",
    fmt: Annotated[str | None, typer.Option("--format", help="md | text | json | slack")] = None,
    fail_on: Annotated[str, typer.Option(help="exit 1 when any instance is this or worse")] = "never",
) -> None:
    """Every vLLM instance Prometheus scrapes, judged on its window: worst first, with the fleet's totals."""
    from bot.app.fleet import fleet as fleet_report
    from bot.app.fleet import settings_for
    from bot.app.prometheus_source import parse_since
    from bot.errors import SpecopsError
    from bot.present.fleet import render_fleet
    from bot.redact import REDACTOR

    if fail_on not in FAIL_ON:
        fail(f"--fail-on {fail_on!r}: choose one of {', '.join(FAIL_ON)}")
    out_fmt = _pick_format(fmt)
    config = _config_if_any()
    try:
        settings = settings_for(config, prometheus)
        result = fleet_report(config, settings, selector, parse_since(since))
    except SpecopsError as exc:
        fail(str(exc), code=exc.exit_code)
    sys.stdout.write(REDACTOR.text(render_fleet(result.as_json(), out_fmt).text))  # type: ignore[arg-type]
    worst = max((_SEVERITY.get(line.report.verdict, 0) for line in result.lines), default=0)
    if fail_on != "never" and worst >= _SEVERITY[fail_on]:
        raise typer.Exit(1)


FAIL_ON = ("degraded", "failing", "never")
_SEVERITY = {"healthy": 0, "unknown": 0, "degraded": 1, "failing": 2}


def _exit_for_verdict(report: Any) -> None:
    threshold = _STATE.get("fail_on", "never")
    if threshold != "never" and _SEVERITY.get(report.verdict, 0) >= _SEVERITY[threshold]:
        raise typer.Exit(1)


def _spool_stream(log: Path) -> Any:
    """`--log -` or a pipe (/dev/stdin, a FIFO): the log is read from its start to its end, so it
    is spooled to a file first; a regular file is read in place (head and tail). None: read in place."""
    import shutil
    import stat
    import tempfile

    if str(log) != "-":
        try:
            mode = log.stat().st_mode
            if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)):
                return None  # a regular file (or a folder, which the reader refuses)
        except OSError:
            return None  # the reader says what is wrong with it
        src: Any = log.open("rb")
    else:
        src = sys.stdin.buffer
    with tempfile.NamedTemporaryFile(prefix="specops-log-", suffix=".txt", delete=False) as spool:
        shutil.copyfileobj(src, spool, 1 << 20)
    if src is not sys.stdin.buffer:
        src.close()
    return spool


kb_app = typer.Typer(help="The knowledge base: sourced failure signatures and known upstream issues.",
                     no_args_is_help=True)
app.add_typer(kb_app, name="kb")


@kb_app.command("list")
def kb_list(
    fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text",
    family: Annotated[str | None, typer.Option(help="only this family")] = None,
) -> None:
    """Every entry: id, kind, family, title (JSON: with its sources and fixtures)."""
    from bot.app import kb

    folder = kb.fixtures_dir()
    fixtures = kb.load_fixtures(folder) if folder else {}
    items = [e for e in kb.entries() if family is None or e.family == family]
    if family is not None and not items:
        fail(f"no family {family!r}; families: {', '.join(sorted(kb.FAMILY_TITLES))}")
    if fmt == "json":
        typer.echo(json.dumps([kb.entry_summary(e, fixtures) for e in items], indent=2, ensure_ascii=False))
        return
    if fmt != "text":
        fail(f"--format {fmt!r}: text or json")
    for e in items:
        typer.echo(f"{e.id:<52} {e.kind:<16} {e.family:<18} {e.title}")
    typer.echo(f"{len(items)} entries", err=True)


@kb_app.command("show")
def kb_show(entry_id: Annotated[str, typer.Argument(help="an entry id (see `specops kb list`)")],
            fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text") -> None:
    """One entry with its patterns, cause, versions, fix, remediation and sources."""
    from bot.app import kb

    try:
        e = kb.show(entry_id)
    except SpecopsError as exc:
        fail(str(exc), code=exc.exit_code)
    if fmt == "json":
        typer.echo(e.model_dump_json(indent=2))
        return
    typer.echo(f"{e.id} — {e.title}\n  {e.kind}, {e.family}, {e.severity}" + (", fatal at launch" if e.fatal_at_launch
                                                                            else ""))
    typer.echo(f"cause: {e.cause}")
    typer.echo(f"affected: versions {e.affected.versions}; methods {', '.join(e.affected.methods)}"
               + (f"; platform {e.affected.platform}" if e.affected.platform else ""))
    no_fix = f": {e.no_fix}" if e.no_fix else ""
    typer.echo(f"fixed in: {e.fixed_in}" if e.fixed_in else f"fixed in: not established{no_fix}")
    for u in e.upstream:
        first = f", first release {u.first_release}" if u.first_release else ""
        typer.echo(f"upstream: {u.repo}#{u.number} ({u.state}{first})" + (f" {u.title}" if u.title else ""))
    for r in e.remediation:
        typer.echo(f"do: {r}")
    for p in e.patterns:
        typer.echo(f"pattern: {p}")
    for s in e.sources:
        typer.echo(f"source: {s}")


@kb_app.command("search")
def kb_search(text: Annotated[str, typer.Argument(help="a log line, or words")]) -> None:
    """Entries a log line matches, or whose words contain every word given."""
    from bot.app import kb

    try:
        hits = kb.search(text)
    except SpecopsError as exc:
        fail(str(exc), code=exc.exit_code)
    if not hits:
        typer.echo("no entry matches", err=True)
        raise typer.Exit(1)
    for e in hits:
        typer.echo(f"{e.id:<52} {e.family:<18} {e.title}")


@kb_app.command("atlas")
def kb_atlas(
    line: Annotated[str, typer.Argument(help="one line of a vLLM log (an error, a warning, an exception)")],
    vllm_version: Annotated[str | None, typer.Option("--vllm-version", help="the release that printed it")] = None,
    fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text",
) -> None:
    """Where vLLM's own released source prints or raises LINE: file, function, releases, condition, flags, link."""
    from bot.app import kb

    if fmt not in ("text", "json"):
        fail(f"--format {fmt!r}: text or json")
    try:
        out = kb.atlas(line, vllm_version)
    except SpecopsError as exc:
        fail(str(exc), code=exc.exit_code)
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
    from bot.app import kb

    try:
        result = kb.check(fixtures)
    except SpecopsError as exc:
        fail(str(exc), code=exc.exit_code)
    except ValueError as exc:  # an entry that does not validate
        fail(f"the knowledge base does not load: {exc}", code=1)
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
    from bot.app import kb

    try:
        path = kb.compile_now()
    except ValueError as exc:  # an entry that does not validate
        fail(f"the knowledge base does not load: {exc}", code=1)
    except OSError as exc:
        fail(f"cannot write the compiled knowledge base: {exc}", code=1)
    typer.echo(f"wrote {path}")


@app.command("eval")
def eval_cases(
    directory: Annotated[Path, typer.Argument(help="a folder of cases: DIR/<case>/{log.txt,context.json,expect.json}")],
    fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text",
    floor: Annotated[float, typer.Option(min=0.0, max=1.0, help="exit 1 below this share of cases right")] = 0.0,
    max_false_alarms: Annotated[int, typer.Option(min=0, help="exit 1 above this many false alarms")] = 1_000_000,
) -> None:
    """Score the diagnosis on real cases: the cause its thread established, and false alarms on healthy runs."""
    from bot.app import evaluate

    try:
        result = evaluate.run(directory)
    except SpecopsError as exc:
        fail(str(exc), code=exc.exit_code)
    if fmt == "json":
        typer.echo(json.dumps(result.as_json(), indent=2, ensure_ascii=False))
    else:
        width = max(len(c.name) for c in result.cases)
        typer.echo(f"{'case':<{width}}  {'expected':<9} {'got':<9} result")
        for c in result.cases:
            typer.echo(f"{c.name:<{width}}  {c.expected_verdict or '-':<9} {c.verdict:<9} "
                       + ("ok" if c.passed else f"MISS: {c.why}"))
        typer.echo(f"\n{result.passed} of {len(result.cases)} right ({result.score * 100:.0f}%); false alarms: "
                   f"{result.false_alarms} of {len(result.healthy)} healthy case(s)")
        typer.echo("; ".join(f"{name}: {g['passed']} of {g['total']}" for name, g in result.split().items()
                             if g["total"]))
    if result.score < floor or result.false_alarms > max_false_alarms:
        typer.echo(f"specops: below the floor ({floor:.0%} right, at most {max_false_alarms} false alarm(s))", err=True)
        raise typer.Exit(1)


@app.command()
def deploy(
    profile: Annotated[str, typer.Argument(help="a profile of the config, e.g. dflash")],
    host: Annotated[str, typer.Option(help="a host of the inventory, e.g. a6000")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print every step and command; run nothing")] = False,
    fmt: Annotated[str | None, typer.Option("--format", help="md | text | slack | json")] = None,
) -> None:
    """Deploy PROFILE on HOST: pre-flight, config file, start, wait for /health, probe, first metrics, triage."""
    _host_op("deploy", host, profile, dry_run, fmt)


@app.command()
def stop(
    host: Annotated[str, typer.Option(help="a host of the inventory")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print what would be stopped; stop nothing")] = False,
    fmt: Annotated[str | None, typer.Option("--format", help="md | text | slack | json")] = None,
) -> None:
    """Stop exactly the server specops started on HOST, by its recorded PID."""
    _host_op("stop", host, None, dry_run, fmt)


@app.command()
def status(
    host: Annotated[str, typer.Option(help="a host of the inventory")],
    fmt: Annotated[str | None, typer.Option("--format", help="md | text | slack | json")] = None,
) -> None:
    """What is running on HOST and what it logged last (no probe)."""
    _host_op("status", host, None, False, fmt)


@app.command()
def unlock(
    host: Annotated[str, typer.Option(help="a host of the inventory")],
    force: Annotated[bool, typer.Option("--force", help="break a lock younger than settings.lock_stale_after")] = False,
) -> None:
    """Break HOST's deploy lock (after a crash). Shows who held it."""
    from bot.app import records

    try:
        held = records.break_lock(_config(), host, force=force)
    except SpecopsError as exc:
        fail(str(exc), code=exc.exit_code)
    if held is None:
        typer.echo(f"{host} is not locked")
        return
    typer.echo(f"lock on {host} broken (held by {held.owner} for {held.operation}, {held.age / 60:.0f} min)")


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="where to write the charts")] = Path("specops-demo"),
    fmt: Annotated[str | None, typer.Option("--format", help="md | text | slack | json")] = None,
    interactive: Annotated[bool, typer.Option("--interactive", help="then `specops chat` on the same host")] = False,
) -> None:
    """The brief's story on a simulated A6000 host (loopback only): DFlash on vLLM 0.20.1, then the fix."""
    from bot.app import ops
    from bot.present.charts import acceptance_chart
    from bot.sim.host import SimHost

    out_fmt = _pick_format(fmt)
    out.mkdir(parents=True, exist_ok=True)
    sim = SimHost(stats_interval=1.0, startup_seconds=1.0)
    typer.echo("starting the simulated A6000 host (in-process SSH server on 127.0.0.1, fake vllm and "
               "nvidia-smi)", err=True)
    try:
        sim.start()
        cfg = sim.config(port=_free_port())
        story = [
            ("The brief's setup: Qwen3.6-27B + z-lab DFlash on vLLM 0.20.1, 15 tokens, TP 2",
             "dflash-0.20.1", "dflash-0.20.1.png"),
            ("The fix: vLLM 0.26 with VLLM_USE_V2_MODEL_RUNNER=1, judged against MTP's 73.5 tok/s",
             "dflash", "dflash-fixed.png"),
        ]
        for title, profile, png in story:
            typer.echo(f"\n=== {title}\n$ specops deploy {profile} --host a6000\n", err=True)
            report = ops.deploy(ops.HostRequest(cfg, "a6000", profile, progress=_progress_printer()))
            emit(report, out_fmt)
            if report.metrics.per_position:
                typer.echo(f"chart: {acceptance_chart(report, out / png)}", err=True)
        if interactive:
            from bot.adapters.console import ChatConsole

            ChatConsole(cfg).loop()
        typer.echo("\n$ specops stop --host a6000", err=True)
        stopped = ops.stop(ops.HostRequest(cfg, "a6000"))
        typer.echo(stopped.headline, err=True)
    finally:
        sim.cleanup()


@app.command()
def chat(
    sim_host: Annotated[bool, typer.Option("--sim", help="against a simulated A6000 host, not the config")] = False,
) -> None:
    """The chat commands in a terminal: `diagnose a6000`, `deploy dflash a6000`, …"""
    from bot.adapters.console import ChatConsole

    if sim_host:
        from bot.sim.host import SimHost

        host = SimHost(stats_interval=1.0, startup_seconds=1.0)
        try:
            host.start()
            ChatConsole(host.config(port=_free_port())).loop()
        finally:
            host.cleanup()
        return
    ChatConsole(_config()).loop()


@app.command()
def serve(
    http: Annotated[bool, typer.Option("--http", help="HTTP mode (default: Socket Mode)")] = False,
    port: Annotated[int, typer.Option(
        help="the port: Slack events in HTTP mode; /healthz, /metrics and /alertmanager in both modes")] = 3000,
    bind: Annotated[str, typer.Option(help="HTTP mode: the address to listen on")] = "127.0.0.1",
    demo_host: Annotated[bool, typer.Option(
        "--demo", help="against a simulated A6000 host already running the brief's DFlash deployment")] = False,
    webhook_port: Annotated[int | None, typer.Option(
        help="Socket Mode: serve /healthz, /metrics and /alertmanager on this port instead of --port")] = None,
) -> None:
    """Run the Slack bot. Secrets come from SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET / SLACK_APP_TOKEN."""
    from bot.adapters.slack.run import StartError
    from bot.adapters.slack.run import serve as run_bot
    from bot.adapters.slack.settings import SlackSecrets

    secrets = SlackSecrets()
    missing = secrets.missing_for(http)
    if missing:
        fail(f"missing {', '.join(missing)} in the environment (see the README: Connect it to Slack)")
    sim_host = None
    try:
        if demo_host:
            from bot.app import ops
            from bot.sim.host import SimHost

            sim_host = SimHost(stats_interval=2.0, startup_seconds=1.0).start()
            cfg = sim_host.config(port=_free_port())
            cfg.slack = _config().slack if _STATE["config"] or os.environ.get("SPECOPS_CONFIG") else cfg.slack
            typer.echo("simulated host a6000: deploying the brief's dflash-0.20.1 …", err=True)
            ops.deploy(ops.HostRequest(cfg, "a6000", "dflash-0.20.1"))
        else:
            cfg = _checked_config()
        run_bot(cfg, secrets, http=http, host=bind, port=port, webhook_port=webhook_port,
                on_ready=lambda msg: typer.echo(msg, err=True))
    except StartError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot listen on {bind}:{port}: {exc.strerror or exc}")
    finally:
        if sim_host is not None:
            sim_host.cleanup()


@app.command()
def audit(
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 50,
) -> None:
    """Every command and button press: who, where, what, the plan, the result, when."""
    import time as _time

    from bot.app import records

    for e in records.audit_entries(_settings(), limit):
        when = _time.strftime("%Y-%m-%d %H:%M:%S", _time.localtime(e.started_at))
        took = f"{e.finished_at - e.started_at:.1f}s" if e.finished_at else "running"
        who = f"{e.user or '?'}" + (f"@{e.team}" if e.team else "")
        where = f" in {e.channel}" if e.channel else ""
        plan = f" plan {e.plan_id}" if e.plan_id else ""
        typer.echo(f"{e.id:>5} {when} {e.source:<7} {who}{where}: {e.text!r}{plan} -> {e.result} ({took})"
                   + (f" — {e.detail}" if e.detail else ""))


schedule_app = typer.Typer(help="The scheduled jobs: watches and daily health reports.", no_args_is_help=True)
app.add_typer(schedule_app, name="schedule")


@schedule_app.command("list")
def schedule_list() -> None:
    """The jobs in the job store (the SQLite file of settings.state), with their next run."""
    from bot.adapters.scheduler import Scheduler

    sched = Scheduler(_config()).start(paused=True)
    try:
        for job in sched.jobs():
            typer.echo(f"{job.id:<24} next {job.next_run_time}  {job.trigger}")
    finally:
        sched.shutdown()


@schedule_app.command("run")
def schedule_run(job_id: Annotated[str, typer.Argument(help="e.g. watch:a6000 or report:a6000")]) -> None:
    """Run one job now, in this terminal (incidents and reports are printed, not posted)."""
    from bot.adapters import scheduler

    cfg = _config()
    jobs = scheduler.job_ids(cfg)
    if job_id not in jobs:
        fail(f"unknown job {job_id!r}; jobs: {', '.join(sorted(jobs)) or 'none (see watch: in the config)'}")
    from bot.adapters.print_notifier import PrintNotifier
    from bot.app.health import health_report, report_period
    from bot.app.services import build_services

    svc = scheduler.install(build_services(cfg, notifier=PrintNotifier()))
    try:
        if job_id.startswith("report:"):
            # print it; never claim the period: the bot's scheduled report still posts it
            kwargs = jobs[job_id]["kwargs"]
            period = report_period(kwargs.get("cron"), kwargs.get("timezone", "UTC"))
            if svc.store.report_posted(job_id, period):
                typer.echo(f"(the report for {period} was already posted by the bot)", err=True)
            report, _ = health_report(cfg, svc.store, kwargs["host"], period)
            svc.notifier.health_report(kwargs["host"], report, None)
            return
        func = getattr(scheduler, jobs[job_id]["func"].split(":")[1])
        func(**jobs[job_id]["kwargs"])
    finally:
        svc.close()


@app.command()
def incidents(limit: Annotated[int, typer.Option(min=1, max=10_000)] = 30) -> None:
    """Incidents, newest first, with their timelines."""
    import time as _time

    from bot.app import records

    for inc in records.incidents(_settings(), limit):
        opened = _time.strftime("%Y-%m-%d %H:%M:%S", _time.localtime(inc.opened_at))
        typer.echo(f"#{inc.id} [{inc.state}] {inc.title} (key {inc.key}, opened {opened}, "
                   f"{len(inc.timeline)} event(s))")


@app.command()
def history(
    host: Annotated[str, typer.Argument(help="a host of the inventory")],
    hours: Annotated[float, typer.Option(min=0.01, max=24 * 8)] = 24.0,
    out: Annotated[Path | None, typer.Option(help="the PNG to write (default: HOST-history.png)")] = None,
) -> None:
    """The acceptance and throughput trend of HOST from its watches, as a chart."""

    from bot.app import records
    from bot.app.watch import summarize_day
    from bot.present.charts import trend_chart

    try:
        samples = records.samples(_settings(), host, hours)
    except SpecopsError as exc:
        fail(str(exc), code=exc.exit_code)
    cfg = _config_if_any()
    if cfg is not None and host not in cfg.hosts:
        from bot.config import suggest

        fail(f"unknown host {host!r}{suggest(host, cfg.hosts)}; known: {', '.join(sorted(cfg.hosts)) or 'none'}")
    if len(samples) < 2:
        fail(f"not enough watches of {host} in the last {hours:g} h ({len(samples)}); is the scheduler running?")
    day = summarize_day(samples)
    profile = cfg.profiles.get(str(samples[-1][2].get("profile"))) if cfg else None
    path = out or Path(f"{host}-history.png")
    path.write_bytes(trend_chart(host, samples, profile.baseline_tps if profile else None))
    mean = day.get("mean_acceptance")
    typer.echo(f"{host}: {day['samples']} watches, up {day['up_fraction'] * 100:.1f}%, mean acceptance "
               f"{mean:.2f}" if mean else f"{host}: {day['samples']} watches, up {day['up_fraction'] * 100:.1f}%")
    typer.echo(f"chart written to {path}")


@app.command()
def sim(
    config_out: Annotated[Path, typer.Option("--write-config", help="where to write the config for it")] = Path(
        "specops-sim.yaml"),
    fault: Annotated[str | None, typer.Option(
        help="break it as the brief's host was: vfio | driver-mismatch | no-devices | small-shm | stale-server")]
    = None,
) -> None:
    """Run the simulated A6000 host until Ctrl-C, and write a config that points at it."""
    import time

    from bot.sim.host import SimHost

    if fault is not None and fault not in SimHost.FAULTS:
        fail(f"--fault {fault!r}: choose one of {', '.join(SimHost.FAULTS)}")
    host = SimHost(stats_interval=2.0, startup_seconds=2.0)
    try:
        host.start()
        host.fault(fault)
        cfg = host.doctor_config(port=_free_port())
        config_out.write_text(cfg.model_dump_json(indent=2) + "\n")  # JSON is YAML
        typer.echo(f"simulated host a6000 on 127.0.0.1:{host.port}, root {host.root}")
        typer.echo(f"  export SPECOPS_CONFIG={config_out.resolve()}")
        typer.echo("  specops deploy dflash-0.20.1 --host a6000   # then: dflash, mtp, diagnose, status, stop")
        typer.echo("  specops doctor --host a6000                 # the host's readiness, its Proxmox side too"
                   + (f" (fault: {fault})" if fault else ""))
        typer.echo("Ctrl-C stops it (and any server it runs).")
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        host.cleanup()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


DEPLOY_FILES = ("slack-manifest.socket-mode.yaml", "slack-manifest.http.yaml", "specops.service", "Containerfile",
                "prometheus-rules.yml", "prometheus-rules.test.yml", "README.md", "specops.example.yaml")


@app.command()
def init(
    path: Annotated[Path | None, typer.Option(
        "--path", help="where to write the config (default: $XDG_CONFIG_HOME/specops/config.yaml)")] = None,
    deploy_files: Annotated[Path | None, typer.Option(
        "--deploy-files", help="write the Slack manifests, systemd unit, Containerfile and Prometheus rules here "
                               "instead")] = None,
    force: Annotated[bool, typer.Option(help="overwrite what is there")] = False,
) -> None:
    """Write a commented starting config (the example's profiles, a host to fill in), or the deploy files."""
    from bot.config import default_config_path
    from bot.paths import deploy_dir

    source = deploy_dir()
    if deploy_files is not None:
        if deploy_files.exists() and not deploy_files.is_dir():
            fail(f"--deploy-files {deploy_files} is a file: give a folder")
        clash = [n for n in DEPLOY_FILES if (deploy_files / n).exists()]
        if clash and not force:
            fail(f"{deploy_files} already has {', '.join(clash)}; --force overwrites")
        try:
            deploy_files.mkdir(parents=True, exist_ok=True)
            for name in DEPLOY_FILES:
                (deploy_files / name).write_bytes((source / name).read_bytes())
        except OSError as exc:
            fail(f"cannot write to {deploy_files}: {exc.strerror or exc}")
        for name in DEPLOY_FILES:
            typer.echo(f"wrote {deploy_files / name}")
        return
    target = (path or Path(os.environ.get("SPECOPS_CONFIG") or default_config_path())).expanduser()
    if target.exists() and not force:
        fail(f"{target} exists; --force overwrites it (or --path FILE writes elsewhere)")
    text = (source / "specops.example.yaml").read_text(encoding="utf-8")
    header = ("# Written by `specops init`. Fill in the host under `hosts:` (address, user, key), add its\n"
              "# SSH host key to known_hosts, then: `specops config check` and `specops deploy PROFILE --host\n"
              "# HOST --dry-run`.\n")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(header + text, encoding="utf-8")
        target.chmod(0o600)  # it may come to hold tokens in env values
    except OSError as exc:
        fail(f"cannot write {target}: {exc.strerror or exc}")
    typer.echo(f"wrote {target}")
    typer.echo("next: edit hosts.a6000, then `specops config check`")


config_app = typer.Typer(help="The config file: check it, show where it is.", no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("check")
def config_check(fmt: Annotated[str, typer.Option("--format", help="text | json")] = "text") -> None:
    """Validate the config: schema, cron and time zone, names that must exist, files; exit 2 on a problem."""
    from bot.app.configcheck import check

    if fmt not in ("text", "json"):
        fail(f"--format {fmt!r}: text or json")
    result = check(_STATE["config"])
    if fmt == "json":
        typer.echo(json.dumps({"path": str(result.path) if result.path else None, "ok": result.ok,
                               "problems": result.problems, "warnings": result.warnings}, indent=2))
    else:
        for w in result.warnings:
            typer.echo(f"warning: {w}", err=True)
        for p in result.problems:
            typer.echo(f"problem: {p}", err=True)
        if result.ok:
            typer.echo(f"{result.path}: ok" + (f" ({len(result.warnings)} warning(s))" if result.warnings else ""))
    if not result.ok:
        raise typer.Exit(2)


@config_app.command("path")
def config_path() -> None:
    """Which config file specops would use, and where it looks."""
    from bot.config import config_candidates, find_config

    found = find_config(_STATE["config"])
    typer.echo(str(found) if found else "none found")
    for c in config_candidates():
        note(f"looked at {c}{' (exists)' if c.is_file() else ''}")


@app.command()
def version() -> None:
    """Print the specops version."""
    from bot import __version__

    typer.echo(__version__)


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
    _STATE["json"] = _wants_json(argv)
    try:
        rc = _app_for(argv)(args=argv, prog_name="specops", standalone_mode=False)
    except Abort:
        typer.echo("specops: interrupted", err=True)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except TyperException as exc:  # a usage error: click's words (typer carries its own click), our JSON if asked
        code = int(getattr(exc, "exit_code", 2))
        if _STATE["json"]:
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
        typer.echo(f"specops: internal error: {type(exc).__name__}: {exc} (SPECOPS_DEBUG=1 shows the traceback)",
                   err=True)
        raise SystemExit(EXIT_INTERNAL) from None
    raise SystemExit(rc if isinstance(rc, int) else 0)


if __name__ == "__main__":
    main()
