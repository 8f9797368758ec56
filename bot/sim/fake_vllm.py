"""A fake `vllm` executable for the simulated GPU host.

`python -m bot.sim.fake_vllm serve MODEL ...` parses vLLM's command line, prints what vLLM prints
(banner, non-default args, engine config, start lines, Engine and SpecDecoding stats, shutdown) and
serves /health, /v1/models, /v1/completions, /v1/chat/completions and /metrics on 127.0.0.1. The ops
tool deploys, probes, tails and scrapes it exactly as it would a real server. Acceptance follows a
small model of the known DFlash failure modes (layer-id offset, sliding-window drafters) by version.

It runs as its own process on the simulated host, often from another working directory, so it
imports nothing from `bot`: only the standard library and PyYAML.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import random
import re
import signal
import socketserver
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

Version = tuple[int, int, int]
Frame = tuple[str, int, str, str]  # file, line, function, source: one traceback entry

DEFAULT_VERSION = "0.20.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_MODEL_LEN = 32768  # a real server reads this from the model; any sane value will do here
LOOPBACK = "127.0.0.1"

# vLLM 0.32's Literal for SpeculativeConfig.method, in its order (the error message lists them so).
SPEC_METHODS: tuple[str, ...] = (
    "ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "eagle", "eagle3", "mtp", "dflash",
    "ngram_gpu", "dspark",
)
DRAFTER_METHODS = frozenset({"dflash", "eagle", "eagle3", "draft_model", "medusa", "mlp_speculator"})
DFLASH_FIRST_RELEASE: Version = (0, 20, 0)

# z-lab/Qwen3.6-27B-DFlash as published (its config.json is gated, so the facts are built in).
QWEN36_DRAFTER_SUFFIX = "Qwen3.6-27B-DFlash"
QWEN36_LAYER_TYPES: tuple[str, ...] = ("sliding_attention",) * 4 + ("full_attention",)
QWEN36_TARGET_LAYER_IDS: tuple[int, ...] = (1, 16, 31, 46, 61)

MIXED_SWA_025 = (
    "NotImplementedError: DFlash does not yet support mixed sliding/full attention via layer_types; "
    "see https://github.com/vllm-project/vllm/issues/40898."
)
MIXED_SWA_026 = (
    "NotImplementedError: DFlash drafters with mixed sliding/full attention require the V2 model runner; "
    "relaunch with VLLM_USE_V2_MODEL_RUNNER=1."
)

# Marginal acceptance rate at position i is first * ratio**i (DFlash has its own rules below).
GEOMETRIC_RATES: dict[str, tuple[float, float]] = {
    "mtp": (0.95, 0.87),  # mean ~3.5 at 3 tokens: ~75 tok/s for one request, the brief's MTP (73.5)
    "eagle": (0.80, 0.75),
    "eagle3": (0.80, 0.75),
    "medusa": (0.80, 0.75),
    "mlp_speculator": (0.80, 0.75),
    "dspark": (0.80, 0.75),
    "ngram": (0.60, 0.70),
    "ngram_gpu": (0.60, 0.70),
    "suffix": (0.60, 0.70),
}
# Cost of one decode step relative to plain decoding (1.0) at REFERENCE_K speculative tokens: the
# drafter's forward pass is not free. See step_cost for how it grows with k.
STEP_COST: dict[str, float] = {
    "dflash": 1.7, "dspark": 1.7, "mtp": 1.4, "eagle": 1.4, "eagle3": 1.4, "medusa": 1.4,
    "mlp_speculator": 1.4, "draft_model": 1.5, "ngram": 1.1, "ngram_gpu": 1.1, "suffix": 1.1,
}
REFERENCE_K = 3
# Block drafters draft the whole block in one forward pass: their step cost does not depend on k. DFlash's 1.7 is
# the triage model's cost at the brief's k = 15 (docs/ACCEPTANCE.md), so the simulated host and the estimate agree.
BLOCK_DRAFTERS = frozenset({"dflash", "dspark"})
KV_CAPACITY_TOKENS = 65536  # only scales the KV-usage gauge
PACE_SLICE_SECONDS = 0.1

# Flags vLLM knows as booleans: without this a flag written before the model would swallow it.
BOOLEAN_FLAGS = frozenset({
    "--trust-remote-code", "--enable-prefix-caching", "--no-enable-prefix-caching",
    "--enable-chunked-prefill", "--no-enable-chunked-prefill", "--disable-log-requests",
    "--enable-log-requests", "--enable-auto-tool-choice", "--disable-custom-all-reduce",
    "--disable-frontend-multiprocessing", "--skip-tokenizer-init", "--enable-expert-parallel",
})

# Where the fake's tracebacks claim to come from: a typical pip install of vLLM.
VLLM_DIR = "/usr/local/lib/python3.12/dist-packages/vllm"
CLI_FRAMES: tuple[Frame, ...] = (
    ("/usr/local/bin/vllm", 10, "<module>", "sys.exit(main())"),
    (f"{VLLM_DIR}/entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
    (f"{VLLM_DIR}/entrypoints/cli/serve.py", 60, "cmd", "uvloop.run(run_server(args))"),
)
CONFIG_FRAMES: tuple[Frame, ...] = (
    (f"{VLLM_DIR}/utils/argparse_utils.py", 1, "parse_args", "args = self._pull_args_from_config(args)"),
    (f"{VLLM_DIR}/utils/argparse_utils.py", 1, "load_config_file", "raise ValueError("),
)
SPEC_FRAMES: tuple[Frame, ...] = (
    (f"{VLLM_DIR}/engine/arg_utils.py", 1, "create_engine_config",
     "speculative_config = self.create_speculative_config("),
    (f"{VLLM_DIR}/engine/arg_utils.py", 1, "create_speculative_config",
     "return SpeculativeConfig(**self.speculative_config)"),
)
BIND_FRAMES: tuple[Frame, ...] = (
    (f"{VLLM_DIR}/entrypoints/openai/api_server.py", 1, "setup_server", "sock = create_server_socket(sock_addr)"),
    (f"{VLLM_DIR}/entrypoints/openai/api_server.py", 1, "create_server_socket", "sock.bind(addr)"),
)
DFLASH_FRAMES: tuple[Frame, ...] = (
    (f"{VLLM_DIR}/v1/engine/core.py", 1, "__init__", "self.model_executor = executor_class(vllm_config)"),
    (f"{VLLM_DIR}/v1/spec_decode/dflash.py", 1, "__init__", "raise NotImplementedError("),
)


class StartupError(Exception):
    """A failure vLLM reports as a Python traceback on stderr before exiting with status 1."""

    def __init__(self, final: str, frames: Sequence[Frame] = ()) -> None:
        super().__init__(final)
        self.final = final
        self.frames = tuple(frames)

    def render(self) -> str:
        lines = ["Traceback (most recent call last):"]
        for path, line, func, source in (*CLI_FRAMES, *self.frames):
            lines.append(f'  File "{path}", line {line}, in {func}')
            lines.append(f"    {source}")
        lines.append(self.final)
        return "\n".join(lines) + "\n"


# --- environment --------------------------------------------------------------------------------

def parse_version(text: str) -> Version:
    """'0.20.1', '0.32.0+cpu', '0.26.0rc1' -> (major, minor, patch); unreadable -> the default."""
    m = re.match(r"\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", text)
    if not m:
        return parse_version(DEFAULT_VERSION)
    return (int(m[1]), int(m[2] or 0), int(m[3] or 0))


def env_float(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        value = float(env.get(name, ""))
    except ValueError:
        return default
    return value if math.isfinite(value) else default


@dataclass(frozen=True)
class Settings:
    version_text: str
    version: Version
    startup_seconds: float
    stats_interval: float
    base_tps: float
    max_request_seconds: float
    seed: int
    control_path: str | None
    v2_runner: bool


def load_settings(env: Mapping[str, str]) -> Settings:
    version_text = env.get("SPECOPS_SIM_VLLM_VERSION") or DEFAULT_VERSION
    try:
        seed = int(env.get("SPECOPS_SIM_SEED", "0"))
    except ValueError:
        seed = 0
    return Settings(
        version_text=version_text,
        version=parse_version(version_text),
        startup_seconds=max(0.0, env_float(env, "SPECOPS_SIM_STARTUP_SECONDS", 2.0)),
        # a zero or negative interval would spin the stats loop
        stats_interval=max(0.05, env_float(env, "VLLM_LOG_STATS_INTERVAL", 10.0)),
        base_tps=max(1e-3, env_float(env, "SPECOPS_SIM_BASE_TPS", 30.0)),
        max_request_seconds=max(0.0, env_float(env, "SPECOPS_SIM_MAX_REQUEST_SECONDS", 5.0)),
        seed=seed,
        control_path=env.get("SPECOPS_SIM_CONTROL") or None,
        v2_runner=env.get("VLLM_USE_V2_MODEL_RUNNER") == "1",
    )


@dataclass(frozen=True)
class Control:
    acceptance_scale: float = 1.0
    fail_health: bool = False


def read_control(path: str | None) -> Control:
    """Knobs for a running sim (inject a collapse, fail /health). Read fresh on every use, so a test
    or the demo flips them by rewriting the file; a missing or broken file means the defaults."""
    if not path:
        return Control()
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return Control()
    if not isinstance(data, dict):
        return Control()
    scale = data.get("acceptance_scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale) or scale < 0:
        scale = 1.0
    return Control(acceptance_scale=float(scale), fail_health=data.get("fail_health") is True)


# --- log lines ----------------------------------------------------------------------------------

class Log:
    """vLLM's line format on stdout. One lock, so lines from request threads never interleave."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._lock = threading.Lock()

    def emit(self, text: str) -> None:
        with self._lock:
            try:
                sys.stdout.write(text + "\n")
                sys.stdout.flush()  # the ops tool tails the file: every line must land at once
            except (OSError, ValueError):
                pass  # a vanished log reader must not take the server down with it

    def info(self, where: str, message: str, proc: str = "APIServer", level: str = "INFO") -> None:
        stamp = time.strftime("%m-%d %H:%M:%S")
        self.emit(f"({proc} pid={self.pid}) {level} {stamp} [{where}] {message}")

    def uvicorn(self, message: str) -> None:
        self.emit(f"(APIServer pid={self.pid}) INFO:     {message}")

    def partial(self, text: str) -> None:
        """A progress bar mid-way: tqdm redraws it with \\r and ends the line only when it is done."""
        with self._lock:
            try:
                sys.stdout.write(text + "\r")
                sys.stdout.flush()
            except (OSError, ValueError):
                pass


