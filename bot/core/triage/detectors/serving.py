"""The server itself, with or without speculation: down, stalled with requests running, its KV cache full with
requests waiting, a DFlash drafter under many requests."""

from __future__ import annotations

from bot.core.triage.detectors.common import base_params, line_evidence
from bot.core.triage.detectors.state import Found, State, issue_finding
from bot.core.triage.stall import engine_stall


def h_kv_saturation(st: State) -> Found:
    out = Found()
    ev = st.ev
    e = ev.engine
    if e is None or e.max_kv is None or e.max_kv < st.thresholds.kv_saturated or e.max_waiting == 0:
        return out
    params = base_params(ev) | {"kv": e.max_kv, "waiting": e.max_waiting}
    evidence = [line_evidence(e.kv_at_max.origin if e.kv_at_max else None)]
    out.findings.append(issue_finding(st, "kv-cache-saturated", severity="warning", confidence="high",
                                      evidence=evidence, params=params, priority=70))
    return out


def h_engine_stalled(st: State) -> Found:
    """The log ends with an engine that holds running requests and processes no token: a kernel that does not
    return, a collective waiting for a peer, a deadlock — or, for one short span, a long prefill (core.triage.stall)."""
    out = Found()
    stall = engine_stall(st.ev.parsed.engine)
    if stall is None:
        return out
    n = len(stall.samples)
    span = "in its last stats interval" if n == 1 else f"in its last {n} stats intervals"
    if stall.seconds:
        span += f" ({stall.seconds:.0f} s)"
    weight = ("Over that long the engine is stuck: a kernel that does not return, a collective waiting for a peer, a "
              "deadlock." if stall.sustained else
              "So short a span can also be a prefill longer than the interval (vLLM counts a prompt's tokens when "
              "its prefill completes) or a kernel compiling for a new shape: more intervals like it, or a stack dump, "
              "say which.")
    params = base_params(st.ev) | {"running": stall.running, "span": span, "weight": weight}
    out.findings.append(issue_finding(st, "engine-stalled", severity="critical" if stall.sustained else "warning",
                                      confidence="medium" if stall.sustained else "low",
                                      evidence=[line_evidence(s.origin) for s in stall.samples[-3:]], params=params,
                                      priority=20))
    return out


def h_high_concurrency(st: State) -> Found:
    out = Found()
    ev = st.ev
    e = ev.engine
    if ev.context.method != "dflash" or e is None or e.max_running <= 8:
        return out
    params = base_params(ev) | {"running": e.max_running}
    out.findings.append(issue_finding(st, "dflash-high-concurrency", severity="info", confidence="low",
                                      evidence=[f"up to {e.max_running} requests running at once"], params=params,
                                      priority=80))
    return out


def h_server_down(st: State) -> Found:
    out = Found()
    ev = st.ev
    ctx = ev.context
    if ctx.server_alive is not False and ctx.health_ok is not False:
        return out
    evidence = []
    if ctx.server_alive is False:
        evidence.append("the recorded server process is not running")
    if ctx.health_ok is False:
        evidence.append("/health did not answer 200")
    tail = [line_evidence(e.origin) for e in ev.events[-3:]]
    params = base_params(ev) | {"detail": "; ".join(evidence)}
    out.findings.append(issue_finding(st, "server-down", severity="critical", confidence="high",
                                      evidence=evidence + tail, params=params, priority=5))
    return out
