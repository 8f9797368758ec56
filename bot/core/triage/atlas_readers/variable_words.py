"""A line that calls an environment variable's value too small or too large (`HCCL_BUFFSIZE is too SMALL, … need
609MB`): the library that reads the variable says which setting to change, whichever process printed it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# an environment variable's name (a library's prefix, then words), said to be too small or too large
_TOO = re.compile(r"\b(?P<name>(?:NCCL|HCCL|RCCL|VLLM|CUDA|TORCH|PYTORCH|OMP|UCX|GLOO|HF|ASCEND|HIP|MIOPEN)"
                  r"_[A-Z0-9_]{2,60})\s+is\s+too\s+(?P<way>small|large|low|high|big)\b", re.IGNORECASE)


def variable_words(st: State) -> None:
    if any(f.severity == "critical" and f.confidence in ("high", "medium") for f in st.findings):
        return  # something surer already answers the log
    for p in [*st.ev.parsed.problems, *st.ev.parsed.loose]:
        hit = _TOO.search(p.origin.text or p.message)
        if hit is None or not hit["name"].isupper():
            continue
        name, way = hit["name"], hit["way"].lower()
        more = way in ("small", "low")
        st.findings.append(Finding(
            id=f"variable-too-{'small' if more else 'large'}:{name}",
            title=f"`{name}` is too {way} for what the code needs",
            severity="critical", confidence="medium",
            summary=(f"The library that reads `{name}` says its value is too {way} for this run (the line gives "
                     "what it needs, where it says so)."),
            evidence=[quoted(p)],
            remediation=[f"Set `{name}` {'higher' if more else 'lower'} where the process starts (the container's or "
                         "the job's environment), to at least what the line says is needed; then relaunch."],
            priority=36, inputs=[name], knobs=[name], at=position(p.origin)))
        return