# --- startup: vLLM's own lines, phase by phase ----------------------------------------------------
# The shares of SPECOPS_SIM_STARTUP_SECONDS each phase takes; its lines are the real forms (quoted with
# where they were seen in tests/core/test_startup_phases.py). --enforce-eager skips torch.compile and CUDA
# graphs, ngram has no drafter to load; what is skipped is not waited for.
STARTUP_SHARES = {"start": 0.05, "weights": 0.3, "drafter": 0.1, "compile": 0.25, "kv_cache": 0.1,
                  "cudagraph": 0.15, "api": 0.05}


def startup_phases(args: ServeArgs, spec: SpecConfig | None) -> dict[str, float]:
    """Each phase's share of the startup time, those that do not happen left out, the rest scaled up."""
    skipped = set()
    if args.enforce_eager:
        skipped |= {"compile", "cudagraph"}
    if spec is None or spec.method == "ngram":
        skipped.add("drafter")
    kept = {k: v for k, v in STARTUP_SHARES.items() if k not in skipped}
    total = sum(kept.values())
    return {k: v / total for k, v in kept.items()}


class StartupLog:
    """What a starting vLLM prints while it loads, compiles and sizes its cache, with the waits between;
    a stop (SIGTERM) during the start ends it at once."""

    def __init__(self, log: Log, stop: threading.Event, seconds: float, v: Version) -> None:
        self.log, self.stop, self.seconds, self.v = log, stop, seconds, v
        self.loaded = 0.0  # seconds spent loading weights so far: "Model loading took" counts the drafter's too

    def wait(self, share: float) -> bool:
        """False when the server was told to stop meanwhile."""
        return not self.stop.wait(self.seconds * share)

    def engine(self, where: str, message: str) -> None:
        self.log.info(where, message, proc="EngineCore_DP0")

    def run(self, args: ServeArgs, spec: SpecConfig | None) -> bool:
        """Every phase in order; False when told to stop before the end."""
        shares = startup_phases(args, spec)
        steps: dict[str, Callable[[float], bool]] = {
            "start": self.wait, "weights": lambda share: self.weights(args, share, shares), "drafter": self.drafter,
            "compile": self.compile, "kv_cache": lambda share: self.kv_cache(args, share),
            "cudagraph": self.cudagraph, "api": self.api}
        return all(steps[key](share) for key, share in shares.items())

    def weights(self, args: ServeArgs, share: float, shares: dict[str, float]) -> bool:
        took = self.seconds * share
        self.engine("gpu_model_runner.py:1", f"Starting to load model {args.model}...")
        if not self.wait(share * 0.9):
            return False
        self.log.emit(f"Loading safetensors checkpoint shards: 100% Completed | 11/11 [00:{int(took):02d}<00:00, "
                      f"{11 / max(took, 1e-3):.2f}it/s]")
        if not self.wait(share * 0.1):
            return False
        self.engine("default_loader.py:1", f"Loading weights took {took:.2f} seconds")
        self.loaded = took
        if "drafter" not in shares:
            self.engine("gpu_model_runner.py:1", f"Model loading took 51.24 GiB memory and {took:.6f} seconds")
        return True

    def drafter(self, share: float) -> bool:
        self.engine("gpu_model_runner.py:1", "Loading drafter model...")
        if not self.wait(share):
            return False
        took = self.seconds * share
        self.engine("default_loader.py:1", f"Loading weights took {took:.2f} seconds")
        self.engine("gpu_model_runner.py:1",
                    f"Model loading took 52.87 GiB memory and {self.loaded + took:.6f} seconds")
        return True

    def compile(self, share: float) -> bool:
        took = self.seconds * share
        self.engine("backends.py:1", "Using cache directory: /root/.cache/vllm/torch_compile_cache/5c1b2270cd/"
                                     "rank_0_0/backbone for vLLM's torch.compile")
        if not self.wait(share * 0.3):
            return False
        self.engine("backends.py:1", f"Dynamo bytecode transform time: {took * 0.3:.2f} s")
        if not self.wait(share * 0.7):
            return False
        verb = "took" if self.v >= (0, 12, 0) else "takes"
        self.engine("monitor.py:1", f"torch.compile {verb} {took:.2f} s in total")
        return True

    def kv_cache(self, args: ServeArgs, share: float) -> bool:
        if not self.wait(share):
            return False
        self.engine("gpu_worker.py:1", "Available KV cache memory: 7.42 GiB")
        self.engine("kv_cache_utils.py:1", "GPU KV cache size: 121,296 tokens")
        concurrency = 121296 / max(args.max_model_len, 1)
        self.engine("kv_cache_utils.py:1",
                    f"Maximum concurrency for {args.max_model_len:,} tokens per request: {concurrency:.2f}x")
        return True

    def cudagraph(self, share: float) -> bool:
        self.log.partial("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/51 "
                         "[00:00<?, ?it/s]")
        if not self.wait(share):
            return False
        took = self.seconds * share
        self.log.emit(f"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 51/51 "
                      f"[00:{int(took):02d}<00:00, {51 / max(took, 1e-3):.2f}it/s]")
        self.engine("gpu_model_runner.py:1", f"Graph capturing finished in {took:.0f} secs, took 0.54 GiB")
        return True

    def api(self, share: float) -> bool:
        self.engine("core.py:1", f"init engine (profile, create kv cache, warmup model) took {self.seconds:.2f} "
                                 "seconds")
        return self.wait(share)


