"""NaN or infinity in what the server computed: Python's JSON encoder refusing a non-finite float while the server
writes a response (in the server's traceback, or quoted back to the client in an error body). The request asked for
numbers the model run produced — logprobs, scores, embeddings — and one came out NaN: a numerical fault in that run,
not in the request. The server goes on; requests that hit it fail.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.detectors.common import spec_decoding
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# CPython's json encoder with allow_nan off (as Starlette's and FastAPI's JSON responses are)
_NONFINITE = re.compile(r"\bOut of range float values are not JSON compliant\b")
JSON_DOC = "https://docs.python.org/3/library/json.html#json.dump"


def nonfinite_output(st: State) -> None:
    ev = st.ev
    line = next((p for p in [*ev.parsed.problems, *ev.parsed.loose] if _NONFINITE.search(p.message)), None)
    if line is None or any(f.severity == "critical" and f.confidence in ("high", "medium") for f in st.findings):
        return
    spec = spec_decoding(ev) == "on"
    first = ("Speculative decoding is on: serve once without `--speculative-config` and send the same request — if "
             "the numbers come out finite, the drafter's path computes them wrong (report it with the request); "
             if spec else "")
    st.findings.append(Finding(
        id="nonfinite-output", severity="warning", confidence="low",
        title="The server computed NaN or infinity for a number a response carries (logprobs, scores, embeddings)",
        summary=("Python's JSON encoder refused a non-finite float while the server wrote a response: the model run "
                 "produced NaN or infinity for a value the request asked for. That request failed; the server goes "
                 "on." + (" With speculative decoding on, the drafter's path is the first part to rule out." if spec
                          else "")),
        evidence=[quoted(line)],
        remediation=[first + "otherwise rule out the numerics one at a time: `--dtype bfloat16` where float16 "
                     "overflows, `--kv-cache-dtype auto` instead of an fp8 cache, the unquantized checkpoint."],
        sources=[JSON_DOC], priority=47, part="drafter" if spec else None,
        knobs=["--speculative-config"] if spec else ["--dtype", "--kv-cache-dtype"], at=position(line.origin)))
