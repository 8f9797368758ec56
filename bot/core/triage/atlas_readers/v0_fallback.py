"""A flag the user gave that keeps the server on the V0 engine (vLLM 0.8–0.10's `_raise_or_fallback`: `--x is not
supported by the V1 Engine. Falling back to V0.`): the server runs, on the older and slower engine, for that flag.
What the platform itself needs (`device type=cpu is not supported by the V1 Engine`) is how that platform runs, a
note."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State

# a flag, or a variable with its value (`VLLM_ATTENTION_BACKEND=CUTLASS_MLA_VLLM_V1 is not supported by …`)
_FALLBACK = re.compile(r"(?P<flag>--[a-z][a-z0-9-]{1,60}|(?P<var>VLLM_[A-Z0-9_]{2,60})=(?P<value>\S{1,80})) is not "
                       r"supported by the V1 Engine\. Falling back to V0")
# the same fallback for a feature the message names in words (`Pipeline Parallelism without Ray distributed executor
# … is not supported by the V1 Engine`) — not the platform or the GPU, which are how the host runs
_FEATURE = re.compile(r"(?P<what>[A-Z][^.\n]{2,200}?) is not supported by the V1 Engine\. Falling back to V0")
_HOST_WORDS = re.compile(r"device type|[Cc]ompute [Cc]apability|platform|\bCPU\b|\bTPU\b|\bXPU\b|\bHPU\b")
SOURCE = "https://github.com/vllm-project/vllm/blob/v0.10.2/vllm/engine/arg_utils.py"


def v0_fallback(st: State) -> None:
    lines = [*st.ev.parsed.problems, *st.ev.parsed.loose]
    line = next((p for p in lines if _FALLBACK.search(p.origin.text or p.message)), None)
    if line is None:
        _feature_fallback(st, lines)
        return
    hit = _FALLBACK.search(line.origin.text or line.message)
    assert hit is not None
    flag = hit["var"] or hit["flag"]
    drop = (f"Unset `{flag}` (or give it a value this release's V1 engine takes: `{hit['value']}` is not one)"
            if hit["var"] else f"Drop `{flag}` if you can do without it")
    st.findings.append(Finding(
        id=f"v0-fallback:{flag}", severity="warning", confidence="medium",
        title=f"`{flag}` keeps this server on the V0 engine",
        summary=(f"vLLM's V1 engine does not support `{flag}` in this release, so the whole server runs on the older "
                 "V0 engine — slower, and without V1's features — for that one flag."),
        evidence=[quoted(line)],
        remediation=[f"{drop}, or upgrade to a release whose V1 engine supports it (its release notes say when); "
                     "meanwhile the server works on V0."],
        sources=[SOURCE], priority=48, part="engine", inputs=[flag], knobs=[flag], advice=["upgrade"],
        standing=True, at=position(line.origin)))


def _feature_fallback(st: State, lines: list[ProblemLine]) -> None:
    for line in lines:
        if "is not supported by the V1 Engine" not in line.message:
            continue  # the cheap test first: the feature's words are read only where the sentence is
        hit = _FEATURE.search(line.message)
        if hit is None or _HOST_WORDS.search(hit["what"]):
            continue
        what = hit["what"].strip()
        st.findings.append(Finding(
            id="v0-fallback:feature", severity="warning", confidence="medium",
            title=f"{clip(what, 100)} keeps this server on the V0 engine",
            summary=(f"vLLM's V1 engine does not support this setup in this release ({what}), so the whole server "
                     "runs on the older V0 engine — slower, and without V1's features."),
            evidence=[quoted(line)],
            remediation=["Change the setting the message names so the V1 engine takes it (the flags it names), or "
                         "upgrade to a release whose V1 engine supports it (its release notes say when); meanwhile "
                         "the server works on V0."],
            sources=[SOURCE], priority=48, part="engine", advice=["upgrade"], standing=True,
            at=position(line.origin)))
        return
