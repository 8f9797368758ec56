"""A refusal in words that names a setting and the one value it takes (`X in vLLM only supports
num_speculative_tokens=1`), printed alone (a log's title line, a paste without its traceback, a release the atlas did
not read): the setting is the input, the flag that sets it the fix — for the speculative depth, fewer tokens.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Advice, Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas
    from bot.core.triage.detectors.state import State

_ONLY = re.compile(r"\b(?:only supports?|requires?|must (?:be run |be used )?with) (?P<field>[a-z][a-z0-9_]{2,60})"
                   r"\s*(?:=|==)\s*'?(?P<value>[\w.\-]{1,40})'?")
_DEPTH = "num_speculative_tokens"


# a refusal quoting a setting at the value it was given (`… cannot serve … mamba_cache_mode='all' (only 'align' …)`):
# a snake_case name, one quoted value, and the words of a refusal around it
_QUOTED = re.compile(r"\b(?P<field>[a-z][a-z0-9]{1,30}(?:_[a-z0-9]{1,30}){1,5})\s*=\s*'(?P<value>[\w.\-]{1,40})'")
_ASKED = re.compile(r"\b(?:requires?|only supports?|supports? only|set|use)\s+$", re.IGNORECASE)
_REFUSING = re.compile(r"\b(?:cannot|can't|not supported|unsupported|only|must|requires?|invalid)\b", re.IGNORECASE)


def field_refusal(st: State) -> None:
    if any(f.severity == "critical" and f.confidence in ("high", "medium") for f in st.findings):
        return
    line = next((p for p in [*st.ev.parsed.problems, *st.ev.parsed.loose] if _ONLY.search(p.message)), None)
    if line is None:
        _quoted_setting(st)
        return
    from bot.core.atlas import load_atlas

    hit = _ONLY.search(line.message)
    assert hit is not None
    atlas: Atlas = load_atlas()
    version = st.ev.context.vllm_version
    found = atlas.knobs_for([f"?.{hit['field']}", f"self.{hit['field']}"], version)
    flag = next((k.flag for k in found), None)
    if flag is None:
        return
    field, value = hit["field"], hit["value"].rstrip(".")
    advice: list[Advice] = ["lower-k"] if field == _DEPTH else []
    f = _refused(line, field, flag, f"The message takes only `{field}={value}`",
                 f"A refusal that names the setting and the one value it takes: `{field}` ({flag}) must be {value} "
                 "here." + (" Fewer speculative tokens is the fix the words give." if advice else ""),
                 f"Set `{field}` to {value} (through `{flag}`), or use a release or model that takes the value you "
                 "gave (the release notes of later vLLM releases say when a check like this was relaxed).")
    f.advice = advice
    f.part = "spec-config" if flag == "--speculative-config" else "config"
    st.findings.append(f)


def _quoted_setting(st: State) -> None:
    """An error that quotes one of vLLM's settings at the value it was given, in a refusal's words: that setting,
    through the flag of the release, is the input and the thing to change (a library refusing vLLM's configuration —
    a KV connector, a plugin — says so in vLLM's own names)."""
    from bot.core.atlas import load_atlas

    atlas: Atlas = load_atlas()
    version = st.ev.context.vllm_version
    for line in [p for p in st.ev.parsed.problems if p.kind == "exception"
                 or (p.origin.level or "").upper() in ("ERROR", "CRITICAL")][:40]:
        hit = _QUOTED.search(line.message[:2000])
        # the value the message asks for (`use kv_cache_dtype='auto'`) is no value it refused; the refusal's words
        # stand near the setting they refuse
        if hit is None or _ASKED.search(line.message, max(0, hit.start() - 24), hit.start()) \
                or not _REFUSING.search(line.message, max(0, hit.start() - 80), hit.end() + 80):
            continue
        found = atlas.knobs_for([f"?.{hit['field']}", f"self.{hit['field']}"], version)
        flag = next((k.flag for k in found if k.flag.startswith("--") and k.flag != "--speculative-config"), None)
        if flag is None:
            continue
        field, value = hit["field"], hit["value"]
        st.findings.append(_refused(
            line, field, flag, f"The error refuses `{field}='{value}'`",
            f"The error quotes vLLM's setting `{field}` ({flag}) at the value it was given, '{value}', in a refusal's "
            "words: the setting is what it refused (the message says which values it takes).",
            f"Change `{flag}` from '{value}' to a value the message names as taken (or leave out the part that "
            "refuses it)."))
        return


def _refused(line: ProblemLine, field: str, flag: str, title: str, summary: str, remedy: str) -> Finding:
    return Finding(id=f"field-refused:{field}", severity="critical", confidence="low", title=title, summary=summary,
                   evidence=[quoted(line)], remediation=[remedy], priority=46, part="config", inputs=[field, flag],
                   knobs=[flag], at=position(line.origin))
