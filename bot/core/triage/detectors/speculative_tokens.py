"""num_speculative_tokens: the curve's idle tail as a hypothesis, and a smaller k as its own finding, per load."""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.triage.acceptance import KAdvice, k_advice
from bot.core.triage.detectors.state import Found, State
from bot.core.triage.evidence import Evidence, Window
from bot.core.triage.findings import Finding, Severity

MIN_K_GAIN = 0.03  # a smaller k is advised when it is estimated this much faster (within the model's own error)
MATERIAL_K_GAIN = 0.20  # ... and a problem (warning), not a note, from this much on: beyond the estimate's own error
REFERENCE_LOAD = 8.0  # a second load shown when only one request was seen: where batching starts to cost


def h_too_many_tokens(st: State) -> Found:
    """The idle tail of the curve, as a hypothesis; the advice itself is the lower-k finding."""
    out = Found()
    ev, c = st.ev, st.curve
    w = ev.window
    if c is None or w is None or c.k is None or c.k < 2 or c.best_k is None:
        return out
    if c.shape in ("all-zero", "collapse"):
        if c.k > 1:
            out.consider(st, "too-many-tokens", "possible", "the curve collapses: fix its cause first, then tune k",
                         {"first_idle": 1, "last": c.k - 1})
        return out.merge(h_lower_k(st))
    if c.best_k >= c.k or c.best_k_speedup is None or c.speedup is None or c.best_k_speedup < c.speedup * 1.03:
        if c.shape == "long-tail":
            out.consider(st, "too-many-tokens", "ruled-out", f"the idle tail costs less than it brings at k = {c.k}")
        return out.merge(h_lower_k(st))
    k_best = c.best_k
    gain = c.best_k_speedup / c.speedup - 1.0
    tail = sum(w.per_position[k_best:])
    why = (f"positions {k_best}–{c.k - 1} add {tail:.2f} token(s) per step together but cost "
           f"{c.k - k_best} more drafted and verified token(s); with k = {k_best} the estimated speedup is "
           f"{gain * 100:.0f}% higher")
    params = {"first_idle": k_best, "last": c.k - 1}
    if st.bug_fits:
        out.consider(st, "too-many-tokens", "possible", why + " — fix the bug above first; the lower-k note says what "
                     "costs less meanwhile", params)
    else:
        out.consider(st, "too-many-tokens", "fits", why, params)
    return out.merge(h_lower_k(st))


def _fmt_load(load: float) -> str:
    return "1 request" if load <= 1.0 else f"~{load:g} running requests"


def lower_k_id(k: int) -> str:
    return f"lower-k:{k}"


def h_lower_k(st: State) -> Found:
    """A smaller k, from the measured curve and the cost model at the load the server runs: its own finding,
    beside a bug as the interim step (fix the bug; meanwhile this k costs less)."""
    ev, c = st.ev, st.curve
    w = ev.window
    if c is None or w is None or len(w.per_position) < 2 or c.shape == "all-zero":
        return Found()
    if ev.context.method == "ngram" and c.shape == "collapse":
        return Found()  # n-gram acceptance follows the prompts, not k
    plan = _k_plan(ev, w)
    if plan is None:
        return Found()
    bug = next((f for f in st.findings if f.is_bug and f.severity in ("critical", "warning")), None)
    return Found(findings=[_lower_k_finding(ev, w, plan, bug)])


@dataclass(frozen=True)
class _KPlan:
    """The best k at each load shown, and the load the recommendation is for (the typical one)."""

    advice: dict[float, KAdvice]
    at: float
    where: str  # where the load was read, "" when nothing says

    @property
    def main(self) -> KAdvice:
        return self.advice[self.at]

    @property
    def differs(self) -> bool:
        return len({a.best_k for a in self.advice.values()}) > 1

    def per_load(self) -> list[str]:
        k = self.main.k
        return [f"at {_fmt_load(a.running)} k = {a.best_k} (estimated {a.speedup_best:.2f}× vs {a.speedup_now:.2f}× "
                f"at k = {k})" if a.best_k < k else f"at {_fmt_load(a.running)} k = {k} already pays best "
                f"({a.speedup_now:.2f}×)" for a in sorted(self.advice.values(), key=lambda a: -a.running)]


