"""An attention kernel's own shape check, raised through a compiled operator: `RuntimeError: Expect (32 <= headDim
<= 2048) && (numTokensPerPage <= 128), got …` under `torch/_ops.py`. The words are the kernel library's (FlashInfer's
TRT-LLM kernels, a FlashAttention build), not vLLM's, so no release of vLLM prints them; what they check — the head
dimension, the tokens per KV page, the page (block) size — is what vLLM chose for the model and handed to the
attention backend it selected. Another backend takes other shapes: the switch of the backend is the test and the way
out; a block size the kernel takes is the other."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.triage.atlas_readers.candidates import traceback_frames
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.atlas_readers.same_line import step_back
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State

# a kernel's check naming attention's shapes (camelCase in the C++ kernels, snake_case in Python wrappers)
_SHAPE_WORDS = re.compile(r"\b(?:head_?dim\w*|head_?size|num_?tokens_?per_?page|tokens_?per_?page|page_?size|"
                          r"kv_?block_?size)\b", re.IGNORECASE)
_CHECK_WORDS = re.compile(r"\b(?:expect(?:ed|s)?|must|only support|not supported|unsupported|invalid)\b",
                          re.IGNORECASE)
_OP_FRAME = re.compile(r"torch/_ops\.py$|/flashinfer/|/vllm_flash_attn/|flash_attn")


# an attention kernel given a query and a KV cache of different dtypes (FlashAttention's and PyTorch's SDPA checks):
# the KV cache's dtype (`--kv-cache-dtype fp8`) reached a backend that reads it as the model's
_SAME_DTYPE = re.compile(r"\bquery(?:, key,? and value| and key| and value| key and value)\b[^\n]{0,20}"
                         r"\bmust have the same dtype", re.IGNORECASE)


def attention_kernel_check(st: State) -> None:
    kv_dtype_mismatch(st)
    if any(f.id == "attention-kernel-shape" for f in st.findings):
        return
    for line in st.ev.parsed.problems:
        if line.kind != "exception" or not (_SHAPE_WORDS.search(line.message)
                                            and _CHECK_WORDS.search(line.message)):
            continue
        frames = traceback_frames(st.ev.parsed.problems, line)
        if frames and not _OP_FRAME.search(frames[-1].frame_file or ""):
            continue  # raised in Python code, not by a compiled kernel
        at = position(line.origin)
        if any(f.at == at and f.site is not None and f.confidence != "low" for f in st.findings):
            continue  # vLLM's own check of these words: its site, placed by the atlas
        _claim(st, line, frames)
        return


def _claim(st: State, line: ProblemLine, frames: list[ProblemLine]) -> None:
    from bot.core import switches

    owner = next((o for f in reversed(frames) if (o := owners.of_path(f.frame_file or "")) is not None
                  and o.name not in ("torch", "python")), None)
    version = st.ev.context.vllm_version
    sw = switches.by_id("attention-backend")
    offer = sw.offer(version) if sw is not None else None
    off = sw.for_release(version) if sw is not None else None
    remediation = [offer[0]] if offer is not None else []
    remediation.append("Or give the kernel a shape it takes: the KV block size (`--block-size`) sets the tokens per "
                       "page where the model lets vLLM choose it; a hybrid (attention + Mamba) model's page size is "
                       "derived from its state size.")
    remediation.append("A release of the kernel library (and of vLLM pinning it) that lifts the limit also ends it.")
    at = position(line.origin)
    # PyTorch's frame carried the kernel's words; the kernel's check is the cause
    step_back(st, at, lambda f: f.id.startswith(("frame:", "atlas-frame:")) and f.confidence == "low")
    st.findings.append(Finding(
        id="attention-kernel-shape", severity="critical", confidence="low",
        title="An attention kernel refused the shapes it was given (head dimension, tokens per KV page)",
        summary=(f"A compiled kernel's own check failed: \"{clip(line.message, 200)}\". Its words name attention's "
                 "shapes — the head dimension and the KV cache's page — which vLLM chose for this model and handed "
                 "to the attention backend it selected; the kernel supports a narrower range than this model "
                 "needs."),
        evidence=[quoted(line)], remediation=remediation, sources=list(off.sources) if off is not None else [],
        priority=34, part="attention", inputs=["--block-size"],
        knobs=[offer[1]] if offer is not None else ["--attention-backend"], advice=["upgrade"], host=[],
        owner=owner.name if owner is not None else None, at=at, level=line.origin.level or "EXCEPTION"))


KV_DTYPE_DOC = "https://docs.vllm.ai/en/latest/features/quantization/quantized_kvcache/"


def kv_dtype_mismatch(st: State) -> None:
    from bot.core import switches

    line = next((p for p in [*st.ev.parsed.problems, *st.ev.parsed.loose]
                 if p.kind != "frame" and _SAME_DTYPE.search(p.message)), None)
    if line is None or any(f.id == "attention-dtype-mismatch" for f in st.findings):
        return
    sw = switches.by_id("attention-backend")
    offer = sw.offer(st.ev.context.vllm_version) if sw is not None else None
    st.findings.append(Finding(
        id="attention-dtype-mismatch", severity="critical", confidence="low",
        title="The attention kernel got a query and a KV cache of different dtypes",
        summary=("An attention kernel requires the query and the keys (the KV cache) in one dtype. The usual way "
                 "they differ is a KV cache stored in another dtype than the model's (`--kv-cache-dtype fp8`) "
                 "reaching a backend that does not read that dtype in this release; a model's own code handing the "
                 "kernel another dtype is the other."),
        evidence=[quoted(line)],
        remediation=["Start once with the KV cache in the model's dtype (`--kv-cache-dtype auto`): if it serves, "
                     "the backend in use does not take this KV-cache dtype — keep `auto`, or pick a backend that "
                     "supports it.", *([offer[0]] if offer is not None else [])],
        sources=[KV_DTYPE_DOC], priority=34, part="attention", inputs=["--kv-cache-dtype"],
        knobs=["--kv-cache-dtype", *([offer[1]] if offer is not None else [])], advice=[], host=[],
        at=position(line.origin), level=line.origin.level or "EXCEPTION"))
