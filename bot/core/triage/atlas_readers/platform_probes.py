"""vLLM's own platform probes: at start it checks each platform it knows (TPU, CUDA, ROCm, XPU, CPU) and, with
debug logging, says why each one is not available. When none is, the reason that matters is the one of the
platform the host has — the other platforms' reasons are only what a host of another kind would lack.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State

# vllm/platforms/__init__.py: `logger.debug("%s platform is not available because: %s", …)`
_PLATFORMS = r"(?P<platform>TPU|CUDA|ROCm|XPU|CPU|HPU|Neuron)"
_PROBE = re.compile(r"\b" + _PLATFORMS + r"\s+platform is not available because:\s*(?P<reason>\S.{0,300})")
# the probe's other lines about one platform (`Exception happens when checking CUDA platform: …`)
_CHECKING = re.compile(r"\b(?:[Cc]hecking(?: if)?) " + _PLATFORMS + r"\s+platform\b")
# what a host's GPU is called in the context it was given, by vendor
_VENDORS = (("ROCm", re.compile(r"(?i)\b(?:AMD|Radeon|Instinct|MI\d{3}X?|ROCm|gfx\d{3,4})\b")),
            ("CUDA", re.compile(r"(?i)\b(?:NVIDIA|GeForce|RTX|Tesla|Quadro|[AHLB]\d{2,3}|GB\d{2,3}|Jetson)\b")),
            ("XPU", re.compile(r"(?i)\b(?:Intel|Arc|XPU|Data Center GPU Max)\b")),
            ("TPU", re.compile(r"(?i)\bTPU\b")))
_NO_MODULE = re.compile(r"No module named '(?P<module>[\w.]+)'")


def platform_probes(st: State) -> None:
    """The platform the host has, its probe's reason as the cause; the others' reasons are notes."""
    lines = [*st.ev.parsed.problems, *st.ev.parsed.loose]
    probes = [(m, p) for p in lines if (m := _PROBE.search(p.message)) is not None]
    if not probes:
        return
    vendor = next((name for name, rx in _VENDORS if rx.search(st.ev.context.gpu or "")), None)
    mine = next(((m, p) for m, p in probes if m["platform"] == vendor), None)
    _set_aside(st, _about(lines, lambda platform: mine is None or platform != vendor), sure=mine is not None)
    if mine is None or vendor is None:
        return
    m, p = mine
    reason = m["reason"].strip()
    module = _NO_MODULE.search(reason)
    said = _about(lines, lambda platform: platform == vendor)
    if module is None and any(f.at in said for f in st.findings if f.severity in ("critical", "warning")):
        return  # a catalog read this platform's reason already (NVML's library missing)
    st.findings.append(_finding(st, p, vendor, reason, module["module"] if module else None))


def _about(lines: list[ProblemLine], which: Callable[[str], bool]) -> set[int]:
    """The positions of the probe's lines about the platforms `which` picks."""
    return {position(p.origin) for p in lines
            if (o := _PROBE.search(p.message) or _CHECKING.search(p.message)) is not None and which(o["platform"])}


def _set_aside(st: State, others: set[int], *, sure: bool) -> None:
    """A catalog's reading of another platform's reason (NVML missing, on an AMD host) is not this host's cause: a
    note; with the host's kind unknown, no one platform's reason is sure."""
    for f in st.findings:
        if f.at is not None and f.at in others and f.severity in ("critical", "warning"):
            if sure:
                f.severity, f.confidence = "info", "low"
            else:
                f.confidence = "low"


def _finding(st: State, p: ProblemLine, vendor: str, reason: str, module: str | None) -> Finding:
    fix = (f"Install the `{module}` Python package in the environment vLLM runs in: vLLM's {vendor} platform "
           f"imports it to find the GPU (ROCm ships its Python bindings with the install; match its release)."
           if module else f"Make what vLLM's {vendor} check needs available to the process: {reason}.")
    return Finding(
        id=f"platform-probe:{vendor.lower()}", title=f"vLLM's {vendor} platform check failed: {reason[:120]}",
        severity="critical", confidence="medium",
        summary=(f"The host's GPU is {vendor}'s kind ({st.ev.context.gpu}); vLLM checked its platforms and says the "
                 f"{vendor} platform is not available because: {reason}. With no platform, vLLM runs on "
                 "UnspecifiedPlatform and cannot use the GPU. The other platforms' reasons are what other hosts "
                 "would lack."),
        evidence=[quoted(p)], remediation=[fix], priority=30, part="platform", at=position(p.origin),
        deps=[module] if module else [])
