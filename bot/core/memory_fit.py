"""Will the target, the drafter and one `max_model_len` request fit the GPUs? The arithmetic vLLM's own start-up
checks do, before the hours of loading that end in them: the weights (what the checkpoint's files weigh) and the
KV cache a token needs (from each model's config: the layers that keep one, their key/value heads and head size)
against `gpu_memory_utilization` of each GPU's memory, split over the tensor-parallel GPUs. Pure.

What it cannot know — activations and CUDA graphs, which vLLM measures at start — it leaves out and says so, so a
fit is "fits before activations", and only a plain overflow refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

GIB = 1024 ** 3
# vLLM's default share of each GPU's memory (CacheConfig.gpu_memory_utilization)
DEFAULT_UTILIZATION = 0.9
# layer types that keep a key/value cache per token (a linear-attention or Mamba layer keeps a fixed state instead)
_FULL = frozenset({"full_attention", "attention", "global_attention"})
_SLIDING = frozenset({"sliding_attention", "local_attention", "chunked_attention"})
_DTYPE_BYTES = {"float32": 4, "fp32": 4, "float": 4, "float16": 2, "fp16": 2, "half": 2, "bfloat16": 2, "bf16": 2,
                "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "fp8_ds_mla": 1}


def _get(cfg: Mapping[str, Any], key: str) -> Any:
    if key in cfg:
        return cfg[key]
    text = cfg.get("text_config")
    return text.get(key) if isinstance(text, Mapping) else None


@dataclass(frozen=True)
class KvShape:
    """What one token costs in a model's KV cache, in bytes over all GPUs: in its full-attention layers for every
    token, in its sliding-window layers only up to the window."""

    full_bytes: int
    sliding_bytes: int = 0
    window: int = 0
    said: str = ""

    def bytes_at(self, tokens: int) -> int:
        return self.full_bytes * tokens + self.sliding_bytes * min(tokens, self.window or tokens)


def kv_shape(cfg: Mapping[str, Any], element_bytes: int, fallback: Mapping[str, Any] | None = None) -> KvShape | None:
    """The KV cost of a token for the model `cfg` describes; its heads and head size from `fallback` (the target's,
    for a drafter that states none). None when the config does not say enough."""
    def num(key: str) -> int | None:
        for source in (cfg, fallback or {}):
            value = _get(source, key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None

    layers = _get(cfg, "num_hidden_layers")
    heads = num("num_attention_heads")
    kv_heads = num("num_key_value_heads") or heads
    hidden = num("hidden_size")
    head_dim = num("head_dim") or (hidden // heads if hidden and heads else None)
    if not isinstance(layers, int) or not kv_heads or not head_dim:
        return None
    types = _get(cfg, "layer_types")
    interval = _get(cfg, "full_attention_interval")
    if isinstance(types, list) and types:
        full = sum(1 for t in types if t in _FULL)
        sliding = sum(1 for t in types if t in _SLIDING)
        how = f"{full} full-attention and {sliding} sliding-window of {len(types)} layers"
    elif isinstance(interval, int) and interval > 0:
        full, sliding = layers // interval, 0
        how = f"{full} full-attention of {layers} layers (one in {interval})"
    else:
        full, sliding = layers, 0
        how = f"{layers} attention layers"
    window = _get(cfg, "sliding_window")
    per_layer = 2 * kv_heads * head_dim * element_bytes  # a key and a value per head
    return KvShape(full * per_layer, sliding * per_layer if isinstance(window, int) else 0,
                   window if isinstance(window, int) else 0,
                   f"{how} × 2 × {kv_heads} KV heads × {head_dim} × {element_bytes} B")


def element_bytes(kv_cache_dtype: str | None, model_dtype: str | None) -> int:
    """Bytes per cached element: `--kv-cache-dtype` when set ("auto": the model's), else the model's dtype."""
    for dtype in (kv_cache_dtype, model_dtype):
        if isinstance(dtype, str) and dtype.lower() in _DTYPE_BYTES:
            return _DTYPE_BYTES[dtype.lower()]
    return 2


@dataclass(frozen=True)
class Fit:
    """One request of `max_model_len` tokens on `gpus` GPUs at `utilization`: the budget, what it holds, and the
    largest `max_model_len` that would fit (before activations)."""

    budget: int  # bytes, all GPUs: each GPU's total × utilization
    weights: int
    kv: int  # for one request of max_model_len
    max_model_len: int
    largest_len: int  # 0: not even the weights fit

    @property
    def fits(self) -> bool:
        return self.weights + self.kv <= self.budget

    @property
    def left(self) -> int:
        return self.budget - self.weights - self.kv


def fit(gpu_total_bytes: list[int], utilization: float, weights: int, shapes: list[KvShape],
        max_model_len: int) -> Fit:
    budget = int(sum(gpu_total_bytes) * utilization)
    kv = sum(s.bytes_at(max_model_len) for s in shapes)
    room = budget - weights
    largest = 0
    if room > 0:  # the longest context whose one request fits (sliding layers cost at most their window)
        lo, hi = 0, max(max_model_len, 1) * 64
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if sum(s.bytes_at(mid) for s in shapes) <= room else (lo, mid - 1)
        largest = lo
    return Fit(budget, weights, kv, max_model_len, largest)


def gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"
