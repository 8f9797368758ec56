"""What we know about the deployment: from flags (what the user says) and the log (what it says).

Flags win over the log; each fact keeps where it came from, and a version read off the
`[metrics.py:LINE]` hint is a range, reported as a guess.
"""

from __future__ import annotations

import re
from typing import Any

from packaging.version import InvalidVersion
from packaging.version import Version as PackagingVersion
from pydantic import BaseModel, ConfigDict, Field

from bot.core.parsed_log import ContextClue, ParsedLog
from bot.core.triage.acceptance import COLLAPSE_P1
from bot.core.triage.knowledge import KnowledgeBase, normalize_method

Version = tuple[int, int, int]

# the first version-looking token of a longer text ("vLLM 0.20.1 (commit abc)", "version 0.20.1+cpu")
_TOKEN_RE = re.compile(r"v?\d+(?:\.\d+)+\S*")
# the length the engine was built with, in its start line (`Initializing a V1 LLM engine … max_seq_len=131072`)
_SEQ_LEN = re.compile(r"\bmax_seq_len=(?P<n>\d{3,9})\b")


def parse_version(text: str | None) -> Version | None:
    """PEP 440 through `packaging`: '0.20.1', 'v0.20.1', '0.32.0+cpu', '0.11.1rc2.dev7+g1a2b' -> the
    release (major, minor, patch); a text with a version inside is read at its first version token."""
    if not text:
        return None
    for candidate in (text.strip(), *_TOKEN_RE.findall(text)):
        try:
            release = PackagingVersion(candidate).release
        except InvalidVersion:
            continue
        if len(release) < 2:
            continue
        return (release[0], release[1], release[2] if len(release) > 2 else 0)
    return None


def fmt_version(v: Version) -> str:
    return ".".join(str(x) for x in v)


class Flags(BaseModel):
    """Context given on the command line or by a deployment profile."""

    model_config = ConfigDict(defer_build=True)

    vllm_version: str | None = None
    method: str | None = None
    target_model: str | None = None
    drafter: str | None = None
    drafter_config: dict[str, Any] | None = None
    num_speculative_tokens: int | None = None
    baseline_tps: float | None = None
    model_runner_v2: bool | None = None
    host: str | None = None
    probe_tps: float | None = None  # measured by a completion probe, one request
    server_alive: bool | None = None
    health_ok: bool | None = None
    # the floor of position 0's acceptance for this method (the config's watch.rules, else the default): the
    # watch and the alert rules judge with the same number
    first_position_floor: float = Field(COLLAPSE_P1, gt=0, lt=1)
    gpu: str | None = None  # the GPU's name, where known ("Tesla V100-SXM2-32GB"): next to capability checks
    # where these values came from, as a report says it: "(from the command line)", "(from the host)"
    origin: str = "the command line"


