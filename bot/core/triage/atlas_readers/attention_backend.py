"""An attention backend vLLM said it could not use, and the later failure that needed it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas
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


# the configuration vLLM's backend selection judged, printed with its refusal (`No valid attention backend found
# for cuda with AttentionSelectorConfig(head_size=128, dtype=…, kv_cache_dtype=auto, block_size=8, …)`)
_SELECTOR_RE = re.compile(r"AttentionSelectorConfig\((?P<fields>[^()]{1,600})")
_FIELD_RE = re.compile(r"(?P<key>[a-z_]{2,40})=(?P<value>[^,()]{1,60})")


def selector_settings(atlas: Atlas, message: str, version: str | None) -> tuple[list[str], str | None]:
    """The flags that set the fields of the configuration the selection judged (`--block-size`, `--kv-cache-dtype`,
    `--dtype`), and a sentence naming them with their values; every backend refused that configuration, so one of
    those values (or the model's own: head size, MLA, sinks) is why."""
    hit = _SELECTOR_RE.search(message)
    if hit is None:
        return [], None
    named: dict[str, str] = {}
    for field in _FIELD_RE.finditer(hit["fields"]):
        flags = atlas.knobs_for([f"?.{field['key']}", f"self.{field['key']}"], version)
        flag = next((k.flag for k in flags if k.flag != "--speculative-config"), None)
        if flag and flag not in named:
            named[flag] = field["value"].strip()
    if not named:
        return [], None
    said = ", ".join(f"`{flag}` ({value})" for flag, value in named.items())
    return list(named), (f"No attention backend takes the configuration the selection judged: of what you set, "
                         f"{said}; change the one a backend refuses (the refusal's reasons, or the backends' "
                         "documentation, say which), or pick the backend that takes it.")
