"""The KV cache sized below one request of `max_model_len`: vLLM prints `GPU KV cache size: N tokens` and `Maximum
concurrency for M tokens per request: X x`; below 1x, a request as long as the server accepts never fits, and it
waits unscheduled (later releases refuse to start on the same condition: "To serve at least one request with the
model's max seq len …"). The settings that sized it are the inputs: an explicit `--num-gpu-blocks-override` when
the log shows one, else `--max-model-len` against `--gpu-memory-utilization`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import clip
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# vLLM's words (vllm/v1/core/kv_cache_utils.py, 0.7.3 on; V0's executor before)
_CONCURRENCY = re.compile(r"\bMaximum concurrency for (?P<len>[\d,]{1,12}) tokens per request: "
                          r"(?P<x>\d{1,7}(?:\.\d+)?)x")
_OVERRIDE = re.compile(r"\bwith num_gpu_blocks_override=(?P<n>\d{1,9})")
SOURCES = ("https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/core/kv_cache_utils.py",)


def kv_concurrency(st: State) -> None:
    if any(f.part == "kv-cache" and f.severity == "critical" for f in st.findings):
        return  # a refusal of the same condition (or another KV failure) already says it
    lines = [c.origin for c in st.ev.parsed.clues if c.kind == "progress" and c.origin.text]
    hit = next(((o, m) for o in lines if (m := _CONCURRENCY.search(o.text or "")) and float(m["x"]) < 1.0), None)
    if hit is None:
        return
    origin, m = hit
    override = next((o for o in lines if _OVERRIDE.search(o.text or "")), None)
    inputs = ["--num-gpu-blocks-override"] if override is not None else ["--max-model-len",
                                                                          "--gpu-memory-utilization"]
    why = (f"`--num-gpu-blocks-override` set the KV cache's size (`{clip(override.text or '', 100)}`)"
           if override is not None else "the memory left for the KV cache after the weights is too small for it")
    st.findings.append(Finding(
        id="kv-cache-below-one-request", severity="critical", confidence="medium",
        title=f"The KV cache holds {m['x']}x of one {m['len']}-token request: a request that long never fits",
        summary=(f"vLLM sized the KV cache below one request of the length it accepts "
                 f"(`{clip(origin.text or '', 120)}`): {why}. A prompt and its output that need more KV than the "
                 "cache holds wait unscheduled; later releases refuse to start on the same condition."),
        evidence=[f"line {origin.line_no}: {clip(origin.text or '', 200)}" if origin.line_no else
                  clip(origin.text or "", 200)],
        remediation=["Drop `--num-gpu-blocks-override` (or raise it: each block holds `--block-size` tokens) so vLLM "
                     "sizes the KV cache from the memory it has." if override is not None else
                     "Lower `--max-model-len` to what the KV cache holds, or raise `--gpu-memory-utilization` (or "
                     "free the GPU of other processes) so the KV cache holds at least one such request."],
        sources=list(SOURCES), priority=30, part="kv-cache", inputs=inputs, knobs=list(inputs),
        at=position(origin)))
