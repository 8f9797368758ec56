"""`Unknown vLLM environment variable detected: VLLM_ATTENTION_BACKEND`: vLLM (0.17.1 on) names the `VLLM_*` variables
it does not read. When earlier releases did read that one, it is a setting this release dropped — what it set is
silently not applied (the server runs, without it). The atlas says the last release that reads it, and the flag of
the same words that took its place, when there is one: then the setting is lost unless given there (a warning);
without one, the variable may have lost its purpose with its feature (a note)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# vLLM's words (vllm/envs.py `validate_environ` 0.17.1–0.30.0, then the platform's)
_UNKNOWN = re.compile(r"\bUnknown vLLM environment variable detected:\s*(?P<name>VLLM_[A-Z0-9_]{2,80})\b")
SOURCE = "https://github.com/vllm-project/vllm/blob/v0.17.1/vllm/envs.py"


def dropped_variable(st: State) -> None:
    lines = [p for p in [*st.ev.parsed.problems, *st.ev.parsed.loose] if _UNKNOWN.search(p.message)]
    if not lines:
        return
    from bot.core.atlas import load_atlas

    atlas = load_atlas()
    for p in lines:
        hit = _UNKNOWN.search(p.message)
        assert hit is not None
        name = hit["name"]
        read_by = [r for r in atlas.releases if name in atlas.env_vars(r)]
        if not read_by or read_by[-1] == atlas.releases[-1] or any(f.id == f"dropped-variable:{name}"
                                                                     for f in st.findings):
            continue  # a name no release reads (a typo, a Service's link variable), or one still read
        flag = "--" + name.removeprefix("VLLM_").lower().replace("_", "-")
        instead = flag if atlas.flag_span(flag) is not None else None
        # a setting that moved to a flag is lost unless given there; one that did not (`VLLM_USE_V1` once its engine
        # was the only one) may matter no more: a note
        st.findings.append(Finding(
            id=f"dropped-variable:{name}", severity="warning" if instead else "info", confidence="medium",
            title=f"`{name}` is no longer read by this vLLM (the last release that reads it is {read_by[-1]}): "
                  "what it set is not applied",
            summary=(f"vLLM reports `{name}` as unknown: releases {read_by[0]}–{read_by[-1]} read it, this one does "
                     "not, so the server runs without the setting it was meant to make."
                     + (f" `{instead}` sets the same thing now." if instead else "")),
            evidence=[quoted(p)],
            remediation=[f"Set it with `{instead}` instead (and drop `{name}`)." if instead else
                         f"Read the release notes after {read_by[-1]} for what replaced `{name}`, and drop it."],
            sources=[SOURCE], priority=45, part="config", inputs=[name], knobs=[instead] if instead else [],
            standing=True, at=position(p.origin), level=p.origin.level or "WARNING"))
