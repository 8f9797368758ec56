"""Speculation that does not pay: one request slower than the reference, a speedup below 1 by the cost model,
or a load at which no k beats plain decoding."""

from __future__ import annotations

from bot.core.triage.acceptance import TPS_NOISE, estimated_speedup
from bot.core.triage.detectors.common import base_params
from bot.core.triage.detectors.state import Found, State, issue_finding
from bot.core.triage.evidence import Evidence
from bot.core.triage.findings import Confidence
from bot.core.triage.knowledge import KnowledgeBase


def estimate_speedup(ev: Evidence, kb: KnowledgeBase) -> tuple[float | None, float | None]:
    """(estimated speedup over no speculation, break-even mean) from the acceptance model."""
    w = ev.window
    k = (w.k if w else 0) or ev.context.num_speculative_tokens
    if w is None or not k:
        return None, None
    from bot.core.triage.acceptance import step_cost

    return estimated_speedup(w.mean, ev.context.method, k), step_cost(ev.context.method, k)


def h_not_paying(st: State) -> Found:
    out = Found()
    ev, kb = st.ev, st.kb
    w = ev.window
    if w is None:
        return out
    ctx = ev.context
    speedup, be = estimate_speedup(ev, kb)
    reasons: list[str] = []
    evidence: list[str] = []
    confidence: Confidence = "medium"
    measured = ctx.probe_tps or (ev.engine.single_request_tps if ev.engine else None)
    if ctx.baseline_tps and measured is not None:
        how = "a completion probe" if ctx.probe_tps else "the Engine line with one request running"
        evidence.append(f"one request: {measured:.1f} tok/s (from {how}); the reference (profile baseline_tps) "
                        f"{ctx.baseline_tps:.1f} tok/s")
        # one request's tok/s varies by a few percent run to run: only a gap beyond that says anything
        if measured < ctx.baseline_tps * (1 - TPS_NOISE):
            reasons.append(f"one request generates {measured:.1f} tok/s, {1 - measured / ctx.baseline_tps:.0%} "
                           f"below the reference's {ctx.baseline_tps:.1f} tok/s")
            confidence = "high"
    elif speedup is not None and be is not None:
        evidence.append(f"mean acceptance length {w.mean:.2f}; at k = {w.k or ctx.num_speculative_tokens} one "
                        f"{ctx.method or 'speculative'} step costs ≈ {be:.2f} decode steps (estimate, "
                        f"docs/ACCEPTANCE.md) → estimated speedup ≈ {speedup:.2f}×")
        if speedup < 1.0 and ctx.method != "ngram":
            reasons.append(f"at a mean acceptance length of {w.mean:.2f} {ctx.method or 'speculation'} likely runs "
                           f"slower than no speculation (estimated {speedup:.2f}×; break-even ≈ {be:.2f})")
            if ctx.baseline_tps:
                reasons.append(f"the reference ({ctx.baseline_tps:.1f} tok/s, profile baseline_tps) is the better "
                               "choice until this is fixed")
    loaded = _no_k_pays_at_load(st)
    if loaded is not None:
        reasons.append(loaded[0])
        evidence.append(loaded[1])
    if not reasons:
        out.consider(st, "not-paying-off", "ruled-out", evidence[0] if evidence else "no throughput to compare")
        return out
    out.consider(st, "not-paying-off", "fits", "; ".join(reasons))
    detail = "; ".join(reasons).capitalize() + "."
    finding = issue_finding(st, "not-paying-off", severity="warning", confidence=confidence, evidence=evidence,
                            params=base_params(ev) | {"detail": detail}, priority=55)
    if loaded is not None and len(reasons) == 1:
        # the drafter is not at fault: the load is; the remedy is where speculation runs, not which drafter
        host = ctx.host or "<host>"
        finding.remediation = [
            "At this load serve without `--speculative-config` (plain decoding is faster once the batch is large), "
            "or keep speculation for the hours with few requests running.",
            "Measure both at your real load before choosing: `specops tune PROFILE --host "
            f"{host} --methods none,{ctx.method or 'mtp'} --concurrency 1,{min(int(loaded_at(st)), 64)}`."]
    out.findings.append(finding)
    return out


def loaded_at(st: State) -> float:
    seen, _ = st.ev.loads()
    return max(seen[0], 1.0) if seen else 1.0


def _no_k_pays_at_load(st: State) -> tuple[str, str] | None:
    """At the load the Engine lines show, even the best k may cost more than it saves: with many requests batched
    each verified token costs compute (docs/ACCEPTANCE.md, "Concurrency"), and no k beats plain decoding."""
    from bot.core.triage.acceptance import best_k_at

    w = st.ev.window
    if w is None or not w.per_position:
        return None
    seen, where = st.ev.loads()
    at = max(seen[0], 1.0) if seen else 1.0
    if at <= 1.0:
        return None
    best, speedup = best_k_at(w.per_position, st.ev.context.method, at)
    if speedup >= 1.0:
        return None
    return (f"at ~{at:g} running requests no k pays: even num_speculative_tokens: {best} is estimated at "
            f"{speedup:.2f}× of plain decoding, since each verified token costs compute once the batch is large",
            f"load ~{at:g} running requests ({where or 'Engine lines'}); best k there {best}, estimated "
            f"{speedup:.2f}× (cost model under batching, docs/ACCEPTANCE.md)")
