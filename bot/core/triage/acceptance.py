"""The acceptance model: a per-position curve judged against k and the method, and what it is worth.

vLLM's numbers per interval: `mean acceptance length` τ = 1 + accepted / drafts (the bonus token
included), so 1 ≤ τ ≤ k + 1, and the per-position rates p_0 ≥ p_1 ≥ … ≥ p_(k-1) with τ - 1 = Σ p_i
(docs/ACCEPTANCE.md). A mean means nothing without k: 2.42 is 71% of what k = 2 can give and 18% of
what k = 15 can.

Shape of the curve (each a different story):
- all-zero      nothing accepted at all: a hard bug (KV layout, mask token, weights), never tuning.
- collapse      position 0 already low (p_0 < 0.3): the drafter does not predict this target at all
                (wrong features, wrong drafter, a layer-offset bug).
- cliff         a healthy prefix, then exactly zero from one position on: something cuts the drafter's
                context at a fixed distance (sliding-window layers run wrong, a drafter trained for fewer
                positions than k).
- long-tail     a smooth decay whose last positions each add < 0.05: k is too high for this drafter.
- smooth-decay  each position a steady fraction of the one before: what healthy drafters do.

Cost model (an estimate, documented with its sources in docs/ACCEPTANCE.md): one speculative step
costs 1 + V·k + draft(method, k) target-decode steps at batch 1, where V is the extra cost of
verifying one more token in the same forward (decode is memory-bound, so it is small) and draft() is
what proposing costs — nothing for n-gram lookup, one small forward per token for MTP/EAGLE/draft
models, one parallel forward for a DFlash block. Speedup ≈ τ / cost (Leviathan et al., 2023, with
the cost ratio per method); break-even is τ = cost. A measured throughput beats the estimate.

With b requests running at once every verified token shares the forward with b − 1 others, so the same k
costs more (`batch_step_cost`) and the best k falls with the load (`best_k_at`, `k_advice`): the advice is
given per load, not once (docs/ACCEPTANCE.md, "Concurrency").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from bot.core.triage.knowledge import normalize_method

Shape = Literal["all-zero", "collapse", "cliff", "long-tail", "smooth-decay", "no-curve"]

ZERO = 0.005  # vLLM prints %.3f: below this a position printed 0.000
TPS_NOISE = 0.10  # a one-request tok/s this far under a reference is within run-to-run noise
COLLAPSE_P1 = 0.3  # the default floor of position 0's acceptance, every method (first_position_floor)
IDLE = 0.05  # a position that accepts less than this adds almost nothing
CLIFF_BEFORE = 0.1  # the last position before a cliff still accepts at least this, or
VISIBLE = 0.02  # the decay so far predicts the next position at least this (well above %.3f rounding)
VERIFY_COST = 0.02  # per verified draft token, relative to one target decode step

# method -> (fixed draft cost per step, draft cost per drafted token), relative to one target decode step
DRAFT_COST: dict[str, tuple[float, float]] = {
    "ngram": (0.0, 0.0),
    "suffix": (0.0, 0.005),
    "medusa": (0.03, 0.0),
    "mlp_speculator": (0.0, 0.03),
    "mtp": (0.0, 0.05),
    "eagle": (0.0, 0.05),
    "eagle3": (0.0, 0.06),
    "draft_model": (0.0, 0.10),
    "dflash": (0.25, 0.01),
}
DEFAULT_DRAFT_COST = (0.0, 0.06)


def first_position_floor(method: str | None, floors: Mapping[str, float] | None = None) -> float:
    """The floor of the one acceptance judgment every path makes — the triage, the watch, the shipped alert rules
    and the dashboard: the share of drafts whose first token is accepted. Position 0 does not depend on k (a
    longer draft only adds positions after it), so one number per method holds for k = 1 and k = 15 alike, where
    a floor on the mean acceptance length (at most k + 1) paged every healthy k = 1. `floors`: the config's
    `watch.rules.first_position_floor`, by method."""
    wanted = normalize_method(method)
    for name, floor in (floors or {}).items():
        if wanted is not None and normalize_method(name) == wanted:
            return float(floor)
    return COLLAPSE_P1


def step_cost(method: str | None, k: int) -> float:
    fixed, per = DRAFT_COST.get(method or "", DEFAULT_DRAFT_COST)
    return 1.0 + VERIFY_COST * k + fixed + per * k


def batch_step_cost(method: str | None, k: int, running: float = 1.0) -> float:
    """One speculative step with `running` requests batched, relative to one plain decode step of that batch.

    A forward's time grows with the tokens it carries: t(T) = 1 + V·(T − 1) target decode steps of batch 1
    (weights are read once; each token adds its compute). A plain step carries `running` tokens, a speculative
    one `running`·(k + 1), and the drafter's own forwards grow with the batch as the target's do. At one request
    this is `step_cost`; the more requests run, the more each verified token costs, so a k that pays at one
    request may not at eight (docs/ACCEPTANCE.md, "Concurrency")."""
    b = max(1.0, running)
    fixed, per = DRAFT_COST.get(method or "", DEFAULT_DRAFT_COST)
    plain = 1.0 + VERIFY_COST * (b - 1.0)
    spec = 1.0 + VERIFY_COST * (b * (k + 1) - 1.0) + (fixed + per * k) * plain
    return spec / plain


def speedup_at(per_position: list[float], method: str | None, k: int, running: float = 1.0) -> float:
    """Estimated speedup of the first `k` positions of a curve over no speculation, at `running` requests."""
    tau = 1.0 + sum(0.0 if math.isnan(x) else x for x in per_position[:k])
    return tau / batch_step_cost(method, k, running)


def best_k_at(per_position: list[float], method: str | None, running: float = 1.0) -> tuple[int, float]:
    """The k (1 … len(curve)) with the best estimated speedup at `running` requests, and that speedup."""
    best, best_s = 1, -1.0
    for kk in range(1, len(per_position) + 1):
        s = speedup_at(per_position, method, kk, running)
        if s > best_s + 1e-9:
            best, best_s = kk, s
    return best, best_s


@dataclass(frozen=True)
class KAdvice:
    """What a smaller k is worth at one load: best k, its estimated speedup and the current k's."""

    running: float
    k: int  # the current k
    best_k: int
    speedup_now: float
    speedup_best: float

    @property
    def gain(self) -> float:
        """Relative gain of best_k over the current k (0.05 = 5% faster)."""
        return self.speedup_best / self.speedup_now - 1.0 if self.speedup_now > 0 else 0.0


