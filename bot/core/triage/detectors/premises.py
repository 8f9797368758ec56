"""A hypothesis's premises (each known, guessed or unknown) and the signature of its cause in the curve,
weighed by the rule the package's docstring states."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.core.triage.context import DeploymentContext, Version, fmt_version
from bot.core.triage.findings import Confidence, Status

PremiseState = Literal["yes", "no", "guessed", "unknown"]
# specific: only this cause shows it; fits: consistent, though other causes show it too
Signature = Literal["specific", "fits", "weak", "absent", "against"]


@dataclass(frozen=True)
class Premise:
    state: PremiseState
    text: str


@dataclass
class Weighed:
    status: Status
    confidence: Confidence | None  # None: no finding, only a line under "considered"


def weigh(premises: list[Premise], signature: Signature) -> Weighed:
    if any(p.state == "no" for p in premises):
        return Weighed("not-applicable", None)
    known = all(p.state == "yes" for p in premises)
    unknown = any(p.state == "unknown" for p in premises)
    if signature == "specific":
        return Weighed("fits", "high" if known else "medium")
    if signature == "fits":
        if unknown:  # others explain it as well: only a premise we know (or guess) makes it this cause
            return Weighed("possible", None)
        return Weighed("fits", "high" if known else "medium")
    if signature == "weak":
        return Weighed("fits", "medium") if known else Weighed("possible", None)
    if signature == "absent":
        return Weighed("fits", "medium") if known else Weighed("possible", None)
    return Weighed("possible", "low") if known else Weighed("ruled-out", None)


def premise_method(ctx: DeploymentContext, method: str) -> Premise:
    if ctx.method is None:
        return Premise("unknown", "the method is not known (give --method)")
    source = ctx.sources.get("method", "context")
    guessed = source in ("drafter name", "drafter config")
    if ctx.method != method:
        return Premise("no", f"the method is {ctx.method} (from {source})")
    return Premise("guessed" if guessed else "yes", f"method {method} (from {source})")


def premise_version(ctx: DeploymentContext, lo: Version, hi: Version, what: str) -> Premise:
    """Is the version in [lo, hi)? `what` says what that range means, e.g. 'before the fix in 0.22.0'."""
    span = f"{fmt_version(lo)}–{_before(hi)}"
    if ctx.vllm_version and ctx.version is not None:
        v = ctx.version
        src = ctx.sources.get("vllm_version", "context")
        if lo <= v < hi:
            return Premise("yes", f"vLLM {ctx.vllm_version} (from {src}) is in {span} ({what})")
        return Premise("no", f"vLLM {ctx.vllm_version} (from {src}) is outside {span} ({what})")
    bounds = ctx.version_bounds()
    if bounds is not None:
        a, b = bounds
        where = ctx.sources.get("version_range", "the log")
        guess = f"the version could be {fmt_version(a)}–{fmt_version(b)} ({where})"
        if b < lo or a >= hi:
            return Premise("no", f"{guess}, outside {span}")
        return Premise("guessed", guess)
    return Premise("unknown", "the vLLM version is not known (give --vllm-version)")


def _before(v: Version) -> str:
    major, minor, _ = v
    return f"{major}.{minor - 1}.x" if minor > 0 else f"before {fmt_version(v)}"