def spec_metrics_line(v: Version) -> int:
    """[file:line] of the SpecDecoding line by release; the ops tool reads it as a version hint."""
    if v >= (0, 24, 0):
        return 120
    if v >= (0, 19, 0):
        return 101
    return 100 if v >= (0, 12, 0) else 96


def engine_stats_line(v: Version) -> int:
    if v >= (0, 24, 0):
        return 273
    if v >= (0, 20, 0):
        return 271
    return 259 if v >= (0, 12, 0) else 127


def start_message(v: Version, port: int) -> str:
    url = f"http://{LOOPBACK}:{port}"
    if v >= (0, 18, 0):
        return f"Starting vLLM server on {url}"
    if v >= (0, 9, 2):
        return f"Starting vLLM API server 0 on {url}"
    return f"Starting vLLM API server on {url}"


# --- command line -------------------------------------------------------------------------------

@dataclass
class ServeArgs:
    model: str
    served_names: list[str]
    host: str | None
    port: int
    speculative: object | None  # parsed JSON; validated later, as vLLM's pydantic model does
    tensor_parallel_size: int
    max_model_len: int
    dtype: str
    enforce_eager: bool
    disable_log_stats: bool
    non_default: dict[str, object]


def json_arg(value: str) -> object:
    """vLLM's type for JSON options; its failure text is what a shell-mangled argument produces."""
    try:
        return json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"Value {value} cannot be converted to {json.loads!r}.") from exc


def build_parser() -> tuple[argparse.ArgumentParser, frozenset[str]]:
    """The options the fake models, in vLLM's order (it shows in `non-default args`)."""
    parser = argparse.ArgumentParser(prog="vllm serve", allow_abbrev=False)
    known: set[str] = set()

    def add(*names: str, **kwargs: Any) -> None:
        parser.add_argument(*names, **kwargs)
        known.update(n for n in names if n.startswith("--"))

    parser.add_argument("model_tag", nargs="?", default=None, help="the model to serve")
    add("--config", default=None, help="YAML file of options; the command line overrides it")
    add("--host", default=None)
    add("--port", type=int, default=DEFAULT_PORT)
    add("--model", default=None)
    add("--dtype", default="auto")
    add("--max-model-len", type=int, default=None)
    add("--enforce-eager", action="store_true")
    add("--served-model-name", nargs="+", default=None)
    add("--tensor-parallel-size", "-tp", type=int, default=1)
    add("--gpu-memory-utilization", type=float, default=0.9)
    add("--max-num-batched-tokens", type=int, default=None)
    add("--attention-backend", default=None)
    add("--speculative-config", "-sc", type=json_arg, default=None)
    add("--disable-log-stats", action="store_true")
    return parser, frozenset(known)


def config_args(path: str) -> list[str]:
    """vLLM's `load_config_file`: YAML options -> argv. A nested mapping becomes JSON (for JSON-typed
    options), `true` a bare flag, a list repeated values."""
    if not path.endswith((".yaml", ".yml")):
        extension = path.rsplit(".", 1)[-1]
        raise StartupError(f"ValueError: Config file must be of a yaml/yml type. {extension} supplied",
                           CONFIG_FRAMES)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise StartupError(f"{type(exc).__name__}: {exc}", CONFIG_FRAMES[:1]) from exc
    except yaml.YAMLError as exc:
        raise StartupError(f"{type(exc).__module__}.{type(exc).__name__}: {exc}", CONFIG_FRAMES[:1]) from exc
    if data is None:
        return []
    if not isinstance(data, dict):
        raise StartupError(f"ValueError: Config file {path} must be a mapping of option names to values",
                           CONFIG_FRAMES[:1])
    out: list[str] = []
    for key, value in data.items():
        option = "--" + str(key).replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            out.append(option)
        elif isinstance(value, dict):
            out += [option, json.dumps(value)]
        elif isinstance(value, list):
            out += [option, *(str(v) for v in value)]
        else:
            out += [option, str(value)]
    return out


def expand_config(argv: list[str]) -> list[str]:
    """Splice `--config FILE` in where vLLM does: right after the model, so that the command line,
    parsed later, wins (argparse keeps the last value)."""
    for i, token in enumerate(argv):
        if token == "--config" and i + 1 < len(argv):
            path, rest = argv[i + 1], argv[:i] + argv[i + 2:]
        elif token.startswith("--config="):
            path, rest = token.partition("=")[2], argv[:i] + argv[i + 1:]
        else:
            continue
        extra = config_args(path)
        if rest and not rest[0].startswith("-"):
            return [rest[0], *extra, *rest[1:]]
        return [*extra, *rest]
    return argv