def _k_plan(ev: Evidence, w: Window) -> _KPlan | None:
    """None when no smaller k is worth advising: the current k pays best, or no k pays at this load."""
    seen, where = ev.loads()
    loads = sorted(dict.fromkeys([1.0, *seen]))
    # one request seen: show a batched load beside it, since that is where the best k moves
    shown = loads if seen and max(seen) > 1.0 else [*loads, REFERENCE_LOAD]
    advice = {a.running: a for a in k_advice(w.per_position, ev.context.method, shown)}
    plan = _KPlan(advice=advice, at=max(seen[0], 1.0) if seen else 1.0, where=where)
    main = plan.main
    if main.speedup_best < 1.0 and plan.at > 1.0:
        return None  # no k pays at this load: speculation itself is the cost (h_not_paying says so)
    if main.best_k >= main.k or main.gain < MIN_K_GAIN:
        return None
    return plan


def _lower_k_finding(ev: Evidence, w: Window, plan: _KPlan, bug: Finding | None) -> Finding:
    k, n = plan.main.k, plan.main.best_k
    severity: Severity = "warning" if plan.main.gain >= MATERIAL_K_GAIN and bug is None else "info"
    title = (f"Meanwhile, num_speculative_tokens: {n} costs less than {k}" if bug is not None
             else f"Lower num_speculative_tokens to {n}: positions {n}–{k - 1} cost more than they add")
    return Finding(
        id=lower_k_id(n), title=title, severity=severity,
        confidence="medium" if ev.context.method is None else "high",
        summary=_lower_k_summary(ev, w, plan, bug), evidence=_lower_k_evidence(w, plan),
        remediation=_lower_k_remediation(ev, plan, bug), priority=58 if bug is None else 65,
        advice=["lower-k"], knobs=["--speculative-config"],
        sources=["https://docs.vllm.ai/en/stable/features/speculative_decoding/adaptive_verification/"]
        if plan.differs else [],
    )


def _lower_k_summary(ev: Evidence, w: Window, plan: _KPlan, bug: Finding | None) -> str:
    k, n = plan.main.k, plan.main.best_k
    expected = 1.0 + sum(w.per_position[:n])
    summary = (f"Positions {n}–{k - 1} add {sum(w.per_position[n:]):.2f} accepted token(s) per step together, yet "
               f"each is drafted and verified every step: with num_speculative_tokens: {n} the expected mean "
               f"acceptance length is {expected:.2f} (now {w.mean:.2f}) and the estimated speedup "
               f"{plan.main.gain * 100:.0f}% higher at {_fmt_load(plan.at)}.")
    if plan.differs:
        summary += " The best k falls as more requests run, since each verified token then costs compute: " \
                   + "; ".join(plan.per_load()) + "."
    if bug is not None:
        summary = (f"Fix {bug.title} first: it explains this curve. Meanwhile num_speculative_tokens: {n} costs less "
                   f"than {k}. ") + summary
    if ev.context.method is None:
        summary += " Judged without knowing the method (give --method): the drafter's cost is a default."
    return summary


def _lower_k_evidence(w: Window, plan: _KPlan) -> list[str]:
    k, n = plan.main.k, plan.main.best_k
    expected = 1.0 + sum(w.per_position[:n])
    return [
        f"num_speculative_tokens: {n} (now {k}), for {_fmt_load(plan.at)}"
        + (f" ({plan.where})" if plan.where else " (no Engine line or scrape says how many requests run)"),
        f"per-position acceptance: {', '.join(f'{x:.3f}' for x in w.per_position)}",
        f"expected mean with {n} token(s): 1 + {' + '.join(f'{x:.3f}' for x in w.per_position[:n])} = {expected:.2f} "
        f"(now {w.mean:.2f})",
        "estimated per load (cost model in docs/ACCEPTANCE.md): " + "; ".join(plan.per_load()),
    ]


def _lower_k_remediation(ev: Evidence, plan: _KPlan, bug: Finding | None) -> list[str]:
    host = ev.context.host or "<host>"
    remediation = [f"Set `num_speculative_tokens: {plan.main.best_k}` in the profile and redeploy: "
                   f"`specops deploy PROFILE --host {host}`."]
    if plan.differs:
        others = [f"num_speculative_tokens: {a.best_k} at {_fmt_load(a.running)}"
                  for a in sorted(plan.advice.values(), key=lambda a: a.running) if a.running != plan.at]
        remediation.append("If the load changes: " + "; ".join(others) + " (or measure: `specops tune`).")
    if bug is not None:
        remediation.insert(0, f"First: {bug.remediation[0]}" if bug.remediation else f"First fix: {bug.title}.")
    return remediation