class DeploymentContext(Flags):
    """The facts triage works from: the flags, completed from the log, each with where it came from. Frozen:
    every detector reads the same facts (build_context makes them)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    version_range: tuple[str, str] | None = None  # from the metrics line hint when no version is known
    tensor_parallel_size: int | None = None
    max_model_len: int | None = None  # the length the latest launch admits: its engine's start line, else its arguments
    sources: dict[str, str] = Field(default_factory=dict)

    @property
    def version(self) -> Version | None:
        return parse_version(self.vllm_version)

    def version_bounds(self) -> tuple[Version, Version] | None:
        """Known version as a point, a hinted range, or None."""
        v = self.version
        if v is not None:
            return (v, v)
        if self.version_range:
            lo, hi = parse_version(self.version_range[0]), parse_version(self.version_range[1])
            if lo and hi:
                return (lo, hi)
        return None

    def version_text(self) -> str:
        if self.vllm_version:
            return self.vllm_version
        if self.version_range:
            return f"{self.version_range[0]}–{self.version_range[1]} (guessed)"
        return "an unknown vLLM version"


# taken over from the flags as they are, with no source of their own (what a host or a profile measured)
_GIVEN = ("host", "baseline_tps", "model_runner_v2", "drafter_config", "probe_tps", "server_alive", "health_ok",
          "gpu", "first_position_floor")


class _Facts:
    """The context as it is completed: the first source to give a fact keeps it (flags, then the newest launch)."""

    def __init__(self, flags: Flags) -> None:
        self.values: dict[str, Any] = {name: getattr(flags, name) for name in _GIVEN}
        self.sources: dict[str, str] = {}
        # read newest first: once the latest launch's arguments are behind, a launch-only fact (the length it
        # admits) belongs to an earlier run
        self.past_launch = False

    def get(self, name: str) -> Any:
        return self.values.get(name)

    def put(self, name: str, value: Any, source: str) -> None:
        if value is None or self.values.get(name) is not None:
            return
        self.values[name] = value
        self.sources[name] = source


def build_context(flags: Flags, parsed: ParsedLog, kb: KnowledgeBase) -> DeploymentContext:
    facts = _Facts(flags)
    _from_flags(facts, flags)
    for clue in reversed(parsed.clues):  # the log's latest launch counts: newest first
        _from_clue(facts, clue)
        # (only the arguments mark where a launch begins: `Starting vLLM API server` is printed at its end)
        facts.past_launch = facts.past_launch or clue.kind == "args"
    if facts.get("vllm_version") is None:
        _version_range_from_hint(facts, parsed, kb)
    if facts.get("num_speculative_tokens") is None:
        _k_from_rates(facts, parsed)
    if facts.get("method") is None:
        _method_from_drafter(facts)
    if facts.get("drafter_config") is None and facts.get("drafter"):
        known = kb.drafter(facts.get("drafter"))
        if known is not None and known.layer_types is not None:
            facts.sources["drafter_config"] = f"known facts for {known.name}"
    return DeploymentContext(**facts.values, sources=facts.sources)


def _from_flags(facts: _Facts, flags: Flags) -> None:
    facts.put("vllm_version", flags.vllm_version, flags.origin)
    facts.put("method", normalize_method(flags.method), flags.origin)
    facts.put("target_model", flags.target_model, flags.origin)
    facts.put("drafter", flags.drafter, flags.origin)
    facts.put("num_speculative_tokens", flags.num_speculative_tokens, flags.origin)
    if flags.drafter_config is not None:
        facts.sources["drafter_config"] = flags.origin


def _from_clue(facts: _Facts, clue: ContextClue) -> None:
    where = f"log {clue.origin.where()}"
    if clue.kind in ("version", "logo_version"):
        facts.put("vllm_version", str(clue.value), where)
        # the engine's own start line (`Initializing a V1 LLM engine (v…) with config: … max_seq_len=…`)
        seq_len = _SEQ_LEN.search((clue.origin.text or "")[:8000])
        if seq_len is not None and not facts.past_launch:
            facts.put("max_model_len", int(seq_len["n"]), where)
    elif clue.kind == "model":
        facts.put("target_model", str(clue.value), where)
    elif clue.kind == "args" and isinstance(clue.value, dict):
        _from_args(facts, clue.value, where)
    elif clue.kind == "engine_spec_config" and isinstance(clue.value, dict):
        facts.put("method", normalize_method(clue.value.get("method")), where)
        facts.put("drafter", clue.value.get("model"), where)
        facts.put("num_speculative_tokens", clue.value.get("num_speculative_tokens"), where)


def _from_args(facts: _Facts, args: dict[str, Any], where: str) -> None:
    """vLLM's `non-default args: {…}` line: the model, the tensor parallelism and the speculative config."""
    facts.put("target_model", args.get("model") or args.get("model_tag"), f"{where} (non-default args)")
    tp = args.get("tensor_parallel_size")
    facts.put("tensor_parallel_size", tp if isinstance(tp, int) else None, where)
    length = args.get("max_model_len")
    if not facts.past_launch:
        facts.put("max_model_len", length if isinstance(length, int) else None, where)
    spec = args.get("speculative_config")
    if isinstance(spec, str):  # given on the command line as JSON text
        spec = _json_or_none(spec)
    if not isinstance(spec, dict):
        return
    facts.put("method", normalize_method(str(spec.get("method") or "")) or None, where)
    facts.put("drafter", spec.get("model"), where)
    k = spec.get("num_speculative_tokens")
    facts.put("num_speculative_tokens", k if isinstance(k, int) else None, where)


def _version_range_from_hint(facts: _Facts, parsed: ParsedLog, kb: KnowledgeBase) -> None:
    """The newest `[metrics.py:LINE]` hint: the releases that print the metrics line there (a guess)."""
    for clue in reversed(parsed.clues):
        if clue.kind == "metrics_hint" and isinstance(clue.value, int):
            rng = kb.metrics_line_hints.get(clue.value)
            if rng:
                facts.values["version_range"] = (rng[0], rng[1])
                facts.sources["version_range"] = f"[metrics.py:{clue.value}] at {clue.origin.where()} (a guess)"
            return


def _k_from_rates(facts: _Facts, parsed: ParsedLog) -> None:
    ks = [len(s.per_position) for s in parsed.samples if s.per_position]
    if ks:
        facts.values["num_speculative_tokens"] = max(set(ks), key=ks.count)
        facts.sources["num_speculative_tokens"] = "per-position rates in the log"


def _method_from_drafter(facts: _Facts) -> None:
    """A method no flag or log line names, read off the drafter's name or config: a guess the premises say is one."""
    name = (facts.get("drafter") or "").lower()
    config = facts.get("drafter_config")
    if "dflash" in name:
        method, source = "dflash", "drafter name"
    elif config and "dflash_config" in config:
        method, source = "dflash", "drafter config"
    elif "eagle3" in name.replace("-", ""):
        method, source = "eagle3", "drafter name"
    else:
        return
    facts.values["method"] = method
    facts.sources["method"] = source


def _json_or_none(text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError:
        return None
