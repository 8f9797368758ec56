"""The fake vLLM's model of speculative decoding: what it knows of a drafter (its config.json or z-lab's
published facts), which release refuses which drafter, the acceptance rate per draft position by method and
release (the known DFlash failure modes included), and what a decode step costs by method, k and load.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.sim.vllm_serve_args import SpecConfig
from bot.sim.vllm_settings import Version

# z-lab/Qwen3.6-27B-DFlash as published (its config.json is gated, so the facts are built in).
QWEN36_DRAFTER_SUFFIX = "Qwen3.6-27B-DFlash"
QWEN36_LAYER_TYPES: tuple[str, ...] = ("sliding_attention",) * 4 + ("full_attention",)
QWEN36_TARGET_LAYER_IDS: tuple[int, ...] = (1, 16, 31, 46, 61)

MIXED_SWA_025 = (
    "NotImplementedError: DFlash does not yet support mixed sliding/full attention via layer_types; "
    "see https://github.com/vllm-project/vllm/issues/40898."
)
MIXED_SWA_026 = (
    "NotImplementedError: DFlash drafters with mixed sliding/full attention require the V2 model runner; "
    "relaunch with VLLM_USE_V2_MODEL_RUNNER=1."
)

# Marginal acceptance rate at position i is first * ratio**i (DFlash has its own rules below).
GEOMETRIC_RATES: dict[str, tuple[float, float]] = {
    "mtp": (0.95, 0.87),  # mean ~3.5 at 3 tokens: ~75 tok/s for one request, the brief's MTP (73.5)
    "eagle": (0.80, 0.75),
    "eagle3": (0.80, 0.75),
    "medusa": (0.80, 0.75),
    "mlp_speculator": (0.80, 0.75),
    "dspark": (0.80, 0.75),
    "ngram": (0.60, 0.70),
    "ngram_gpu": (0.60, 0.70),
    "suffix": (0.60, 0.70),
}
# Cost of one decode step relative to plain decoding (1.0) at REFERENCE_K speculative tokens: the
# drafter's forward pass is not free. See step_cost for how it grows with k.
STEP_COST: dict[str, float] = {
    "dflash": 1.7, "dspark": 1.7, "mtp": 1.4, "eagle": 1.4, "eagle3": 1.4, "medusa": 1.4,
    "mlp_speculator": 1.4, "draft_model": 1.5, "ngram": 1.1, "ngram_gpu": 1.1, "suffix": 1.1,
}
REFERENCE_K = 3
# Block drafters draft the whole block in one forward pass: their step cost does not depend on k. DFlash's 1.7 is
# the triage model's cost at the brief's k = 15 (docs/ACCEPTANCE.md), so the simulated host and the estimate agree.
BLOCK_DRAFTERS = frozenset({"dflash", "dspark"})


@dataclass(frozen=True)
class DrafterFacts:
    layer_types: tuple[str, ...] = ()  # empty: all full attention
    target_layer_ids: tuple[int, ...] | None = None
    published_ids: tuple[int, ...] | None = None  # z-lab's ids for this drafter, when we know them

    @property
    def mixed(self) -> bool:
        types = self.layer_types
        return "sliding_attention" in types and any(t != "sliding_attention" for t in types)


def _is_qwen36_drafter(name: str) -> bool:
    return name.rstrip("/").endswith(QWEN36_DRAFTER_SUFFIX)


def _read_drafter_config(drafter: str) -> dict[str, Any] | None:
    if not drafter or not Path(drafter).is_dir():
        return None
    try:
        data = json.loads((Path(drafter) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no readable config: fall back to what the name tells
    return data if isinstance(data, dict) else None


def drafter_facts(drafter: str | None) -> DrafterFacts:
    """A local drafter directory's config.json wins; else the built-in z-lab facts by name."""
    name = drafter or ""
    config = _read_drafter_config(name)
    # a local copy may sit under any name: its config's `_name_or_path` still says where it came from
    origin = str(config.get("_name_or_path", "")) if config is not None else ""
    known = _is_qwen36_drafter(name) or _is_qwen36_drafter(origin)
    published = QWEN36_TARGET_LAYER_IDS if known else None
    if config is None:
        if known:
            return DrafterFacts(QWEN36_LAYER_TYPES, QWEN36_TARGET_LAYER_IDS, published)
        return DrafterFacts()
    raw_types = config.get("layer_types")
    types = tuple(str(t) for t in raw_types) if isinstance(raw_types, list) else ()
    dflash = config.get("dflash_config")
    raw_ids = dflash.get("target_layer_ids") if isinstance(dflash, dict) else None
    ids = tuple(raw_ids) if isinstance(raw_ids, list) and all(type(i) is int for i in raw_ids) else None
    return DrafterFacts(types, ids, published)


