"""`vllm serve`'s command line as the fake reads it (a --config YAML file spliced in, the options it does not
model kept for `non-default args`) and the speculative config checked as vLLM's SpeculativeConfig checks it.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bot.sim.vllm_settings import Version
from bot.sim.vllm_tracebacks import CONFIG_FRAMES, SPEC_FRAMES, StartupError

DEFAULT_PORT = 8000
DEFAULT_MAX_MODEL_LEN = 32768  # a real server reads this from the model; any sane value will do here

# vLLM 0.32's Literal for SpeculativeConfig.method, in its order (the error message lists them so).
SPEC_METHODS: tuple[str, ...] = (
    "ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "eagle", "eagle3", "mtp", "dflash",
    "ngram_gpu", "dspark",
)
DRAFTER_METHODS = frozenset({"dflash", "eagle", "eagle3", "draft_model", "medusa", "mlp_speculator"})
DFLASH_FIRST_RELEASE: Version = (0, 20, 0)

# Flags vLLM knows as booleans: without this a flag written before the model would swallow it.
BOOLEAN_FLAGS = frozenset({
    "--trust-remote-code", "--enable-prefix-caching", "--no-enable-prefix-caching",
    "--enable-chunked-prefill", "--no-enable-chunked-prefill", "--disable-log-requests",
    "--enable-log-requests", "--enable-auto-tool-choice", "--disable-custom-all-reduce",
    "--disable-frontend-multiprocessing", "--skip-tokenizer-init", "--enable-expert-parallel",
})


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
