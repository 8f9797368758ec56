"""`KeyError: 'layers.0.mlp.down_proj.weight_scale'` out of a model's `load_weights`: a checkpoint tensor the
weight loader of this release has no parameter for."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.quoting import quoted, short_path
from bot.core.triage.atlas_readers.releases import upgrade_steps
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas

_WEIGHT_KEY_RE = re.compile(r"^'(?P<key>(?:[\w]+\.)+\w+)'$")
# a parameter's name as checkpoints spell it (`model.layers.0.mlp.down_proj.weight`, `lm_head.bias`)
# a layer's tensor, or the KV cache's quantization scales an attention layer holds (`attn.kv_scale`, `k_scale`)
_TENSOR_KEY_RE = re.compile(r"\.(?:weight|bias|kv_scale|k_scale|v_scale|q_scale)$")
_QUANT_TENSOR_RE = re.compile(r"(?:weight_scale|input_scale|g_idx|qweight|qzeros|scales|zero_point|weight_packed|"
                              r"weight_shape|_scale_inv|absmax|quant_map|bitsandbytes__nf4|bitsandbytes__fp4)$")

# the tensors of a packed integer layout (AutoAWQ/AutoGPTQ `qweight`, `qzeros`, `scales`, `g_idx`; compressed-tensors
# `weight_packed`): a loader with no such parameter built the model unquantized or for another method
_PACKED_INT_RE = re.compile(r"(?:^|\.)(?:qweight|qzeros|g_idx|weight_packed|weight_zero_point)$")
PACKED_INT_STEP = ("These are the tensors of a packed int4/int8 checkpoint: if the loader has no such parameter, the "
                   "model was built without that quantization — vLLM did not detect it. Check `quantization_config` "
                   "in the checkpoint's config.json, and pass `--quantization` with the checkpoint's method (awq, "
                   "gptq, their marlin forms, compressed-tensors).")


# bitsandbytes' quantization state, saved beside each 4-bit weight (`QuantState.as_dict` names them: absmax,
# quant_map, nested_absmax, nested_quant_map, quant_state.bitsandbytes__nf4/fp4): a pre-quantized bnb checkpoint
_BNB_STATE_RE = re.compile(r"(?:^|\.)(?:absmax|quant_map|nested_absmax|nested_quant_map|"
                           r"quant_state\.bitsandbytes__(?:nf4|fp4))$")
BNB_DOC = "https://docs.vllm.ai/en/v0.6.3.post1/quantization/bnb.html"
BNB_SOURCE = "https://github.com/bitsandbytes-foundation/bitsandbytes/blob/main/bitsandbytes/functional.py"
BNB_STEP = ("These are bitsandbytes' 4-bit quantization state (absmax, quant_map): a pre-quantized bitsandbytes "
            "checkpoint loaded as an unquantized model. Pass `--quantization bitsandbytes` (releases of 2024 also need "
            f"`--load-format bitsandbytes`; vLLM's BitsAndBytes page: {BNB_DOC}).")


def packed_int(key: str) -> bool:
    return _PACKED_INT_RE.search(key) is not None


def quantized_layout(key: str) -> tuple[str, list[str], list[str]] | None:
    """For a checkpoint tensor that belongs to a quantized layout vLLM loads only when told the method: the step to
    take, the flags it sets and its sources."""
    if packed_int(key):
        return PACKED_INT_STEP, ["--quantization"], []
    if _BNB_STATE_RE.search(key):
        return BNB_STEP, ["--quantization", "--load-format"], [BNB_DOC, BNB_SOURCE]
    return None


def unknown_weight(atlas: Atlas, cand: Candidate, version: str | None) -> Finding | None:
    """The checkpoint holds a tensor this release's loader for that architecture has no parameter for — most
    often a quantized layout (scales, g_idx) the loader learned in a later release."""
    p = cand.line
    hit = _WEIGHT_KEY_RE.match(p.message.strip())
    if hit is None or (p.exception or "").rsplit(".", 1)[-1] != "KeyError":
        return None
    frames = [f for f in cand.frames if f.frame_function == "load_weights" and "model_executor/models/" in
              (f.frame_file or "")]
    key = hit["key"]
    quant = _QUANT_TENSOR_RE.search(key) is not None
    # no traceback at all (an issue's title, a paste of its last line): a key named as a tensor still is one (a
    # quantized layout's own tensors are read by their words: frame_first's reader of the key)
    bare = not cand.frames and not quant and _TENSOR_KEY_RE.search(key) is not None
    if not frames and not bare and not any("load_weights" in (b.message or "") for b in cand.before):
        return None
    model_file = short_path(frames[-1].frame_file or "") if frames else "a model's loader"
    steps, advice = upgrade_steps(version, "model loaders", atlas.releases)
    remediation = [f"The checkpoint has `{key}`, which {model_file} (`load_weights`) has no parameter for"
                   + (": a quantized tensor — the checkpoint's quantization layout is newer than this loader, or "
                      "not one vLLM supports for this architecture." if quant else "."), *steps,
                   "Or use a checkpoint in a format this release loads (the model card's vLLM version, another "
                   "quantization)."]
    layout = quantized_layout(key)
    knobs = layout[1] if layout is not None else []
    if layout is not None:
        remediation.insert(1, layout[0])
    return Finding(
        id=f"unknown-weight:{key.rsplit('.', 1)[-1]}", title=f"The checkpoint holds a tensor vLLM's loader does not "
                                                             f"know: {key}",
        severity="critical", confidence="low" if bare and not frames else "medium",
        summary=f"KeyError in {model_file} load_weights: no parameter named `{key}`."
                + (" (The log shows no traceback: the key's name alone says it is a checkpoint tensor.)"
                   if bare and not frames else ""),
        evidence=[quoted(p)], remediation=remediation,
        priority=40, part="quantization" if quant else "model-loading", advice=advice, is_bug=layout is None,
        knobs=knobs, sources=layout[2] if layout is not None else [])
