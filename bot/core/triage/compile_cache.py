"""A start that crashed after vLLM loaded compiled graphs from its torch.compile cache: the cache is one part that
can be switched off to prove it.

The cache is keyed by what vLLM hashes of the configuration and the code; a setting the hash leaves out, or an
artifact a failed compile left behind, is loaded as it is and breaks a start that would compile cleanly. The
crash's own line names no part, so this is a candidate with its switch (`VLLM_DISABLE_COMPILE_CACHE=1`, one start
that recompiles), not a cause."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import switches
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import latest_launch, position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

def cache_then_crash(st: State) -> None:
    """Add the candidate when the latest launch loaded from the compile cache, then crashed before it served, and
    no finding sure of itself explains the crash."""
    parsed = st.ev.parsed
    start = latest_launch(parsed)
    loads = [c for c in parsed.clues if c.kind == "compile_cache" and position(c.origin) >= start]
    if not loads:
        return
    loaded = position(loads[-1].origin)
    served = any(c.kind == "progress" and c.value == "serving" and position(c.origin) > loaded for c in parsed.clues)
    crashes = [f for f in st.findings if f.severity == "critical" and (f.at is None or f.at > loaded)]
    if served or not crashes or any(f.confidence in ("high", "medium") and not f.catch_all for f in crashes):
        return
    sw = switches.by_id("compile-cache")
    version = st.ev.context.vllm_version
    offer = sw.offer(version) if sw is not None else None
    off = sw.for_release(version) if sw is not None else None
    if sw is None or offer is None or off is None:
        return
    text, knob = offer
    f = Finding(
        id="compile-cache-then-crash", title="The start crashed after loading compiled graphs from vLLM's "
                                             "torch.compile cache",
        severity="critical", confidence="low",
        summary=("This start reused graphs an earlier start compiled (`" + str(loads[-1].value)[:120] + "`) and "
                 "crashed before it served. A cache entry made under other settings (one the cache's hash leaves "
                 "out) or left corrupt by a failed compile is loaded as it is; a cold start would compile afresh."),
        evidence=[f"line {loads[-1].origin.line_no}: {loads[-1].origin.text or loads[-1].value}"
                  if loads[-1].origin.line_no is not None else str(loads[-1].value)],
        remediation=[text, "If it starts cleanly without the cache: delete `~/.cache/vllm/torch_compile_cache` (or "
                           "`VLLM_CACHE_ROOT`'s) and turn the cache back on; a cache that breaks again under one "
                           "setting is a hashing bug to report."],
        sources=list(off.sources), priority=39, part=sw.part, knobs=[knob])
    f.switch = text
    st.findings.append(f)


# Dynamo's wrapper when a compile backend raised (`BackendCompilerFailed: backend='<vllm.compilation.backends.
# VllmBackend object at …>' raised:`), and words that say a stored artifact did not read back
_VLLM_BACKEND = re.compile(r"backend='?<?vllm\.compilation\.")
_CORRUPT = re.compile(r"(?i)\bcorrupt(?:ed|ion)?\b|checksum (?:does not|doesn't) match|\bunpickl\w* (?:error|failed)|"
                      r"\bEOFError\b|\btruncated\b")


def compile_backend_failed(st: State) -> None:
    """vLLM's torch.compile backend raised: the compile is the part, and its switch proves it — the compile cache's
    when what it raised says a stored artifact is corrupt, torch.compile's own otherwise."""
    problems = st.ev.parsed.problems
    start = latest_launch(st.ev.parsed)
    at = next((n for n, p in enumerate(problems) if p.kind == "exception" and position(p.origin) >= start
               and p.exception == "BackendCompilerFailed" and _VLLM_BACKEND.search(p.message)), None)
    if at is None or any(f.severity == "critical" and f.confidence == "high" for f in st.findings):
        return
    raised = next((q for q in problems[at + 1:at + 40] if q.kind == "exception"), None)
    corrupt = raised is not None and bool(_CORRUPT.search(f"{raised.exception} {raised.message}"))
    sw = switches.by_id("compile-cache" if corrupt else "torch-compile")
    version = st.ev.context.vllm_version
    offer = sw.offer(version) if sw is not None else None
    if sw is None or offer is None:
        return
    text, knob = offer
    why = (f"what it raised (`{raised.exception}: {raised.message[:100]}`) says a stored artifact did not read back: "
           "the on-disk compile cache holds a corrupt entry (a compile interrupted, a cache shared by several hosts "
           "or processes)" if corrupt and raised is not None else
           "the compile itself failed (Dynamo tracing or Inductor); the exception after it says what")
    f = Finding(
        id="vllm-compile-backend-failed", title="vLLM's torch.compile backend failed"
        + (": a corrupt artifact in the compile cache" if corrupt else ""),
        severity="critical", confidence="medium",
        summary=f"Dynamo reports that vLLM's compile backend raised; {why}.",
        evidence=[quoted(problems[at])] + ([quoted(raised)] if raised is not None else []),
        remediation=[text] + (["Delete `~/.cache/vllm/torch_compile_cache` (or `VLLM_CACHE_ROOT`'s) and start again; "
                               "give each host or job a cache of its own (`VLLM_CACHE_ROOT`) rather than one shared "
                               "directory."] if corrupt else []),
        priority=35, part=sw.part, knobs=[knob], inputs=[knob] if corrupt else [])
    f.switch = text
    st.findings.append(f)
