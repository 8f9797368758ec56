"""`specops demo`, `sim`, `chat` and `serve`: the simulated host, the console, and the Slack bot."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.adapters.cli import common
from bot.sim.ports import free_port

if TYPE_CHECKING:
    from bot.app.services import Services
    from bot.config import Config
    from bot.redact import Redactor
    from bot.sim.host import SimHost

commands = typer.Typer()  # merged into the `specops` app by cli/main.py

# what stops a simulated host: Ctrl-C, `kill`, a closed terminal. A background job of a non-interactive shell
# inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler: each is set explicitly.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A stop signal arrived: unwinds like Ctrl-C (a deploy in flight stops its server), then exits 128+signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


@contextmanager
def stops_on_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise `Stopped` in the main thread; after the first, the others are ignored so
    the cleanup (the server's PID, the SSH server, the directory) runs once and to its end.

    A handler's exception is raised wherever the main thread is; inside a finalizer or a weakref callback (the
    garbage collector running SQLAlchemy's) Python prints it and drops it, and the command would run on. A dropped
    `Stopped` is raised again a moment later (SIGALRM), until it lands where it unwinds the command."""

    def stop(signum: int, _frame: object) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise Stopped(signum)

    def dropped(unraisable: sys.UnraisableHookArgs) -> None:
        exc = unraisable.exc_value
        if not isinstance(exc, Stopped) or threading.current_thread() is not threading.main_thread():
            previous_hook(unraisable)
            return

        def again(_signum: int, _frame: object) -> None:
            raise Stopped(exc.signum)

        signal.signal(signal.SIGALRM, again)
        signal.setitimer(signal.ITIMER_REAL, 0.05)

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    previous[signal.SIGALRM] = signal.getsignal(signal.SIGALRM)
    previous_hook, sys.unraisablehook = sys.unraisablehook, dropped
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.unraisablehook = previous_hook
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _until_a_signal() -> None:
    """Sleeps until `stops_on_signals` raises. In short sleeps: the kernel may give the signal to any thread, and
    Python runs the handler in the main thread only when that thread next runs bytecode."""
    import time

    while True:
        time.sleep(0.5)


def _stopped(exc: Stopped, root: Path | None) -> typer.Exit:
    gone = f"; removed {root}" if root is not None and not root.exists() else ""
    typer.echo(f"specops: stopped ({exc.name}){gone}", err=True)
    return typer.Exit(128 + exc.signum)


@commands.command()
def demo(
    out: Annotated[Path, typer.Option(help="where to write the charts")] = Path("specops-demo"),
    fmt: Annotated[str | None, typer.Option("--format", help="md | text | slack | json")] = None,
    interactive: Annotated[bool, typer.Option("--interactive", help="then `specops chat` on the same host")] = False,
) -> None:
    """The brief's story on a simulated A6000 host (loopback only): DFlash on vLLM 0.20.1, then the fix.
    `--format json` writes one document: each deployment's report under its profile's name."""
    from bot.sim.host import SimHost

    out_fmt = common.pick_format(fmt)
    out.mkdir(parents=True, exist_ok=True)
    typer.echo("starting the simulated A6000 host (in-process SSH server on 127.0.0.1, fake vllm and "
               "nvidia-smi)", err=True)
    sim: SimHost | None = None
    try:
        with stops_on_signals():
            sim = SimHost(stats_interval=1.0, startup_seconds=1.0)
            try:
                _demo_story(sim, out, out_fmt, interactive)
            finally:
                sim.cleanup()
    except Stopped as exc:
        raise _stopped(exc, sim.root if sim else None) from None


def _demo_story(sim: SimHost, out: Path, out_fmt: str, interactive: bool) -> None:
    from bot.present.render import chart_of

    sim.start()
    cfg = sim.config(port=free_port())
    story = [
        ("The brief's setup: Qwen3.6-27B + z-lab DFlash on vLLM 0.20.1, 15 tokens, TP 2",
         "dflash-0.20.1", "dflash-0.20.1.png"),
        ("The fix: vLLM 0.26 with VLLM_USE_V2_MODEL_RUNNER=1, judged against MTP's 73.5 tok/s",
         "dflash", "dflash-fixed.png"),
    ]
    with closing(common.services(cfg)) as svc:
        reports: dict[str, object] = {}
        for title, profile, png in story:
            # before launch: what the host holds for the profile, checked against its release
            typer.echo(f"\n=== {title}\n$ specops check {profile} --host a6000\n", err=True)
            checked = _verb(svc, "check", host="a6000", profile=profile)
            if out_fmt != "json":
                common.emit(checked, out_fmt, svc.redactor)
            force = bool(getattr(checked, "refused", None))
            if force:  # deploy refuses it too; then, past the check, the collapse the check predicted
                typer.echo(f"\n$ specops deploy {profile} --host a6000\n", err=True)
                refused = _verb(svc, "deploy", host="a6000", profile=profile, dry_run=False, force=False)
                typer.echo(getattr(refused, "headline", ""), err=True)
                typer.echo("\n# deployed anyway, to see what the check predicted", err=True)
            typer.echo(f"\n$ specops deploy {profile} --host a6000{' --force' if force else ''}\n", err=True)
            report = reports[profile] = _verb(svc, "deploy", host="a6000", profile=profile, dry_run=False,
                                              force=force)
            if out_fmt != "json":
                common.emit(report, out_fmt, svc.redactor)
            chart = chart_of(report)
            if chart is not None:
                (out / png).write_bytes(chart)
                typer.echo(f"chart: {out / png}", err=True)
        if out_fmt == "json":
            _emit_json(reports, svc.redactor)
        if interactive:
            from bot.adapters.console import ChatConsole

            ChatConsole(cfg, services=svc).loop()
        typer.echo("\n$ specops stop --host a6000", err=True)
        typer.echo(getattr(_verb(svc, "stop", host="a6000", dry_run=False), "headline", ""), err=True)