_NUMBER_RE = re.compile(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


def _is_option(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not _NUMBER_RE.fullmatch(token)


def _coerce(text: str) -> object:
    """Numbers as vLLM's typed options would hold them (they show in `non-default args`)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def split_unknown(tokens: list[str], known: frozenset[str]) -> tuple[list[str], dict[str, object]]:
    """Take out the options the fake does not model (vLLM has hundreds; the ops tool may pass any).
    An option followed by no value is a boolean flag."""
    kept: list[str] = []
    extras: dict[str, object] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token == "--":
            kept += tokens[i - 1:]
            break
        if not token.startswith("--") or len(token) == 2:
            kept.append(token)
            continue
        name, eq, value = token.partition("=")
        option = "--" + name[2:].replace("_", "-")  # vLLM takes --max_model_len too
        if option in known:
            kept.append(option + eq + value)
            continue
        key = option[2:].replace("-", "_")
        if eq:
            extras[key] = _coerce(value)
            continue
        values: list[object] = []
        while option not in BOOLEAN_FLAGS and i < len(tokens) and not _is_option(tokens[i]):
            values.append(_coerce(tokens[i]))
            i += 1
        extras[key] = True if not values else values[0] if len(values) == 1 else values
    return kept, extras


def parse_serve_args(argv: list[str]) -> ServeArgs:
    parser, known = build_parser()
    kept, extras = split_unknown(expand_config(argv), known)
    ns = parser.parse_args(kept)
    if ns.model_tag is not None:
        ns.model = ns.model_tag  # vLLM copies the positional into --model before logging the args
    if ns.model is None:
        parser.error("the following arguments are required: model_tag")
    non_default = {k: v for k, v in vars(ns).items() if k != "config" and v != parser.get_default(k)}
    non_default.update(extras)
    model = str(ns.model)
    return ServeArgs(
        model=model,
        served_names=[str(n) for n in ns.served_model_name] if ns.served_model_name else [model],
        host=ns.host,
        port=int(ns.port),
        speculative=ns.speculative_config,
        tensor_parallel_size=int(ns.tensor_parallel_size),
        max_model_len=int(ns.max_model_len or DEFAULT_MAX_MODEL_LEN),
        dtype=str(ns.dtype),
        enforce_eager=bool(ns.enforce_eager),
        disable_log_stats=bool(ns.disable_log_stats),
        non_default=non_default,
    )


# --- speculative config -------------------------------------------------------------------------

@dataclass(frozen=True)
class SpecConfig:
    method: str
    model: str | None
    num_tokens: int


def known_methods(version: Version) -> tuple[str, ...]:
    # releases before DFlash landed do not list it, so they refuse it as an unknown method
    return SPEC_METHODS if version >= DFLASH_FIRST_RELEASE else tuple(m for m in SPEC_METHODS if m != "dflash")


def validation_error(body: str, kind: str) -> StartupError:
    """pydantic's ValidationError text, as vLLM's SpeculativeConfig raises it."""
    return StartupError(
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n"
        f"{body}\n    For further information visit https://errors.pydantic.dev/2.12/v/{kind}",
        SPEC_FRAMES,
    )


def _input(value: object) -> str:
    return f"input_value={value!r}, input_type={type(value).__name__}"


def _infer_method(model: str) -> str:
    # vLLM guesses the method from the drafter's name when none is given
    lower = model.lower()
    if "eagle3" in lower:
        return "eagle3"
    if "eagle" in lower:
        return "eagle"
    return "draft_model"


def _token_count(raw: Mapping[str, object], method: str) -> int:
    value = raw.get("num_speculative_tokens")
    if value is None:
        return 15 if method == "dflash" else 1  # DFlash drafts a 16-token block: 15 speculative tokens
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise validation_error(
            f"num_speculative_tokens\n  Input should be a valid integer [type=int_type, {_input(value)}]", "int_type")
    if value < 1:
        raise validation_error(
            f"num_speculative_tokens\n  Input should be greater than 0 [type=greater_than, {_input(value)}]",
            "greater_than")
    return value


def validate_speculative(raw: object, version: Version) -> SpecConfig:
    """vLLM's SpeculativeConfig checks, with pydantic's words."""
    if not isinstance(raw, dict):
        raise validation_error(
            f"  Input should be a valid dictionary or instance of SpeculativeConfig [type=model_type, {_input(raw)}]",
            "model_type")
    model = raw.get("model")
    method = raw.get("method")
    if method is None and model is not None:
        method = _infer_method(str(model))
    methods = known_methods(version)
    if method is not None and method not in methods:
        allowed = ", ".join(repr(m) for m in methods[:-1]) + f" or {methods[-1]!r}"
        raise validation_error(
            f"method\n  Input should be {allowed} [type=literal_error, {_input(method)}]", "literal_error")
    if model is None and (method is None or method in DRAFTER_METHODS):
        raise validation_error(
            "  Value error, num_speculative_tokens was provided but without speculative model. "
            f"[type=value_error, input_value=ArgsKwargs((), {raw!r}), input_type=ArgsKwargs]", "value_error")
    method_name = str(method)
    return SpecConfig(method_name, None if model is None else str(model), _token_count(raw, method_name))


# --- drafter facts and the acceptance model -----------------------------------------------------

@dataclass(frozen=True)
class DrafterFacts:
    layer_types: tuple[str, ...] = ()  # empty: all full attention
    target_layer_ids: tuple[int, ...] | None = None
    published_ids: tuple[int, ...] | None = None  # z-lab's ids for this drafter, when we know them

    @property
    def mixed(self) -> bool:
        types = self.layer_types
        return "sliding_attention" in types and any(t != "sliding_attention" for t in types)


def _is_qwen36_drafter(name: str) -> bool:
    return name.rstrip("/").endswith(QWEN36_DRAFTER_SUFFIX)


def _read_drafter_config(drafter: str) -> dict[str, Any] | None:
    if not drafter or not Path(drafter).is_dir():
        return None
    try:
        data = json.loads((Path(drafter) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no readable config: fall back to what the name tells
    return data if isinstance(data, dict) else None


def drafter_facts(drafter: str | None) -> DrafterFacts:
    """A local drafter directory's config.json wins; else the built-in z-lab facts by name."""
    name = drafter or ""
    config = _read_drafter_config(name)
    # a local copy may sit under any name: its config's `_name_or_path` still says where it came from
    origin = str(config.get("_name_or_path", "")) if config is not None else ""
    known = _is_qwen36_drafter(name) or _is_qwen36_drafter(origin)
    published = QWEN36_TARGET_LAYER_IDS if known else None
    if config is None:
        if known:
            return DrafterFacts(QWEN36_LAYER_TYPES, QWEN36_TARGET_LAYER_IDS, published)
        return DrafterFacts()
    raw_types = config.get("layer_types")
    types = tuple(str(t) for t in raw_types) if isinstance(raw_types, list) else ()
    dflash = config.get("dflash_config")
    raw_ids = dflash.get("target_layer_ids") if isinstance(dflash, dict) else None
    ids = tuple(raw_ids) if isinstance(raw_ids, list) and all(type(i) is int for i in raw_ids) else None
    return DrafterFacts(types, ids, published)


def layer_offset(facts: DrafterFacts) -> str:
    """'published': z-lab's ids as shipped; 'shifted': +1 by hand (the pre-0.22.0 workaround)."""
    if facts.published_ids is None or facts.target_layer_ids is None:
        return "unknown"
    if facts.target_layer_ids == facts.published_ids:
        return "published"
    if facts.target_layer_ids == tuple(i + 1 for i in facts.published_ids):
        return "shifted"
    return "other"


def engine_problem(spec: SpecConfig | None, facts: DrafterFacts, version: Version, v2_runner: bool) -> str | None:
    """The NotImplementedError a release raises when it builds a mixed sliding/full DFlash drafter."""
    if spec is None or spec.method != "dflash" or not facts.mixed:
        return None
    if version[:2] == (0, 25):
        return MIXED_SWA_025
    if version >= (0, 26, 0) and not v2_runner:
        return MIXED_SWA_026
    return None


def step_cost(method: str | None, k: int) -> float:
    """One decode step's cost relative to plain decoding, for `method` drafting `k` tokens.

    The tok/s model: a step emits 1 + (accepted draft tokens) tokens, on average 1 + sum of the marginal
    acceptance rates of positions 0..k-1 (each decaying with position), and costs
    1 + a*k + a*k**2/9 units of base_tps time: a*k is drafting (one drafter pass a token), a*k**2/9 the
    target's extra work verifying a longer draft (attention over the draft, rejected tokens' KV). `a` is set
    so that the cost at k = REFERENCE_K (3) is the method's STEP_COST. Expected tokens grow ever slower with k
    while the cost grows faster, so tok/s peaks inside 1..8: for MTP at k = 4 (1.8x, 2.2x, 2.6x, 2.4x plain
    decoding at k = 1, 2, 4, 8), for ngram at k = 4 too. Block drafters (DFlash) pay one pass for the block.
    """
    base = STEP_COST.get(method or "", 1.0) if method else 1.0
    if method in BLOCK_DRAFTERS or base == 1.0:
        return base
    g = float(k + k * k / 9)
    a = (base - 1.0) / (REFERENCE_K + REFERENCE_K**2 / 9)
    return 1.0 + a * g


# What one more token in a forward costs, relative to one decode step of one request. A step with b requests
# running carries b tokens plainly and b·(k + 1) with speculation, so the verified tokens cost more the more
# requests share the forward and the best k falls with the load, as on a GPU once decoding stops being bound by
# reading the weights (docs/ACCEPTANCE.md, "Concurrency"; the triage's batch_step_cost is the same shape). The
# number is the simulator's, chosen so the trade-off shows within tune's default loads (1 and 8): for MTP, k = 4
# is the fastest at one request and k = 2 at eight.
LOAD_TOKEN_COST = 0.05


def load_factor(k: int, running: int) -> float:
    """How much slower one step of a request is with `running` requests in the batch than alone (1 at one)."""
    b = max(1, running)
    return (1.0 + LOAD_TOKEN_COST * (b * (k + 1) - 1)) / (1.0 + LOAD_TOKEN_COST * k)


def _geometric(first: float, ratio: float, k: int) -> list[float]:
    return [first * ratio**i for i in range(k)]


def _same_model(a: str, b: str) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)


def dflash_rates(k: int, facts: DrafterFacts, version: Version) -> list[float]:
    offset = layer_offset(facts)
    if version < (0, 22, 0) and offset == "published":
        # vllm#40727: before 0.22.0 the drafter reads the layer before the one it was trained on
        return ([0.166, 0.017] + [0.0] * k)[:k]
    # on 0.22.0+ a local +1 comes on top of vLLM's own +1: two layers off
    doubled = version >= (0, 22, 0) and offset == "shifted"
    rates = _geometric(0.45, 0.55, k) if doubled else _geometric(0.88, 0.80, k)
    if facts.mixed and (0, 20, 0) <= version < (0, 25, 0):
        rates = [r * 0.8 for r in rates]  # vllm#40898: the sliding-window layers run as full attention
    return rates


def acceptance_rates(spec: SpecConfig, facts: DrafterFacts, target: str, version: Version) -> list[float]:
    """Marginal acceptance rate per speculative position, before the control file's scale."""
    k = spec.num_tokens
    if spec.method == "dflash":
        return dflash_rates(k, facts, version)
    if spec.method == "draft_model":
        matched = spec.model is not None and _same_model(spec.model, target)
        return _geometric(0.97, 0.95, k) if matched else [0.0] * k  # another model's drafts never match
    first, ratio = GEOMETRIC_RATES.get(spec.method, (0.80, 0.75))
    return _geometric(first, ratio, k)


def conditional(rates: Sequence[float]) -> list[float]:
    """Marginal rates -> chance to accept position i given 0..i-1 were. A draft stops at its first
    rejection, so drawing these yields the marginal rates, never increasing with position."""
    out: list[float] = []
    previous = 1.0
    for rate in rates:
        rate = min(max(rate, 0.0), 1.0)
        out.append(min(rate / previous, 1.0) if previous > 0 else 0.0)
        previous = min(previous, rate)
    return out


# --- counters, stats lines, /metrics ------------------------------------------------------------

@dataclass
class Counters:
    k: int
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: list[int] = field(default_factory=list)
    prompt_tokens: int = 0
    generation_tokens: int = 0

    def __post_init__(self) -> None:
        if not self.per_position:
            self.per_position = [0] * self.k

    def add_step(self, accepted: int) -> None:
        """One decode step: with speculation, one draft of k tokens whose first `accepted` matched."""
        if self.k:
            self.drafts += 1
            self.draft_tokens += self.k
            self.accepted += accepted
            for i in range(accepted):
                self.per_position[i] += 1
        self.generation_tokens += 1 + accepted


def engine_message(c: Counters, elapsed: float, running: int, kv_usage: float) -> str:
    # vLLM's format, field for field: "%.1f tokens/s", "%d reqs", "%.1f%%"
    return (
        f"Engine 000: Avg prompt throughput: {c.prompt_tokens / elapsed:.1f} tokens/s, "
        f"Avg generation throughput: {c.generation_tokens / elapsed:.1f} tokens/s, "
        f"Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: {kv_usage * 100:.1f}%, "
        f"Prefix cache hit rate: {0.0:.1f}%"
    )


def spec_message(c: Counters, elapsed: float) -> str:
    """vLLM's SpecDecodingLogging.log, computed from integer counts so its identities hold exactly."""
    drafts = c.draft_tokens // c.k
    mean = 1 + c.accepted / drafts
    rates = ", ".join(f"{n / drafts:.3f}" for n in c.per_position)
    draft_rate = c.accepted / c.draft_tokens * 100 if c.draft_tokens else math.nan  # prints "nan%" as vLLM's
    return (
        f"SpecDecoding metrics: Mean acceptance length: {mean:.2f}, "
        f"Accepted throughput: {c.accepted / elapsed:.2f} tokens/s, "
        f"Drafted throughput: {c.draft_tokens / elapsed:.2f} tokens/s, "
        f"Accepted: {c.accepted} tokens, Drafted: {c.draft_tokens} tokens, "
        f"Per-position acceptance rate: {rates}, Avg Draft acceptance rate: {draft_rate:.1f}%"
    )


def go_float(value: float) -> str:
    """prometheus_client's number format (Go's: exponent from 1e7 up)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _labels(labels: Mapping[str, str]) -> str:
    def escape(v: str) -> str:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return ",".join(f'{k}="{escape(v)}"' for k, v in sorted(labels.items()))


def metric_family(name: str, kind: str, help_text: str, samples: Sequence[tuple[Mapping[str, str], float]],
                  created: float) -> list[str]:
    """One family as prometheus_client prints it: counters get `_total` and a `_created` gauge."""
    full = f"{name}_total" if kind == "counter" else name
    out = [f"# HELP {full} {help_text}", f"# TYPE {full} {kind}"]
    out += [f"{full}{{{_labels(labels)}}} {go_float(value)}" for labels, value in samples]
    if kind == "counter":
        out += [f"# HELP {name}_created {help_text}", f"# TYPE {name}_created gauge"]
        out += [f"{name}_created{{{_labels(labels)}}} {go_float(created)}" for labels, _ in samples]
    return out


# vLLM's request latency histograms (v1/metrics/loggers.py): which release exports which name, from the atlas's
# metric names per release — inter-token latency took over from time_per_output_token (both in 0.10.2–0.14.1),
# and the per-request time per output token came in 0.11
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


@dataclass
class Histogram:
    counts: list[float] = field(default_factory=lambda: [0.0] * len(LATENCY_BUCKETS))
    total: float = 0.0
    n: float = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        for i, le in enumerate(LATENCY_BUCKETS):
            if value <= le:
                self.counts[i] += times
        self.total += value * times
        self.n += times

    def lines(self, name: str, help_text: str, labels: Mapping[str, str], created: float) -> list[str]:
        out = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        for le, count in zip((*map(go_float, LATENCY_BUCKETS), "+Inf"), (*self.counts, self.n), strict=True):
            out.append(f"{name}_bucket{{{_labels({**labels, 'le': le})}}} {go_float(count)}")
        out += [f"{name}_count{{{_labels(labels)}}} {go_float(self.n)}",
                f"{name}_sum{{{_labels(labels)}}} {go_float(self.total)}",
                f"# HELP {name}_created {help_text}", f"# TYPE {name}_created gauge",
                f"{name}_created{{{_labels(labels)}}} {go_float(created)}"]
        return out


def latency_names(v: Version) -> dict[str, str]:
    """What each simulated latency is exported as in release `v`: kind -> name."""
    names = {"ttft": "vllm:time_to_first_token_seconds"}
    if v >= (0, 10, 2):
        names["itl"] = "vllm:inter_token_latency_seconds"
    if v < (0, 15, 0):
        names["itl_old"] = "vllm:time_per_output_token_seconds"
    if v >= (0, 11, 0):
        names["tpot"] = "vllm:request_time_per_output_token_seconds"
    return names


class Engine:
    """The counters behind the stats lines and /metrics, under one lock so the two always agree:
    each /metrics counter is the sum of the logged intervals plus the one not yet logged."""

    def __init__(self, rates: Sequence[float], seed: int, version: Version) -> None:
        self.rates = list(rates)
        self.k = len(self.rates)
        self.version = version
        self._rng = random.Random(seed)
        self._carry: list[float] = []
        self._lock = threading.Lock()
        self.total = Counters(self.k)
        self.interval = Counters(self.k)
        self.running = 0
        self.running_tokens = 0
        self.finished = 0
        self.latency = {"ttft": Histogram(), "itl": Histogram(), "tpot": Histogram()}
        self.created = time.time()
        now = time.monotonic()
        self._engine_mark = now  # vLLM's Engine line spans the last interval ...
        self._spec_mark = now  # ... its SpecDecoding line the time since the previous one, idle included

    def plan(self, max_tokens: int, scale: float) -> list[int]:
        """Accepted draft tokens per decode step until max_tokens are out (a step emits 1 + accepted)."""
        chances = conditional([r * scale for r in self.rates])
        steps: list[int] = []
        left = max_tokens
        with self._lock:  # one generator for the whole run: reproducible from the seed
            while left > 0:
                accepted = min(self._draw(chances), left - 1)  # the request stops at max_tokens
                steps.append(accepted)
                left -= 1 + accepted
        return steps

    def _draw(self, chances: Sequence[float]) -> int:
        # Error diffusion instead of coin flips: each position accepts its conditional chance's share of the
        # drafts that reach it, within one draft, so a 64-token probe already shows the configured curve.
        # The seed only sets where each accumulator starts.
        if len(self._carry) != len(chances):
            self._carry = [self._rng.random() for _ in chances]
        accepted = 0
        for i, chance in enumerate(chances):
            self._carry[i] += chance
            if self._carry[i] < 1.0:
                break
            self._carry[i] -= 1.0
            accepted += 1
        return accepted

    def begin(self, prompt_tokens: int, max_tokens: int) -> int:
        """A request starts; returns how many run now, this one included (the batch it joins)."""
        with self._lock:
            self.running += 1
            self.running_tokens += prompt_tokens + max_tokens
            self.total.prompt_tokens += prompt_tokens
            self.interval.prompt_tokens += prompt_tokens
            return self.running

    def commit(self, steps: Sequence[int]) -> None:
        with self._lock:
            for accepted in steps:
                self.total.add_step(accepted)
                self.interval.add_step(accepted)

    def end(self, prompt_tokens: int, max_tokens: int, seconds: float | None = None,
            first: float | None = None) -> None:
        with self._lock:
            self.running -= 1
            self.running_tokens -= prompt_tokens + max_tokens
            self.finished += 1
            if seconds is not None and first is not None:
                self.latency["ttft"].observe(first)
                if max_tokens > 1:
                    per_token = max(seconds - first, 0.0) / (max_tokens - 1)
                    self.latency["itl"].observe(per_token, max_tokens - 1)
                    self.latency["tpot"].observe(per_token)

    def _kv_usage(self) -> float:
        return min(1.0, self.running_tokens / KV_CAPACITY_TOKENS)

    def tick(self) -> list[tuple[str, str]]:
        """The (file:line, message) pairs vLLM logs at INFO for the interval just ended."""
        with self._lock:
            now = time.monotonic()
            done, self.interval = self.interval, Counters(self.k)
            elapsed = max(now - self._engine_mark, 1e-9)
            self._engine_mark = now
            if not (done.generation_tokens or done.prompt_tokens):
                return []  # an idle vLLM logs both lines at DEBUG: nothing at INFO
            lines = [(f"loggers.py:{engine_stats_line(self.version)}",
                      engine_message(done, elapsed, self.running, self._kv_usage()))]
            if self.k and done.drafts:
                spec_elapsed = max(now - self._spec_mark, 1e-9)
                self._spec_mark = now
                lines.append((f"metrics.py:{spec_metrics_line(self.version)}", spec_message(done, spec_elapsed)))
            return lines

    def metrics(self, model_name: str) -> str:
        base = {"engine": "0", "model_name": model_name}
        created = self.created
        with self._lock:
            t = self.total
            out: list[str] = []
            if self.k:
                out += metric_family("vllm:spec_decode_num_drafts", "counter", "Number of spec decoding drafts.",
                                     [(base, t.drafts)], created)
                out += metric_family("vllm:spec_decode_num_draft_tokens", "counter", "Number of draft tokens.",
                                     [(base, t.draft_tokens)], created)
                out += metric_family("vllm:spec_decode_num_accepted_tokens", "counter", "Number of accepted tokens.",
                                     [(base, t.accepted)], created)
                out += metric_family(
                    "vllm:spec_decode_num_accepted_tokens_per_pos", "counter", "Accepted tokens per draft position.",
                    [({**base, "position": str(i)}, n) for i, n in enumerate(t.per_position)], created)
            out += metric_family("vllm:num_requests_running", "gauge",
                                 "Number of requests in model execution batches.", [(base, self.running)], created)
            out += metric_family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
                                 [(base, 0)], created)
            out += metric_family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
                                 [(base, self._kv_usage())], created)
            out += metric_family("vllm:prompt_tokens", "counter", "Number of prefill tokens processed.",
                                 [(base, t.prompt_tokens)], created)
            out += metric_family("vllm:generation_tokens", "counter", "Number of generation tokens processed.",
                                 [(base, t.generation_tokens)], created)
            finished = {"stop": 0, "length": self.finished, "abort": 0}  # every sim request runs to max_tokens
            out += metric_family("vllm:request_success", "counter", "Count of successfully processed requests.",
                                 [({**base, "finished_reason": r}, n) for r, n in finished.items()], created)
            for kind, name in latency_names(self.version).items():
                out += self.latency[kind.removesuffix("_old")].lines(name, f"Histogram of {kind} in seconds.", base,
                                                                     created)
        return "\n".join(out) + "\n"


# --- the server ---------------------------------------------------------------------------------

class App:
    """What the request handlers share: settings, the engine, and the ready/stop switches."""

    def __init__(self, args: ServeArgs, settings: Settings, spec: SpecConfig | None, engine: Engine,
                 log: Log) -> None:
        self.args = args
        self.settings = settings
        self.spec = spec
        self.engine = engine
        self.log = log
        self.ready = threading.Event()
        self.stop = threading.Event()
        cost = step_cost(spec.method, spec.num_tokens) if spec else 1.0
        self.step_seconds = cost / settings.base_tps

    def control(self) -> Control:
        return read_control(self.settings.control_path)

    def generate(self, prompt_tokens: int, max_tokens: int, on_tokens: Callable[[int], None] | None = None) -> None:
        """Run one request to max_tokens; `on_tokens(n)` hears of each batch of tokens as it is emitted."""
        steps = self.engine.plan(max_tokens, self.control().acceptance_scale)
        running = self.engine.begin(prompt_tokens, max_tokens)
        step = self.step_seconds * load_factor(self.spec.num_tokens if self.spec else 0, running)
        duration = min(len(steps) * step, self.settings.max_request_seconds)
        started = time.monotonic()
        try:
            self._pace(steps, duration, on_tokens)
        finally:
            # a stream's first token lands after one step (_pace): what the latency histograms observe
            self.engine.end(prompt_tokens, max_tokens, time.monotonic() - started,
                            duration / len(steps) if steps else None)

    def _pace(self, steps: Sequence[int], duration: float, on_tokens: Callable[[int], None] | None = None) -> None:
        """Spread the steps over `duration`: a few sleeps, not one per token, committing the steps due
        so far, so a long request shows in the interval lines and /metrics while it runs. The first step
        lands after one step's time (a stream's first token)."""
        start = time.monotonic()
        done = 0
        first = duration / len(steps) if steps else 0.0
        while done < len(steps):
            elapsed = time.monotonic() - start
            finished = self.stop.is_set() or elapsed >= duration
            due = len(steps) if finished else max(int(len(steps) * elapsed / duration), 1 if elapsed >= first else 0)
            if due > done:
                batch = steps[done:due]
                self.engine.commit(batch)
                done = due
                if on_tokens is not None:
                    on_tokens(sum(1 + a for a in batch))
            if done < len(steps):
                wait = min(PACE_SLICE_SECONDS, max(0.0, duration - elapsed))
                if done == 0:
                    wait = min(wait, max(0.0, first - elapsed))
                self.stop.wait(wait)


def _error_body(code: int, message: str, kind: str, param: str | None = None) -> dict[str, object]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def count_prompt_tokens(body: Mapping[str, Any], chat: bool) -> int:
    """About four characters a token: there is no tokenizer here, and the stats need only the scale."""
    if chat:
        messages = body.get("messages")
        listed = messages if isinstance(messages, list) else []
        parts = [str(m.get("content", "")) for m in listed if isinstance(m, dict)]
        return max(1, math.ceil(len(" ".join(parts)) / 4) + 4 * len(parts))  # + the chat template's tokens
    prompt = body.get("prompt", "")
    if isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt):
        return len(prompt)  # already token ids
    text = " ".join(str(p) for p in prompt) if isinstance(prompt, list) else str(prompt)
    return max(1, math.ceil(len(text) / 4))


class SimServer(ThreadingHTTPServer):
    daemon_threads = True  # in-flight requests must not hold up the shutdown
    request_queue_size = 128  # a benchmark opens many connections at once

    def __init__(self, port: int, app: App) -> None:
        self.app = app
        super().__init__((LOOPBACK, port), Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that went away mid-answer (a killed benchmark, a dropped forward) is no engine error: the real
        # server logs no traceback for it, so neither does this one (the triage would read one as a crash)
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN, which can stall on a host without DNS
        socketserver.TCPServer.server_bind(self)
        self.server_name = LOOPBACK
        self.server_port = int(self.socket.getsockname()[1])


class Handler(BaseHTTPRequestHandler):
    server: SimServer
    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn does; every reply carries its length
    timeout = 60  # an idle keep-alive connection does not pin a thread forever

    def version_string(self) -> str:
        return "uvicorn"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # http.server's own lines would give the fake away; log_request prints uvicorn's instead

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        app = self.server.app
        if not app.ready.is_set() or not getattr(self, "command", None):
            return  # before startup uvicorn is not running yet: it prints nothing
        try:
            phrase = HTTPStatus(int(code)).phrase
        except ValueError:
            phrase = ""
        host, port = self.client_address[:2]
        version = self.request_version.removeprefix("HTTP/")
        app.log.uvicorn(f'{host}:{port} - "{self.command} {self.path} HTTP/{version}" {code} {phrase}')

    # -- plumbing

    def _send(self, code: int, body: bytes = b"", content_type: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, payload: object) -> None:
        self._send(code, json.dumps(payload).encode())

    def _read_json(self) -> tuple[dict[str, Any] | None, str]:
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            length = 0
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return None, f"JSON decode error: {exc}"
        if not isinstance(data, dict):
            return None, "Input should be a valid dictionary"
        return data, ""

    def _route(self, routes: Mapping[str, Any], other: Mapping[str, Any]) -> None:
        path = self.path.split("?", 1)[0]
        if not self.server.app.ready.is_set():
            self._send(HTTPStatus.SERVICE_UNAVAILABLE)  # still "loading the model"
        elif path in routes:
            routes[path]()
        elif path in other:
            self._json(HTTPStatus.METHOD_NOT_ALLOWED, {"detail": "Method Not Allowed"})
        else:
            self._json(HTTPStatus.NOT_FOUND, {"detail": "Not Found"})

    def _get_routes(self) -> dict[str, Any]:
        return {"/health": self._health, "/v1/models": self._models, "/metrics": self._metrics,
                "/version": self._version}

    def _post_routes(self) -> dict[str, Any]:
        return {"/v1/completions": lambda: self._complete(chat=False),
                "/v1/chat/completions": lambda: self._complete(chat=True)}

    def do_GET(self) -> None:
        self._route(self._get_routes(), self._post_routes())

    def do_POST(self) -> None:
        self._route(self._post_routes(), self._get_routes())

    # -- endpoints

    def _health(self) -> None:
        failing = self.server.app.control().fail_health
        self._send(HTTPStatus.SERVICE_UNAVAILABLE if failing else HTTPStatus.OK)

    def _version(self) -> None:
        self._json(HTTPStatus.OK, {"version": self.server.app.settings.version_text})

    def _models(self) -> None:
        app = self.server.app
        created = int(app.engine.created)
        data = [{"id": name, "object": "model", "created": created, "owned_by": "vllm", "root": app.args.model,
                 "parent": None, "max_model_len": app.args.max_model_len} for name in app.args.served_names]
        self._json(HTTPStatus.OK, {"object": "list", "data": data})

    def _metrics(self) -> None:
        text = self.server.app.engine.metrics(self.server.app.args.served_names[0])
        self._send(HTTPStatus.OK, text.encode(), "text/plain; version=0.0.4; charset=utf-8")

    def _complete(self, chat: bool) -> None:
        app = self.server.app
        body, problem = self._read_json()
        if body is None:
            self._json(HTTPStatus.BAD_REQUEST, _error_body(400, problem, "BadRequestError"))
            return
        request_model = body.get("model")
        if request_model is not None and request_model not in app.args.served_names:
            self._json(HTTPStatus.NOT_FOUND, _error_body(
                404, f"The model `{request_model}` does not exist.", "NotFoundError", "model"))
            return
        limit = body.get("max_completion_tokens") if chat else None
        limit = body.get("max_tokens", 16) if limit is None else limit
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            self._json(HTTPStatus.BAD_REQUEST, _error_body(
                400, f"max_tokens must be at least 1, got {limit}.", "BadRequestError", "max_tokens"))
            return
        prompt_tokens = count_prompt_tokens(body, chat)
        if prompt_tokens + limit > app.args.max_model_len:
            self._json(HTTPStatus.BAD_REQUEST, _error_body(
                400, f"This model's maximum context length is {app.args.max_model_len} tokens. However, you "
                f"requested {prompt_tokens + limit} tokens ({prompt_tokens} in the messages, {limit} in the "
                "completion). Please reduce the length of the messages or completion.", "BadRequestError"))
            return
        if body.get("stream") is True:
            options = body.get("stream_options")
            usage = isinstance(options, dict) and options.get("include_usage") is True
            self._stream(chat, prompt_tokens, limit, usage)
            return
        app.generate(prompt_tokens, limit)
        self._json(HTTPStatus.OK, completion_payload(app.args.served_names[0], chat, prompt_tokens, limit))

    def _stream(self, chat: bool, prompt_tokens: int, limit: int, usage: bool) -> None:
        """`stream: true`: server-sent events, one chunk for each batch of tokens as it is emitted, then
        (with stream_options.include_usage) the usage, then `data: [DONE]`; the connection closes after."""
        app = self.server.app
        model = app.args.served_names[0]
        self.close_connection = True
        self.send_response(HTTPStatus.OK)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("connection", "close")
        self.end_headers()
        ident = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        kind = "chat.completion.chunk" if chat else "text_completion"

        def event(payload: Mapping[str, object]) -> None:
            try:
                self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
                self.wfile.flush()
            except OSError:
                pass  # the client went away; the request still runs to its end, as vLLM's would be aborted

        def chunk(n: int) -> None:
            text = "lorem " * n
            choice: dict[str, object] = ({"index": 0, "delta": {"content": text}, "finish_reason": None} if chat
                                         else {"index": 0, "text": text, "finish_reason": None})
            event({"id": ident, "object": kind, "created": int(time.time()), "model": model, "choices": [choice]})

        app.generate(prompt_tokens, limit, chunk)
        if usage:
            event({"id": ident, "object": kind, "created": int(time.time()), "model": model, "choices": [],
                   "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": limit,
                             "total_tokens": prompt_tokens + limit}})
        try:
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except OSError:
            pass


def completion_payload(model: str, chat: bool, prompt_tokens: int, completion_tokens: int) -> dict[str, object]:
    text = " ".join(["lorem"] * completion_tokens)
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    if chat:
        choice: dict[str, object] = {"index": 0, "message": {"role": "assistant", "content": text},
                                     "logprobs": None, "finish_reason": "length", "stop_reason": None}
        kind, prefix = "chat.completion", "chatcmpl"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length", "stop_reason": None}
        kind, prefix = "text_completion", "cmpl"
    return {"id": f"{prefix}-{uuid.uuid4().hex}", "object": kind, "created": int(time.time()), "model": model,
            "choices": [choice], "usage": usage}


# --- main ---------------------------------------------------------------------------------------

TORCH_DTYPES = {"auto": "torch.bfloat16", "bfloat16": "torch.bfloat16", "float16": "torch.float16",
                "half": "torch.float16", "float32": "torch.float32", "float": "torch.float32"}
ROUTES = (("/health", "GET"), ("/metrics", "GET"), ("/version", "GET"), ("/v1/models", "GET"),
          ("/v1/chat/completions", "POST"), ("/v1/completions", "POST"))


def engine_config_message(version_text: str, args: ServeArgs, spec: SpecConfig | None) -> str:
    trust_remote_code = args.non_default.get("trust_remote_code") is True
    spec_text = "None" if spec is None else (
        f"SpeculativeConfig(method={spec.method!r}, model={spec.model!r}, num_spec_tokens={spec.num_tokens})")
    return (
        f"Initializing a V1 LLM engine (v{version_text}) with config: model={args.model!r}, "
        f"speculative_config={spec_text}, tokenizer={args.model!r}, skip_tokenizer_init=False, tokenizer_mode=auto, "
        f"revision=None, trust_remote_code={trust_remote_code}, dtype={TORCH_DTYPES.get(args.dtype, args.dtype)}, "
        f"max_seq_len={args.max_model_len}, download_dir=None, load_format=auto, "
        f"tensor_parallel_size={args.tensor_parallel_size}, pipeline_parallel_size=1, data_parallel_size=1, "
        f"quantization=None, enforce_eager={args.enforce_eager}, device_config=cuda, "
        f"served_model_name={args.served_names[0]}, enable_prefix_caching=True, enable_chunked_prefill=True"
    )


def bind(port: int, app: App) -> SimServer:
    try:
        return SimServer(port, app)
    except OSError as exc:  # e.g. a stale server still holds the port: vLLM dies with this traceback
        raise StartupError(f"OSError: {exc}", BIND_FRAMES) from exc


def install_signal_handlers(stop: threading.Event) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()  # the main thread notices, logs the shutdown line and stops serving

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def announce_start(app: App) -> None:
    log, pid = app.log, app.log.pid
    log.info("api_server.py:1", start_message(app.settings.version, app.args.port))
    for path, method in ROUTES:
        log.info("launcher.py:1", f"Route: {path}, Methods: {method}")
    log.uvicorn(f"Started server process [{pid}]")
    log.uvicorn("Waiting for application startup.")
    log.uvicorn("Application startup complete.")


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
    install_signal_handlers(app.stop)
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
