"""A refusal in words that names a setting and the one value it takes (`X in vLLM only supports
num_speculative_tokens=1`), printed alone (a log's title line, a paste without its traceback, a release the atlas did
not read): the setting is the input, the flag that sets it the fix — for the speculative depth, fewer tokens.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Advice, Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas
    from bot.core.triage.detectors.state import State

_ONLY = re.compile(r"\b(?:only supports?|requires?|must (?:be run |be used )?with) (?P<field>[a-z][a-z0-9_]{2,60})"
                   r"\s*(?:=|==)\s*(?P<value>[\w.\-]{1,40})")
_DEPTH = "num_speculative_tokens"


def field_refusal(st: State) -> None:
    if any(f.severity == "critical" and f.confidence in ("high", "medium") for f in st.findings):
        return
    line = next((p for p in [*st.ev.parsed.problems, *st.ev.parsed.loose] if _ONLY.search(p.message)), None)
    if line is None:
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
    st.findings.append(Finding(
        id=f"field-refused:{field}", severity="critical", confidence="low",
        title=f"The message takes only `{field}={value}`",
        summary=(f"A refusal that names the setting and the one value it takes: `{field}` ({flag}) must be "
                 f"{value} here." + (" Fewer speculative tokens is the fix the words give." if advice else "")),
        evidence=[quoted(line)],
        remediation=[f"Set `{field}` to {value} (through `{flag}`), or use a release or model that takes the value "
                     "you gave (the release notes of later vLLM releases say when a check like this was relaxed)."],
        priority=46, part="spec-config" if flag == "--speculative-config" else "config", inputs=[field, flag],
        knobs=[flag], advice=advice, at=position(line.origin)))