def _emit_json(reports: dict[str, object], redactor: Redactor) -> None:
    """One JSON document for a script: each deployment's report under its profile's name, in the story's order."""
    import json

    from bot.present.render import render

    doc = {profile: json.loads(render(report, "json").text) for profile, report in reports.items()}
    typer.echo(redactor.text(json.dumps(doc, indent=2, ensure_ascii=False)))


def _verb(svc: Services, name: str, **options: object) -> object:
    """A verb run as its command line runs it (the demo tells the brief's story through the same commands)."""
    from bot.app.verbs import REGISTRY
    from bot.app.verbs.grammar import build_args
    from bot.app.verbs.spec import Call, owner_here

    verb = REGISTRY[name]
    return verb.run(Call(svc, owner_here(), common.progress_printer()), build_args(verb, options))


@commands.command()
def chat(
    sim_host: Annotated[bool, typer.Option("--sim", help="against a simulated A6000 host, not the config")] = False,
) -> None:
    """The chat commands in a terminal: `diagnose a6000`, `deploy dflash a6000`, …"""
    from bot.adapters.console import ChatConsole

    if sim_host:
        from bot.sim.host import SimHost

        host = SimHost(stats_interval=1.0, startup_seconds=1.0)
        try:
            with stops_on_signals():
                try:
                    host.start()
                    ChatConsole(host.config(port=free_port())).loop()
                finally:
                    host.cleanup()
        except Stopped as exc:
            raise _stopped(exc, host.root) from None
        return
    cfg = common.config()
    try:
        with stops_on_signals():
            ChatConsole(cfg).loop()
    except Stopped as exc:
        raise _stopped(exc, None) from None


@commands.command()
def serve(
    http: Annotated[bool, typer.Option("--http", help="HTTP mode (default: Socket Mode)")] = False,
    port: Annotated[int, typer.Option(
        help="the port: Slack events in HTTP mode; /healthz, /metrics and /alertmanager in both modes")] = 3000,
    bind: Annotated[str, typer.Option(help="HTTP mode: the address to listen on")] = "127.0.0.1",
    demo_host: Annotated[bool, typer.Option(
        "--demo", help="against a simulated A6000 host already running the brief's DFlash deployment")] = False,
    webhook_port: Annotated[int | None, typer.Option(
        help="Socket Mode: serve /healthz, /metrics and /alertmanager on this port instead of --port")] = None,
    start_timeout: Annotated[float, typer.Option(
        envvar="SPECOPS_START_TIMEOUT", min=0,
        help="seconds to keep retrying Slack at start (backoff 1 s, 2 s, … 30 s), then exit 69")] = 300.0,
) -> None:
    """Run the Slack bot. Secrets come from SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET / SLACK_APP_TOKEN.

    Exit status (sysexits, for a service manager): 0 stopped by a signal; 78 a config to fix (the file, a
    missing secret, a token Slack refused, an address that cannot be bound); 69 Slack unavailable for the whole
    --start-timeout; 75 the port is in use."""
    from bot.adapters.slack.run import serve as run_bot
    from bot.adapters.slack.settings import SlackSecrets
    from bot.adapters.slack.startup import Backoff
    from bot.errors import EX_CONFIG, StartError

    secrets = SlackSecrets()
    missing = secrets.missing_for(http)
    if missing:
        common.fail(f"missing {', '.join(missing)} in the environment (see the README: Connect it to Slack)",
                    code=EX_CONFIG)
    sim_host: SimHost | None = None
    try:
        if demo_host:
            from bot.sim.host import SimHost

            sim_host = SimHost(stats_interval=2.0, startup_seconds=1.0)
            with stops_on_signals():  # until the bot's own handlers: the deploy below stops on a signal too
                cfg = _demo_host(sim_host)
        else:
            cfg = common.checked_config(EX_CONFIG)
        run_bot(cfg, secrets, http=http, host=bind, port=port, webhook_port=webhook_port,
                on_ready=lambda msg: typer.echo(msg, err=True), backoff=Backoff(budget=start_timeout))
    except Stopped as exc:
        raise _stopped(exc, None) from None
    except StartError as exc:
        common.fail(str(exc), code=exc.exit_code)
    finally:
        if sim_host is not None:
            sim_host.cleanup()


