"""Detectors: each looks at the evidence and returns findings. The words and facts come from
known_issues.yaml; the code decides when a finding applies and how sure it is."""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from typing import Any

from bot.core.logparse import Origin
from bot.core.triage.context import DeploymentContext, Version
from bot.core.triage.evidence import Evidence, Window
from bot.core.triage.findings import Confidence, Finding, Severity
from bot.core.triage.knowledge import KnowledgeBase

V0_22: Version = (0, 22, 0)
V0_25: Version = (0, 25, 0)
V0_26: Version = (0, 26, 0)
CUTOFF = 0.05  # a position that accepts less than this adds almost nothing
MAX_EVIDENCE_CHARS = 400


class _Params(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def fill(text: str, params: dict[str, Any]) -> str:
    try:
        return string.Formatter().vformat(text, (), _Params(params))
    except (ValueError, IndexError, KeyError):
        return text


def line_evidence(origin: Origin | None, prefix: str = "") -> str:
    if origin is None:
        return prefix
    text = origin.text if len(origin.text) <= MAX_EVIDENCE_CHARS else origin.text[:MAX_EVIDENCE_CHARS] + " …"
    return f"{prefix}{origin.where()}: {text}"


def _lower(conf: Confidence) -> Confidence:
    return {"high": "medium", "medium": "low", "low": "low"}[conf]  # type: ignore[return-value]


def issue_finding(kb: KnowledgeBase, issue_id: str, *, severity: Severity, confidence: Confidence,
                  evidence: list[str], params: dict[str, Any], finding_id: str | None = None,
                  is_bug: bool = False, priority: int = 50) -> Finding:
    facts = kb.issues[issue_id]
    return Finding(
        id=finding_id or issue_id, title=fill(facts.title, params), severity=severity, confidence=confidence,
        summary=fill(facts.summary, params).strip(), evidence=evidence,
        upstream=[u.to_upstream() for u in facts.upstream],
        remediation=[fill(r, params).strip() for r in facts.remediation], is_bug=is_bug, priority=priority,
    )


def base_params(ev: Evidence) -> dict[str, Any]:
    ctx = ev.context
    w = ev.window
    return {
        "host": ctx.host or "<host>",
        "version": ctx.version_text(),
        "method": ctx.method or "speculative decoding",
        "target": ctx.target_model or "the target model",
        "mean": f"{w.mean:.2f}" if w else "n/a",
        "samples": len(w.samples) if w else 0,
    }


def version_state(ctx: DeploymentContext, fixed_in: Version, floor: Version | None = None) -> str:
    """'affected', 'fixed', 'maybe' (a hinted range straddles the fix) or 'unknown'."""
    bounds = ctx.version_bounds()
    if bounds is None:
        return "unknown"
    lo, hi = bounds
    if floor is not None and lo < floor <= hi:
        lo = floor
    if hi < fixed_in:
        return "affected"
    if lo >= fixed_in:
        return "fixed"
    return "maybe"


def _version_evidence(ctx: DeploymentContext) -> str:
    if ctx.vllm_version:
        return f"vLLM {ctx.vllm_version} (from {ctx.sources.get('vllm_version', 'context')})"
    if ctx.version_range:
        return f"vLLM {ctx.version_range[0]}–{ctx.version_range[1]}, guessed from {ctx.sources.get('version_range')}"
    return "vLLM version unknown (give --vllm-version)"


def _window_evidence(w: Window) -> list[str]:
    pp = ", ".join(f"{x:.3f}" for x in w.per_position)
    out = [f"mean acceptance length {w.mean:.2f} over {len(w.samples)} sample(s): accepted {w.accepted} of "
           f"{w.drafted} drafted tokens ({w.rate:.1f}%)"]
    if pp:
        out.append(f"per-position acceptance: {pp}")
    last = w.samples[-1].origin if w.samples else None
    if last is not None:
        out.append(line_evidence(last, "last sample, "))
    return out


def _drafter_ids(ev: Evidence, kb: KnowledgeBase) -> tuple[list[int] | None, list[int] | None]:
    """(ids the deployment uses, ids the drafter was published with)."""
    facts = kb.drafter(ev.context.drafter)
    published = facts.target_layer_ids if facts else None
    used = None
    cfg = ev.context.drafter_config
    if cfg:
        dcfg = cfg.get("dflash_config")
        ids = dcfg.get("target_layer_ids") if isinstance(dcfg, dict) else None
        if isinstance(ids, list) and all(isinstance(i, int) for i in ids):
            used = ids
    return used if used is not None else published, published


def _zlab_style(ev: Evidence, kb: KnowledgeBase) -> bool:
    facts = kb.drafter(ev.context.drafter)
    if facts is not None and facts.style == "z-lab":
        return True
    if ev.context.drafter and "z-lab" in ev.context.drafter.lower():
        return True
    cfg = ev.context.drafter_config or {}
    return isinstance(cfg.get("dflash_config"), dict) and "target_layer_ids" in cfg["dflash_config"]


# --- detectors ----------------------------------------------------------------------------------

def detect_launch_failures(ev: Evidence, kb: KnowledgeBase) -> list[Finding]:
    grouped: dict[str, list[Any]] = {}
    for event in ev.events:
        grouped.setdefault(event.kind, []).append(event)
    out: list[Finding] = []
    for kind, events in grouped.items():
        facts = kb.failures.get(kind)
        if facts is None:
            continue
        params = base_params(ev) | {k: v for e in events for k, v in e.detail.items()}
        params.setdefault("max_len", "the estimate vLLM printed")
        params.setdefault("size", "more than was free")
        upstream = [u.to_upstream() for u in facts.upstream]
        if facts.issue and facts.issue in kb.issues:
            upstream += [u.to_upstream() for u in kb.issues[facts.issue].upstream]
        evidence = [line_evidence(e.origin) for e in events[:3]]
        if len(events) > 3:
            evidence.append(f"… and {len(events) - 3} more such line(s)")
        severity: Severity = "critical" if facts.severity == "critical" else (
            "warning" if facts.severity == "warning" else "info")
        out.append(Finding(
            id=f"launch:{kind}", title=fill(facts.title, params), severity=severity, confidence="high",
            summary=fill(facts.summary, params), evidence=evidence, upstream=upstream,
            remediation=[fill(r, params) for r in facts.remediation], is_bug=severity == "critical",
            priority=10,
        ))
    return out


def detect_layer_offset(ev: Evidence, kb: KnowledgeBase) -> list[Finding]:
    ctx = ev.context
    if ctx.method != "dflash":
        return []
    used, published = _drafter_ids(ev, kb)
    shifted_locally = used is not None and published is not None and used == [i + 1 for i in published]
    state = version_state(ctx, V0_22, floor=(0, 20, 0))
    w = ev.window
    params = base_params(ev) | {
        "shifted_ids": [i + 1 for i in used] if used else "each id + 1",
        "original_ids": published or "the published ids",
    }
    evidence = [_version_evidence(ctx)]
    if ctx.drafter:
        evidence.append(f"drafter {ctx.drafter} (from {ctx.sources.get('drafter', 'context')})")
    if used is not None:
        evidence.append(f"target_layer_ids {used}" + (
            " (as published for this drafter)" if used == published else
            f" (published: {published})" if published else " (drafter config)"))

    if state == "fixed":
        if shifted_locally:
            return [issue_finding(kb, "dflash-layer-offset-double", severity="warning", confidence="high",
                                  evidence=evidence, params=params, is_bug=True, priority=20)]
        return []
    if shifted_locally:
        ev.notes.append(f"target_layer_ids already shifted by one ({used}): the #40727 workaround is applied")
        return []
    cliff = w is not None and w.cliff()
    floor = kb.method("dflash").healthy_mean or 4.0
    low = w is not None and w.mean < floor
    if w is not None:
        evidence += _window_evidence(w)
        if cliff:
            evidence.append("cliff: position 0 below 0.5 and every position from 2 on at ≤ 0.005")
    if state == "unknown" and not cliff:
        return []
    confidence: Confidence
    if state == "affected":
        confidence = "high" if (cliff or low or w is None) else "medium"
    elif state == "maybe":
        confidence = "medium" if cliff else "low"
    else:
        confidence = "low" if not cliff else "medium"
    if not _zlab_style(ev, kb):
        confidence = _lower(confidence)
    severity: Severity = "critical" if cliff else "warning"
    finding = issue_finding(kb, "dflash-layer-offset", severity=severity, confidence=confidence,
                            evidence=evidence, params=params, is_bug=True, priority=20)
    if state in ("maybe", "unknown"):
        finding.summary += " The vLLM version is not known for sure: this applies only below 0.22.0."
    return [finding]


def detect_swa_full_attention(ev: Evidence, kb: KnowledgeBase) -> list[Finding]:
    ctx = ev.context
    if ctx.method != "dflash":
        return []
    facts = kb.drafter(ctx.drafter)
    cfg = ctx.drafter_config or {}
    layer_types = cfg.get("layer_types") if isinstance(cfg.get("layer_types"), list) else None
    if layer_types is not None:
        sliding: bool | None = "sliding_attention" in layer_types
        mixed = sliding and any(t != "sliding_attention" for t in layer_types)
        how = f"drafter config layer_types {layer_types}"
    elif facts is not None and facts.has_sliding() is not None:
        sliding = facts.has_sliding()
        mixed = bool(sliding and (facts.layer_types is None or "full_attention" in facts.layer_types))
        how = (f"{facts.name}: layer_types {facts.layer_types}" if facts.layer_types
               else f"{facts.name} is a known sliding-window drafter")
    else:
        return []
    if not sliding:
        return []
    window = cfg.get("sliding_window") or (facts.sliding_window if facts else None) or 2048
    params = base_params(ev) | {"window": window}
    state_silent = version_state(ctx, V0_25, floor=(0, 20, 0))
    evidence = [_version_evidence(ctx), how]
    if any(e.kind.startswith("dflash_mixed_swa") for e in ev.events):
        return []  # the refusal itself is reported by detect_launch_failures
    if state_silent == "affected" or state_silent == "maybe":
        exact_layers = bool(layer_types or (facts and facts.layer_types))
        confidence: Confidence = "high" if exact_layers else "medium"
        if state_silent == "maybe":
            confidence = "low"
        if ev.window is not None:
            evidence += _window_evidence(ev.window)[:2]
        return [issue_finding(kb, "dflash-swa-full-attention", severity="warning", confidence=confidence,
                              evidence=evidence, params=params, is_bug=True, priority=30)]
    if state_silent == "fixed" and mixed and ctx.model_runner_v2 is False and ev.window is None:
        bounds = ctx.version_bounds()
        if bounds and bounds[0] >= V0_26:
            return [issue_finding(kb, "dflash-swa-needs-v2", severity="warning", confidence="medium",
                                  evidence=[*evidence, "VLLM_USE_V2_MODEL_RUNNER is not set"], params=params,
                                  is_bug=True, priority=30)]
    return []


def detect_zero_acceptance(ev: Evidence, kb: KnowledgeBase) -> list[Finding]:
    w = ev.window
    if w is None or w.accepted > 0 or w.drafted == 0:
        return []
    params = base_params(ev) | {"drafted": w.drafted}
    if _separate_draft_model(ev.context):
        return []  # a separate draft model accepting nothing is first of all a mismatch
    return [issue_finding(kb, "zero-acceptance", severity="critical", confidence="high",
                          evidence=_window_evidence(w), params=params, is_bug=True, priority=15)]


def _separate_draft_model(ctx: DeploymentContext) -> bool:
    return ctx.method == "draft_model" and bool(ctx.drafter) and ctx.drafter != ctx.target_model


def detect_collapse(ev: Evidence, kb: KnowledgeBase, explained: bool) -> list[Finding]:
    """Low acceptance no upstream bug explains: a mismatched drafter, or just below the floor."""
    w = ev.window
    if w is None or explained:
        return []
    facts = kb.method(ev.context.method)
    pos0 = w.per_position[0] if w.per_position else None
    collapsed = w.cliff() or (pos0 is not None and pos0 < 0.2) or w.accepted == 0
    params = base_params(ev) | {"floor": facts.healthy_mean, "healthy_range": facts.healthy_range}
    if ev.context.method == "ngram" or ev.context.method is None:
        return []  # prompt lookup acceptance is the workload's, not the setup's
    if collapsed and (w.mean < (facts.break_even_mean or 1.5)):
        confidence: Confidence = "high" if _separate_draft_model(ev.context) else "medium"
        evidence = _window_evidence(w)
        if ev.context.drafter:
            evidence.append(f"drafter {ev.context.drafter}, target {ev.context.target_model or 'unknown'}")
        return [issue_finding(kb, "drafter-mismatch", severity="critical", confidence=confidence,
                              evidence=evidence, params=params, is_bug=False, priority=25)]
    if facts.healthy_mean is not None and w.mean < facts.healthy_mean:
        return [issue_finding(kb, "low-acceptance", severity="warning", confidence="medium",
                              evidence=_window_evidence(w), params=params, priority=40)]
    return []


def detect_too_many_tokens(ev: Evidence, kb: KnowledgeBase) -> list[Finding]:
    w = ev.window
    if w is None or w.k < 2 or w.accepted == 0:
        return []
    useful = sum(1 for x in w.per_position if x >= CUTOFF)
    k_best = max(1, useful)
    if k_best >= w.k:
        return []
    expected = 1.0 + sum(w.per_position[:k_best])
    params = base_params(ev) | {
        "k_best": k_best, "k": w.k, "first_idle": k_best + 1, "cutoff": CUTOFF, "expected_mean": expected,
        "mean": w.mean,
    }
    idle = w.k - k_best
    severity: Severity = "warning" if idle * 2 >= w.k else "info"
    evidence = [
        f"per-position acceptance: {', '.join(f'{x:.3f}' for x in w.per_position)}",
        f"positions {k_best + 1}–{w.k} ({idle} of {w.k}) accept < {CUTOFF:.2f} each",
        f"expected mean with {k_best} token(s): 1 + {' + '.join(f'{x:.3f}' for x in w.per_position[:k_best])}"
        f" = {expected:.2f}",
    ]
    return [issue_finding(kb, "too-many-tokens", severity=severity, confidence="high", evidence=evidence,
                          params=params, priority=60)]


def estimate_speedup(ev: Evidence, kb: KnowledgeBase) -> tuple[float | None, float | None]:
    """(estimated speedup over no speculation, break-even mean) from the mean acceptance length."""
    w = ev.window
    be = kb.method(ev.context.method).break_even_mean
    if w is None or be is None or math.isnan(w.mean):
        return None, be
    return w.mean / be, be


def detect_not_paying(ev: Evidence, kb: KnowledgeBase) -> list[Finding]:
    w = ev.window
    if w is None:
        return []
    speedup, be = estimate_speedup(ev, kb)
    ctx = ev.context
    reasons: list[str] = []
    evidence: list[str] = []
    confidence: Confidence = "medium"
    if speedup is not None and be is not None:
        evidence.append(f"mean acceptance length {w.mean:.2f}; break-even for {ctx.method} ≈ {be} "
                        f"(our working estimate) → estimated speedup ≈ {speedup:.2f}× over no speculation")
        if speedup < 1.0:
            reasons.append(f"at a mean acceptance length of {w.mean:.2f} {ctx.method} likely runs slower than no "
                           f"speculation (estimated {speedup:.2f}×; break-even ≈ {be})")
    if ctx.baseline_tps:
        measured = ctx.probe_tps or (ev.engine.single_request_tps if ev.engine else None)
        if measured is not None:
            how = "a completion probe" if ctx.probe_tps else "the Engine line with one request running"
            evidence.append(f"one request: {measured:.1f} tok/s (from {how}); baseline {ctx.baseline_tps:.1f} tok/s")
            if measured < ctx.baseline_tps:
                reasons.append(f"one request generates {measured:.1f} tok/s, below the baseline's "
                               f"{ctx.baseline_tps:.1f} tok/s")
                confidence = "high"
        elif speedup is not None and speedup < 1.0:
            reasons.append(f"the baseline ({ctx.baseline_tps:.1f} tok/s) is the better choice until this is fixed")
    if not reasons:
        return []
    detail = "; ".join(reasons).capitalize() + "."
    params = base_params(ev) | {"detail": detail}
    return [issue_finding(kb, "not-paying-off", severity="warning", confidence=confidence, evidence=evidence,
                          params=params, priority=55)]


def detect_kv_saturation(ev: Evidence, kb: KnowledgeBase) -> list[Finding]:
    e = ev.engine
    if e is None or e.max_kv is None or e.max_kv < 95.0 or e.max_waiting == 0:
        return []
    params = base_params(ev) | {"kv": e.max_kv, "waiting": e.max_waiting}
    evidence = [line_evidence(e.kv_at_max.origin if e.kv_at_max else None)]
    return [issue_finding(kb, "kv-cache-saturated", severity="warning", confidence="high", evidence=evidence,
                          params=params, priority=70)]


def detect_high_concurrency(ev: Evidence, kb: KnowledgeBase) -> list[Finding]:
    e = ev.engine
    if ev.context.method != "dflash" or e is None or e.max_running <= 8:
        return []
    params = base_params(ev) | {"running": e.max_running}
    return [issue_finding(kb, "dflash-high-concurrency", severity="info", confidence="low",
                          evidence=[f"up to {e.max_running} requests running at once"], params=params,
                          priority=80)]


def detect_server_down(ev: Evidence, kb: KnowledgeBase) -> list[Finding]:
    ctx = ev.context
    if ctx.server_alive is not False and ctx.health_ok is not False:
        return []
    evidence = []
    if ctx.server_alive is False:
        evidence.append("the recorded server process is not running")
    if ctx.health_ok is False:
        evidence.append("/health did not answer 200")
    tail = [line_evidence(e.origin) for e in ev.events[-3:]]
    params = base_params(ev) | {"detail": "; ".join(evidence)}
    return [issue_finding(kb, "server-down", severity="critical", confidence="high", evidence=evidence + tail,
                          params=params, priority=5)]


def detect_no_metrics(ev: Evidence, kb: KnowledgeBase) -> list[Finding]:
    if ev.window is not None:
        return []
    where = ""
    if any("no SpecDecoding metrics in the last" in n for n in ev.notes):
        where = " in the part that was read"
    params = base_params(ev) | {"where": where}
    evidence = [f"{ev.parsed.stats.lines} line(s) read, {len(ev.parsed.engine)} Engine line(s)"]
    if ev.parsed.stats.skipped:
        evidence.append(f"{ev.parsed.stats.skipped} metrics-like line(s) were truncated or garbled and skipped")
    return [issue_finding(kb, "no-metrics", severity="info", confidence="high", evidence=evidence,
                          params=params, priority=90)]


def detect_healthy(ev: Evidence, kb: KnowledgeBase, findings: list[Finding]) -> list[Finding]:
    w = ev.window
    if w is None or any(f.severity in ("critical", "warning") for f in findings):
        return []
    facts = kb.method(ev.context.method)
    speedup, _ = estimate_speedup(ev, kb)
    parts = [f"Mean acceptance length {w.mean:.2f} over {len(w.samples)} sample(s)"]
    if w.per_position:
        parts.append(f"per position {w.per_position[0]:.3f} → {w.per_position[-1]:.3f}, a smooth decay")
    if facts.healthy_range:
        parts.append(f"healthy for {ev.context.method} ({facts.healthy_range})")
    if speedup is not None:
        parts.append(f"estimated speedup ≈ {speedup:.1f}× over no speculation")
    if ev.context.baseline_tps and ev.engine and ev.engine.single_request_tps:
        parts.append(f"{ev.engine.single_request_tps:.1f} tok/s for one request vs baseline "
                     f"{ev.context.baseline_tps:.1f}")
    params = base_params(ev) | {"detail": "; ".join(parts) + "."}
    return [issue_finding(kb, "healthy", severity="info", confidence="high", evidence=_window_evidence(w),
                          params=params, priority=100)]


Detector = Callable[[Evidence, KnowledgeBase], list[Finding]]

UPSTREAM_DETECTORS: tuple[Detector, ...] = (
    detect_server_down, detect_launch_failures, detect_layer_offset, detect_swa_full_attention, detect_zero_acceptance,
)
TUNING_DETECTORS: tuple[Detector, ...] = (
    detect_too_many_tokens, detect_not_paying, detect_kv_saturation, detect_high_concurrency, detect_no_metrics,
)