def layer_offset(facts: DrafterFacts) -> str:
    """'published': z-lab's ids as shipped; 'shifted': +1 by hand (the pre-0.22.0 workaround)."""
    if facts.published_ids is None or facts.target_layer_ids is None:
        return "unknown"
    if facts.target_layer_ids == facts.published_ids:
        return "published"
    if facts.target_layer_ids == tuple(i + 1 for i in facts.published_ids):
        return "shifted"
    return "other"


def engine_problem(spec: SpecConfig | None, facts: DrafterFacts, version: Version, v2_runner: bool) -> str | None:
    """The NotImplementedError a release raises when it builds a mixed sliding/full DFlash drafter."""
    if spec is None or spec.method != "dflash" or not facts.mixed:
        return None
    if version[:2] == (0, 25):
        return MIXED_SWA_025
    if version >= (0, 26, 0) and not v2_runner:
        return MIXED_SWA_026
    return None


def step_cost(method: str | None, k: int) -> float:
    """One decode step's cost relative to plain decoding, for `method` drafting `k` tokens.

    The tok/s model: a step emits 1 + (accepted draft tokens) tokens, on average 1 + sum of the marginal
    acceptance rates of positions 0..k-1 (each decaying with position), and costs
    1 + a*k + a*k**2/9 units of base_tps time: a*k is drafting (one drafter pass a token), a*k**2/9 the
    target's extra work verifying a longer draft (attention over the draft, rejected tokens' KV). `a` is set
    so that the cost at k = REFERENCE_K (3) is the method's STEP_COST. Expected tokens grow ever slower with k
    while the cost grows faster, so tok/s peaks inside 1..8: for MTP at k = 4 (1.8x, 2.2x, 2.6x, 2.4x plain
    decoding at k = 1, 2, 4, 8), for ngram at k = 4 too. Block drafters (DFlash) pay one pass for the block.
    """
    base = STEP_COST.get(method or "", 1.0) if method else 1.0
    if method in BLOCK_DRAFTERS or base == 1.0:
        return base
    g = float(k + k * k / 9)
    a = (base - 1.0) / (REFERENCE_K + REFERENCE_K**2 / 9)
    return 1.0 + a * g


# What one more token in a forward costs, relative to one decode step of one request. A step with b requests
# running carries b tokens plainly and b·(k + 1) with speculation, so the verified tokens cost more the more
# requests share the forward and the best k falls with the load, as on a GPU once decoding stops being bound by
# reading the weights (docs/ACCEPTANCE.md, "Concurrency"; the triage's batch_step_cost is the same shape). The
# number is the simulator's, chosen so the trade-off shows within tune's default loads (1 and 8): for MTP, k = 4
# is the fastest at one request and k = 2 at eight.
LOAD_TOKEN_COST = 0.05


def load_factor(k: int, running: int) -> float:
    """How much slower one step of a request is with `running` requests in the batch than alone (1 at one)."""
    b = max(1, running)
    return (1.0 + LOAD_TOKEN_COST * (b * (k + 1) - 1)) / (1.0 + LOAD_TOKEN_COST * k)


def _geometric(first: float, ratio: float, k: int) -> list[float]:
    return [first * ratio**i for i in range(k)]


def _same_model(a: str, b: str) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)


def dflash_rates(k: int, facts: DrafterFacts, version: Version) -> list[float]:
    offset = layer_offset(facts)
    if version < (0, 22, 0) and offset == "published":
        # vllm#40727: before 0.22.0 the drafter reads the layer before the one it was trained on
        return ([0.166, 0.017] + [0.0] * k)[:k]
    # on 0.22.0+ a local +1 comes on top of vLLM's own +1: two layers off
    doubled = version >= (0, 22, 0) and offset == "shifted"
    rates = _geometric(0.45, 0.55, k) if doubled else _geometric(0.88, 0.80, k)
    if facts.mixed and (0, 20, 0) <= version < (0, 25, 0):
        rates = [r * 0.8 for r in rates]  # vllm#40898: the sliding-window layers run as full attention
    return rates


def acceptance_rates(spec: SpecConfig, facts: DrafterFacts, target: str, version: Version) -> list[float]:
    """Marginal acceptance rate per speculative position, before the control file's scale."""
    k = spec.num_tokens
    if spec.method == "dflash":
        return dflash_rates(k, facts, version)
    if spec.method == "draft_model":
        matched = spec.model is not None and _same_model(spec.model, target)
        return _geometric(0.97, 0.95, k) if matched else [0.0] * k  # another model's drafts never match
    first, ratio = GEOMETRIC_RATES.get(spec.method, (0.80, 0.75))
    return _geometric(first, ratio, k)


def conditional(rates: Sequence[float]) -> list[float]:
    """Marginal rates -> chance to accept position i given 0..i-1 were. A draft stops at its first
    rejection, so drawing these yields the marginal rates, never increasing with position."""
    out: list[float] = []
    previous = 1.0
    for rate in rates:
        rate = min(max(rate, 0.0), 1.0)
        out.append(min(rate / previous, 1.0) if previous > 0 else 0.0)
        previous = min(previous, rate)
    return out
