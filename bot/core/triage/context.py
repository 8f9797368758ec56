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

from bot.core.logparse import ParsedLog
from bot.core.triage.knowledge import KnowledgeBase, normalize_method

Version = tuple[int, int, int]

# the first version-looking token of a longer text ("vLLM 0.20.1 (commit abc)", "version 0.20.1+cpu")
_TOKEN_RE = re.compile(r"v?\d+(?:\.\d+)+\S*")


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
    gpu: str | None = None  # the GPU's name, where known ("Tesla V100-SXM2-32GB"): next to capability checks
    # where these values came from, as a report says it: "(from the command line)", "(from the host)"
    origin: str = "the command line"


class DeploymentContext(Flags):
    """The facts triage works from: the flags, completed from the log, each with where it came from."""

    version_source: str | None = None
    version_range: tuple[str, str] | None = None  # from the metrics line hint when no version is known
    method_source: str | None = None
    tensor_parallel_size: int | None = None
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


def build_context(flags: Flags, parsed: ParsedLog, kb: KnowledgeBase) -> DeploymentContext:
    ctx = DeploymentContext(host=flags.host, baseline_tps=flags.baseline_tps,
                            model_runner_v2=flags.model_runner_v2, drafter_config=flags.drafter_config,
                            probe_tps=flags.probe_tps, server_alive=flags.server_alive, health_ok=flags.health_ok,
                            gpu=flags.gpu)
    src = ctx.sources

    def put(name: str, value: Any, source: str) -> None:
        if value is None or getattr(ctx, name) is not None:
            return
        setattr(ctx, name, value)
        src[name] = source

    put("vllm_version", flags.vllm_version, flags.origin)
    put("method", normalize_method(flags.method), flags.origin)
    put("target_model", flags.target_model, flags.origin)
    put("drafter", flags.drafter, flags.origin)
    put("num_speculative_tokens", flags.num_speculative_tokens, flags.origin)
    if flags.drafter_config is not None:
        src["drafter_config"] = flags.origin

    # The log's latest launch counts: read clues newest first.
    for clue in reversed(parsed.clues):
        where = clue.origin.where()
        if clue.kind in ("version", "logo_version"):
            put("vllm_version", str(clue.value), f"log {where}")
        elif clue.kind == "model":
            put("target_model", str(clue.value), f"log {where}")
        elif clue.kind == "args" and isinstance(clue.value, dict):
            args = clue.value
            put("target_model", args.get("model") or args.get("model_tag"), f"log {where} (non-default args)")
            tp = args.get("tensor_parallel_size")
            put("tensor_parallel_size", tp if isinstance(tp, int) else None, f"log {where}")
            spec = args.get("speculative_config")
            if isinstance(spec, str):
                spec = _json_or_none(spec)
            if isinstance(spec, dict):
                put("method", normalize_method(str(spec.get("method") or "")) or None, f"log {where}")
                put("drafter", spec.get("model"), f"log {where}")
                k = spec.get("num_speculative_tokens")
                put("num_speculative_tokens", k if isinstance(k, int) else None, f"log {where}")
        elif clue.kind == "engine_spec_config" and isinstance(clue.value, dict):
            put("method", normalize_method(clue.value.get("method")), f"log {where}")
            put("drafter", clue.value.get("model"), f"log {where}")
            put("num_speculative_tokens", clue.value.get("num_speculative_tokens"), f"log {where}")

    if ctx.vllm_version is None:
        for clue in reversed(parsed.clues):
            if clue.kind == "metrics_hint" and isinstance(clue.value, int):
                rng = kb.metrics_line_hints.get(clue.value)
                if rng:
                    ctx.version_range = (rng[0], rng[1])
                    src["version_range"] = f"[metrics.py:{clue.value}] at {clue.origin.where()} (a guess)"
                break

    if ctx.num_speculative_tokens is None:
        ks = [len(s.per_position) for s in parsed.samples if s.per_position]
        if ks:
            ctx.num_speculative_tokens = max(set(ks), key=ks.count)
            src["num_speculative_tokens"] = "per-position rates in the log"

    if ctx.method is None:
        name = (ctx.drafter or "").lower()
        if "dflash" in name:
            ctx.method, src["method"] = "dflash", "drafter name"
        elif ctx.drafter_config and "dflash_config" in ctx.drafter_config:
            ctx.method, src["method"] = "dflash", "drafter config"
        elif "eagle3" in name.replace("-", ""):
            ctx.method, src["method"] = "eagle3", "drafter name"
    if ctx.drafter_config is None and ctx.drafter:
        facts = kb.drafter(ctx.drafter)
        if facts is not None and facts.layer_types is not None:
            src["drafter_config"] = f"known facts for {facts.name}"
    return ctx


def _json_or_none(text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError:
        return None