def k_advice(per_position: list[float], method: str | None, loads: list[float]) -> list[KAdvice]:
    """The best k at each load (number of requests running at once), on the measured curve."""
    p = [0.0 if math.isnan(x) else x for x in per_position]
    k = len(p)
    if not k:
        return []
    out = []
    for load in dict.fromkeys(max(1.0, x) for x in loads):
        best, s_best = best_k_at(p, method, load)
        out.append(KAdvice(load, k, best, speedup_at(p, method, k, load), s_best))
    return out


def estimated_speedup(mean: float, method: str | None, k: int | None) -> float | None:
    if k is None or k <= 0 or math.isnan(mean):
        return None
    return mean / step_cost(method, k)


@dataclass(frozen=True)
class Curve:
    """What the model says of one window."""

    shape: Shape
    k: int | None
    mean: float
    ceiling: float | None  # k + 1
    efficiency: float | None  # (mean - 1) / k: the share of drafted tokens accepted
    p1: float | None
    cliff_at: int | None  # position (0-based, as vLLM's `position` label) of the first zero after a healthy prefix
    idle_from: int | None  # position (0-based) from which every position adds < IDLE
    speedup: float | None
    break_even: float | None
    best_k: int | None  # the k with the best estimated speedup on this curve
    best_k_speedup: float | None
    k_known: bool = True  # False: p1 is only a bound from the mean (no per-position rates)

    def describe(self) -> str:
        words = {
            "all-zero": "nothing accepted at any position",
            "collapse": (f"a collapse from position 0 ({self.p1:.3f})" if self.p1 is not None and self.k_known
                         else f"a collapse: position 0 accepts at most {self.p1:.2f} (mean - 1)" if self.p1 is not None
                         else "a collapse"),
            "cliff": f"a healthy prefix, then exactly 0 from position {self.cliff_at}",
            "long-tail": f"a smooth decay; positions {self.idle_from}–{(self.k or 1) - 1} each add < {IDLE:.2f}",
            "smooth-decay": "a smooth decay",
            "no-curve": "no per-position rates",
        }
        return words[self.shape]


def classify(per_position: list[float], mean: float, k: int | None, method: str | None,
             accepted: int | None = None, floor: float = COLLAPSE_P1) -> Curve:
    p = [0.0 if math.isnan(x) else x for x in per_position]
    k = len(p) or k
    ceiling = float(k + 1) if k else None
    efficiency = (mean - 1.0) / k if k and not math.isnan(mean) else None
    cost = step_cost(method, k) if k else None
    speedup = mean / cost if cost and not math.isnan(mean) else None
    best_k, best_s = _best_k(p, method) if p else (None, None)
    if not p:
        shape: Shape = "all-zero" if (accepted == 0 or (not math.isnan(mean) and mean <= 1.0 + 1e-9)) else "no-curve"
        if shape == "no-curve" and not math.isnan(mean) and mean - 1.0 < floor:
            shape = "collapse"  # position 0 accepts at most mean - 1, whatever k is
        bound = mean - 1.0 if shape == "collapse" else None
        return Curve(shape, k, mean, ceiling, efficiency, bound, None, None, speedup, cost, None, None, False)
    p1 = p[0]
    idle_from = next((i for i in range(len(p)) if all(x < IDLE for x in p[i:])), None)
    cliff_at = _cliff(p, floor)
    if max(p) <= ZERO and (accepted is None or accepted == 0):
        shape = "all-zero"
    elif p1 < floor:
        shape = "collapse"
    elif cliff_at is not None:
        shape = "cliff"
    elif idle_from is not None:
        shape = "long-tail"
    else:
        shape = "smooth-decay"
    return Curve(shape, k, mean, ceiling, efficiency, p1, cliff_at, idle_from, speedup, cost, best_k, best_s)


def _cliff(p: list[float], floor: float = COLLAPSE_P1) -> int | None:
    """A healthy prefix, then every position printed 0.000 where the prefix's own decay says the next
    position should still show (≥ VISIBLE at %.3f): the drop is abrupt, not a decay into rounding."""
    if p[0] < floor:
        return None
    for j in range(1, len(p)):
        if all(x <= ZERO for x in p[j:]):
            before = p[j - 1]
            ratios = [p[i] / p[i - 1] for i in range(1, j) if p[i - 1] > 0]
            if any(r < 0.3 for r in ratios):
                return None  # it collapsed on the way down, not at one position
            trend = math.prod(ratios) ** (1.0 / len(ratios)) if ratios else 0.8
            if before * trend >= VISIBLE or before >= CLIFF_BEFORE:
                return j
            return None  # it decayed to nothing: a long tail, not a cliff
    return None


def _best_k(p: list[float], method: str | None) -> tuple[int, float]:
    return best_k_at(p, method, 1.0)
