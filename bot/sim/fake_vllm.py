"""A fake `vllm` executable for the simulated GPU host: the process, from its command line to its shutdown.

`python -m bot.sim.fake_vllm serve MODEL ...` parses vLLM's command line, prints what vLLM prints
(banner, non-default args, engine config, start lines, Engine and SpecDecoding stats, shutdown) and
serves /health, /v1/models, /v1/completions, /v1/chat/completions and /metrics on 127.0.0.1. The ops
tool deploys, probes, tails and scrapes it exactly as it would a real server. Acceptance follows a
small model of the known DFlash failure modes (layer-id offset, sliding-window drafters) by version.
Its parts: vllm_serve_args (the command line), vllm_acceptance, vllm_engine (the simulated engine),
vllm_http (the server), vllm_startup and vllm_log (the lines), vllm_prometheus, vllm_settings, vllm_tracebacks.

It runs as its own process on the simulated host, often from another working directory, so it and its
parts import nothing from `bot` outside them: only the standard library and PyYAML. Run as a plain script,
it finds them in the tree it sits in.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

if not __package__:  # a plain script (`python …/bot/sim/fake_vllm.py`): its parts are in the tree it sits in
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bot.signal_event import set_on_signals
from bot.sim.vllm_acceptance import DrafterFacts, acceptance_rates, drafter_facts, engine_problem
from bot.sim.vllm_engine import App, Engine
from bot.sim.vllm_http import LOOPBACK, announce_start, bind
from bot.sim.vllm_log import Log
from bot.sim.vllm_serve_args import parse_serve_args, validate_speculative
from bot.sim.vllm_settings import load_settings
from bot.sim.vllm_startup import StartupLog, engine_config_message
from bot.sim.vllm_tracebacks import DFLASH_FRAMES, StartupError


def serve(argv: list[str]) -> int:
    settings = load_settings(os.environ)
    args = parse_serve_args(argv)
    log = Log(os.getpid())
    log.info("api_server.py:1", f"vLLM server version {settings.version_text}, serving model {args.model}")
    log.info("utils.py:1", f"non-default args: {args.non_default!r}")
    if args.host not in (None, LOOPBACK, "localhost"):
        log.info("api_server.py:1", f"Simulated host: binding {LOOPBACK} instead of {args.host}", level="WARNING")
    spec = None if args.speculative is None else validate_speculative(args.speculative, settings.version)
    facts = drafter_facts(spec.model) if spec is not None and spec.method == "dflash" else DrafterFacts()
    rates = acceptance_rates(spec, facts, args.model, settings.version) if spec is not None else []
    engine = Engine(rates, settings.seed, settings.version)
    app = App(args, settings, spec, engine, log)
    set_on_signals(app.stop, (signal.SIGTERM, signal.SIGINT))  # the main thread logs the shutdown and stops
    server = bind(args.port, app)
    # serving from now on, but answering 503 until the "model" is loaded
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    try:
        log.info("core.py:1", engine_config_message(settings.version_text, args, spec), proc="EngineCore_DP0")
        problem = engine_problem(spec, facts, settings.version, settings.v2_runner)
        if problem is not None:
            raise StartupError(problem, DFLASH_FRAMES)
        if StartupLog(log, app.stop, settings.startup_seconds, settings.version).run(args, spec):
            announce_start(app)
            app.ready.set()
            while not app.stop.wait(settings.stats_interval):
                if not args.disable_log_stats:
                    for where, message in engine.tick():
                        log.info(where, message)
        log.info("launcher.py:1", "[shutdown] API server: shutdown triggered")
    finally:
        server.shutdown()
        server.server_close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    if args[:1] in (["--version"], ["-v"]):
        print(load_settings(os.environ).version_text)
        return 0
    if args[:1] != ["serve"]:
        sys.stderr.write("usage: vllm [-h] [-v] {serve} ...\nvllm: error: the fake vllm only knows `serve`\n")
        return 2
    try:
        return serve(args[1:])
    except StartupError as exc:
        sys.stdout.flush()
        sys.stderr.write(exc.render())
        sys.stderr.flush()
        return 1


if __name__ == "__main__":
    sys.exit(main())
