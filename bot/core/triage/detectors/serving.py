"""The server itself, with or without speculation: down, stalled with requests running, its KV cache full with
requests waiting, a DFlash drafter under many requests."""

from __future__ import annotations

from bot.core.parsed_log import EngineSample
from bot.core.triage.detectors.common import base_params, line_evidence
from bot.core.triage.detectors.state import Found, State, issue_finding


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


def _stalled(s: EngineSample) -> bool:
    """Requests running, and not one token read or generated over the interval: stuck, not idle (an idle engine
    runs no request) nor slow (a long prefill shows as prompt throughput)."""
    return bool(s.running) and s.generation_tps == 0 and not s.prompt_tps


def h_engine_stalled(st: State) -> Found:
    """The log ends with an engine that holds running requests and processes no token: a kernel that does not
    return, a collective waiting for a peer, a deadlock."""
    out = Found()
    by_engine: dict[int | None, list[EngineSample]] = {}
    for s in st.ev.parsed.engine:
        by_engine.setdefault(s.engine, []).append(s)
    for samples in by_engine.values():
        tail: list[EngineSample] = []
        for s in reversed(samples):
            if not _stalled(s):
                break
            tail.insert(0, s)
        if not tail:
            continue
        running = max(s.running or 0 for s in tail)
        span = "in its last stats interval" if len(tail) == 1 else f"in its last {len(tail)} stats intervals"
        params = base_params(st.ev) | {"running": running, "span": span}
        out.findings.append(issue_finding(st, "engine-stalled", severity="critical", confidence="medium",
                                          evidence=[line_evidence(s.origin) for s in tail[-3:]], params=params,
                                          priority=20))
        break
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
