"""CUDA graphs captured for smaller steps than the user asked: vLLM's config keeps only the capture sizes it can
capture (with speculative decoding, multiples of 1 + k) and, when `--max-cudagraph-capture-size` is not one of them,
lowers it and says so. A step of more tokens than the largest size runs without CUDA graphs — slower, silently, and
with speculative decoding a step of b requests is b × (1 + k) tokens.
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

# vLLM's own sentence (VllmConfig._set_cudagraph_sizes, 0.11.2 on)
_TRUNCATED = re.compile(r"\bTruncating max_cudagraph_capture_size to (?P<size>\d{1,6})\b")
SOURCES = ("https://github.com/vllm-project/vllm/blob/v0.34.0/vllm/config/vllm.py#L2525",
           "https://github.com/vllm-project/vllm/blob/v0.11.2/vllm/config/compilation.py#L948")
_FLAG = "--max-cudagraph-capture-size"


def capture_sizes(st: State) -> None:
    # low even with k known: the line proves the graphs' reach, not that the batches served go past it
    ev = st.ev
    line = next((p for p in [*ev.parsed.problems, *ev.parsed.loose] if _TRUNCATED.search(p.message)), None)
    if line is None:
        return
    hit = _TRUNCATED.search(line.message)
    assert hit is not None
    size = int(hit.group("size"))
    k = ev.context.num_speculative_tokens if spec_decoding(ev) == "on" else None
    per_step = (f"With speculative decoding at k = {k}, each decoding request takes {k + 1} tokens a step: the "
                f"graphs cover at most {size // (k + 1)} request(s) at once, and a batch of more runs eager."
                if k else "With speculative decoding, each decoding request takes 1 + k tokens a step.")
    st.findings.append(Finding(
        id="cudagraph-capture-size-truncated", severity="warning", confidence="low",
        title=f"CUDA graphs are captured only for steps of up to {size} tokens (`{_FLAG}` was lowered)",
        summary=(f"vLLM keeps only the capture sizes it can capture and lowered the maximum given to {size}: a step "
                 f"of more tokens runs without CUDA graphs, much slower, with no other sign in the log. {per_step}"),
        evidence=[quoted(line)],
        remediation=[f"Set `{_FLAG}` to the requests you serve at once × (1 + k) (a multiple of 1 + k with "
                     "speculative decoding), or list the sizes with `--compilation-config "
                     "'{\"cudagraph_capture_sizes\": […]}'`; restart and check the line is gone."],
        sources=list(SOURCES), priority=46, part="compilation", inputs=[_FLAG],
        knobs=[_FLAG, "--compilation-config"], at=position(line.origin)))