def _demo_host(sim_host: SimHost) -> Config:
    """The simulated host started, already serving the brief's DFlash deployment, and a config for it (the Slack
    settings of the user's config, if there is one)."""
    sim_host.start()
    cfg = sim_host.config(port=free_port())
    if common.STATE["config"] or os.environ.get("SPECOPS_CONFIG"):
        cfg.slack = common.config().slack
    typer.echo("simulated host a6000: deploying the brief's dflash-0.20.1 (--force: its checks before launch refuse "
               "it) …", err=True)
    with closing(common.services(cfg)) as svc:
        _verb(svc, "deploy", host="a6000", profile="dflash-0.20.1", dry_run=False, force=True)
    return cfg


@commands.command()
def sim(
    config_out: Annotated[Path, typer.Option("--write-config", help="where to write the config for it")] = Path(
        "specops-sim.yaml"),
    fault: Annotated[str | None, typer.Option(
        help="break it as the brief's host was: vfio | driver-mismatch | no-devices | small-shm | stale-server")]
    = None,
    hosts: Annotated[int, typer.Option(
        "--hosts", help="how many simulated hosts (1 to 8): a6000, a6000-b, …, each its own SSH port, GPU facts and "
                        "vLLM port; the config's group a6000s holds them all (--fault breaks a6000)")] = 1,
) -> None:
    """Run the simulated A6000 host (or --hosts N of them) until Ctrl-C, and write a config that points at it."""
    from bot.sim.fleet import MAX_HOSTS
    from bot.sim.host import SimHost

    if fault is not None and fault not in SimHost.FAULTS:
        common.fail(f"--fault {fault!r}: choose one of {', '.join(SimHost.FAULTS)}")
    if not 1 <= hosts <= MAX_HOSTS:
        common.fail(f"--hosts {hosts}: a simulated fleet has 1 to {MAX_HOSTS} hosts")
    if hosts > 1:
        _sim_fleet(hosts, config_out, fault)
        return
    host: SimHost | None = None
    try:
        with stops_on_signals():
            host = SimHost(stats_interval=2.0, startup_seconds=2.0)
            try:
                host.start()
                host.fault(fault)
                cfg = host.doctor_config(port=free_port())
                config_out.write_text(cfg.model_dump_json(indent=2) + "\n")  # JSON is YAML
                typer.echo(f"simulated host a6000 on 127.0.0.1:{host.port}, root {host.root}")
                typer.echo(f"  export SPECOPS_CONFIG={config_out.resolve()}")
                typer.echo("  specops check dflash-0.20.1 --host a6000    # refused before launch (deploy --force)")
                typer.echo("  specops deploy dflash --host a6000          # then: mtp, diagnose, status, stop")
                typer.echo("  specops doctor --host a6000                 # the host's readiness, its Proxmox side "
                           "too" + (f" (fault: {fault})" if fault else ""))
                typer.echo("Ctrl-C stops it (and any server it runs); so do SIGTERM and SIGHUP.", nl=True)
                _until_a_signal()
            finally:
                host.cleanup()
    except Stopped as exc:
        raise _stopped(exc, host.root if host else None) from None


def _sim_fleet(n: int, config_out: Path, fault: str | None) -> None:
    """`specops sim --hosts N`: N simulated hosts, one config with all of them, the group and their ports."""
    from bot.sim.fleet import GROUP, SimFleet

    fleet: SimFleet | None = None
    try:
        with stops_on_signals():
            fleet = SimFleet(n, stats_interval=2.0, startup_seconds=2.0)
            try:
                fleet.start()
                fleet.hosts[0].fault(fault)
                cfg = fleet.config(doctor=True)
                config_out.write_text(cfg.model_dump_json(indent=2) + "\n")  # JSON is YAML
                typer.echo(f"{n} simulated hosts, group {GROUP}: {', '.join(fleet.names)}")
                for h in fleet.hosts:
                    typer.echo(f"  {h.name:<8} SSH 127.0.0.1:{h.port}, vLLM port {fleet.vllm_ports[h.name]}, "
                               f"root {h.root}" + (f" (fault: {fault})" if fault and h is fleet.hosts[0] else ""))
                typer.echo(f"  export SPECOPS_CONFIG={config_out.resolve()}")
                typer.echo("  specops deploy mtp --host a6000-b   # any host; then: dflash, diagnose, status, stop")
                typer.echo("  specops doctor --host a6000-c       # each host's readiness, its Proxmox side too")
                typer.echo("Ctrl-C stops them (and any server they run); so do SIGTERM and SIGHUP.", nl=True)
                _until_a_signal()
            finally:
                fleet.cleanup()
    except Stopped as exc:
        gone = [str(r) for r in fleet.roots if not r.exists()] if fleet else []
        typer.echo(f"specops: stopped ({exc.name})" + (f"; removed {', '.join(gone)}" if gone else ""), err=True)
        raise typer.Exit(128 + exc.signum) from None
