"""An attention backend vLLM said it could not use, and the later failure that needed it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# vLLM's own words when it passes over an attention backend (platforms/cuda.py, attention/selector.py)
_CANNOT_USE_RE = re.compile(r"Cannot use (?P<backend>[A-Za-z][\w-]*(?: ?\d)?) backend "
                            r"(?P<why>(?:for|because|on) [^.]+)")
_GENERATION_WORD_RE = re.compile(r"\b(Kepler|Maxwell|Pascal|Volta|Turing|Ampere|Ada|Hopper|Blackwell)\b|compute "
                                 r"capability", re.IGNORECASE)


def backend_refused(st: State, p: ProblemLine) -> Finding | None:
    """An exception that asks for a backend vLLM said earlier it could not use ("Only FlashAttention backend is
    supported" after "Cannot use FlashAttention-2 backend for Volta and Turing GPUs"): the earlier line is why."""
    for q in [*st.ev.parsed.loose, *st.ev.parsed.problems]:
        hit = _CANNOT_USE_RE.search(q.message)
        if hit is None or position(q.origin) > position(p.origin):
            continue
        name = re.split(r"[-\d ]", hit["backend"])[0]
        if len(name) < 5 or name.lower() not in p.message.lower():
            continue
        backend, why = hit["backend"], hit["why"]
        return Finding(
            id="gpu-too-old" if _GENERATION_WORD_RE.search(why) else "backend-unavailable",
            title=f"{p.exception or 'The error'} needs the {backend} backend, which vLLM could not use: {why}",
            severity="critical", confidence="medium",
            summary=(f"The failing code requires {backend} ({clip(p.message, 120)}), and vLLM said before "
                     f"that it could not use that backend {why}, so it chose another."),
            evidence=[quoted(q, 200), quoted(p, 200)],
            remediation=[f"Run it where {backend} works ({why.removeprefix('for ').removeprefix('because ')} "
                         "is what rules it out), or use the feature's option for the backend this host has."],
            priority=42, part="attention")
    return None
