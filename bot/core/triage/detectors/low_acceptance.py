"""Acceptance below what the method typically reaches: a collapse (a mismatched pairing, or a self-drafter that
collapsed) or a curve that is merely low."""

from __future__ import annotations

from bot.core.triage.detectors.common import P1_MARGIN, base_params, window_evidence
from bot.core.triage.detectors.state import Found, State, issue_finding
from bot.core.triage.knowledge import KnowledgeBase

PAYING = 1.3  # an estimated speedup at or above this makes low acceptance a note, not a problem
TYPICAL_DECAY = 0.8  # each position ~80% of the one before, on a matched pair (acceptance.md's curves)


def h_drafter_mismatch(st: State) -> Found:
    out = Found()
    ev, kb, c = st.ev, st.kb, st.curve
    if c is None or ev.window is None or ev.context.method in (None, "ngram"):
        return out
    if c.shape not in ("collapse", "all-zero"):
        out.consider(st, "drafter-mismatch", "ruled-out", f"position 0 accepts {c.p1:.2f}" if c.p1 is not None
                     else "no per-position rates show a collapse")
        return out
    if st.bug_known:
        out.consider(st, "drafter-mismatch", "possible", "a known upstream bug explains the collapse; check the "
                                                         "pairing if the fix does not help")
        return out
    if c.shape == "all-zero" and ev.context.method != "draft_model":
        return out  # zero-acceptance says it
    facts = kb.method(ev.context.method)
    if ev.context.method == "mtp":  # the drafter is the model's own head: no pairing to get wrong
        out.consider(st, "drafter-mismatch", "not-applicable", "the MTP head is part of the target checkpoint")
        out.consider(st, "self-drafter-collapse", "fits", c.describe())
        f = issue_finding(st, "self-drafter-collapse", severity="critical", confidence="medium",
                          evidence=window_evidence(ev.window, c), params=base_params(ev), priority=25)
        threads = [e for e in st.base.entries if e.hypothesis in ("self-drafter-collapse", "zero-acceptance")
                   and ("mtp" in e.affected.methods)]
        f.upstream += [u for e in threads for u in e.upstream]
        f.sources += [s for e in threads for s in e.sources]
        out.findings.append(f)
        return out
    out.consider(st, "drafter-mismatch", "fits", c.describe())
    params = base_params(ev) | {"floor": facts.healthy_pos0, "healthy_range": facts.healthy_range}
    evidence = window_evidence(ev.window, c)
    if ev.context.drafter:
        evidence.append(f"drafter {ev.context.drafter}, target {ev.context.target_model or 'unknown'}")
    separate = ev.context.method == "draft_model" and bool(ev.context.drafter)
    out.findings.append(issue_finding(st, "drafter-mismatch", severity="critical",
                                      confidence="high" if separate else "medium", evidence=evidence, params=params,
                                      priority=25))
    return out


def typical_mean(kb: KnowledgeBase, method: str | None, k: int) -> float | None:
    """What a matched pair of this method gives at k: p1 typical, each position ~0.8 of the one before."""
    p1 = kb.method(method).healthy_pos0
    if p1 is None or k <= 0:
        return None
    return 1.0 + sum(p1 * TYPICAL_DECAY ** i for i in range(k))


def h_low_acceptance(st: State) -> Found:
    out = Found()
    ev, kb, c = st.ev, st.kb, st.curve
    method = ev.context.method
    if c is None or ev.window is None or method in (None, "ngram") or c.shape in ("collapse", "all-zero"):
        return out
    facts = kb.method(method)
    if facts.healthy_pos0 is None:
        return out
    if c.p1 is not None:
        floor = facts.healthy_pos0 - P1_MARGIN
        if c.p1 >= floor:
            out.consider(st, "low-acceptance", "ruled-out", f"position 0 accepts {c.p1:.2f} (a matched {method} pair "
                                                            f"typically ≥ {facts.healthy_pos0:.2f})")
            return out
        why = f"position 0 accepts {c.p1:.2f}; a matched {method} pair typically accepts ≥ {facts.healthy_pos0:.2f}"
    else:
        k = c.k
        typ = typical_mean(kb, method, k) if k else None
        if k is None or typ is None:
            return out
        if c.mean >= 1.0 + 0.5 * (typ - 1.0):
            out.consider(st, "low-acceptance", "ruled-out", f"mean {c.mean:.2f} at k = {k} (typical ≈ {typ:.2f})")
            return out
        why = (f"mean {c.mean:.2f} of at most {k + 1} (k = {k}): a matched {method} pair typically gives ≈ "
               f"{typ:.2f} at this k")
    if st.bug_fits:
        out.consider(st, "low-acceptance", "possible", why + "; a known bug above explains it")
        return out
    out.consider(st, "low-acceptance", "fits", why)
    params = base_params(ev) | {"floor": f"{facts.healthy_pos0:.2f} at position 0",
                                "healthy_range": facts.healthy_range}
    # below what the method typically reaches, but still clearly faster than no speculation: a note, not a problem
    paying = c.speedup is not None and c.speedup >= PAYING
    f = issue_finding(st, "low-acceptance", severity="info" if paying else "warning", confidence="medium",
                      evidence=[why, *window_evidence(ev.window, c)], params=params, priority=40 if not paying else 75)
    if paying:
        f.summary += f" Still ≈ {c.speedup:.1f}× faster than no speculation by the cost model."
    out.findings.append(f)
    return out
