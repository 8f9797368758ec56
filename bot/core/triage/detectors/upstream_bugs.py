"""Known upstream bugs, weighed first: a release older than the method, DFlash's layer-index offset (and its
workaround applied twice), its sliding-window layers run as full attention or needing Model Runner V2, and
nothing accepted at all."""

from __future__ import annotations

from bot.core.kb import Entry
from bot.core.triage.acceptance import Curve
from bot.core.triage.context import Version, fmt_version, parse_version
from bot.core.triage.detectors.common import P1_MARGIN, base_params, line_evidence, window_evidence
from bot.core.triage.detectors.premises import (
    Premise,
    Signature,
    Weighed,
    premise_method,
    premise_version,
    weigh,
)
from bot.core.triage.detectors.state import Found, State, issue_finding
from bot.core.triage.evidence import Evidence
from bot.core.triage.findings import Confidence, Severity
from bot.core.triage.knowledge import KnowledgeBase


def _range(kb: KnowledgeBase, issue_id: str, lo_key: str, hi_key: str) -> tuple[Version, Version]:
    """The release range an issue's facts give (known_issues.yaml `affected`), as versions."""
    affected = kb.issues[issue_id].affected
    lo, hi = parse_version(affected.get(lo_key)), parse_version(affected.get(hi_key))
    if lo is None or hi is None:
        raise ValueError(f"known_issues.yaml: {issue_id}.affected needs {lo_key} and {hi_key}")
    return lo, hi


def drafter_sliding(ev: Evidence, kb: KnowledgeBase) -> tuple[Premise, int]:
    """Does the drafter have sliding-window layers? (and its window, for the words)"""
    ctx = ev.context
    cfg = ctx.drafter_config or {}
    window = int(cfg.get("sliding_window") or 0) or 2048
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        n = sum(1 for t in types if t == "sliding_attention")
        if n:
            return Premise("yes", f"the drafter config has {n} of {len(types)} layers sliding_attention"), window
        return Premise("no", "the drafter config's layer_types hold no sliding_attention"), window
    facts = kb.drafter(ctx.drafter)
    if facts is not None and facts.has_sliding() is not None:
        window = facts.sliding_window or window
        if facts.has_sliding():
            detail = f"layer_types {facts.layer_types}" if facts.layer_types else "a known sliding-window drafter"
            return Premise("yes", f"{facts.name}: {detail}"), window
        return Premise("no", f"{facts.name} has no sliding-window layers"), window
    described = " ".join(str(cfg.get(k) or "") for k in ("description", "attention")).lower()
    if "sliding" in described or cfg.get("use_swa") is True or cfg.get("swa_window_size"):
        return Premise("guessed", "the drafter is described as sliding-window"), window
    return Premise("unknown", "the drafter's layer_types are not known (give --drafter-config)"), window


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


HEALTHY_POS0 = 0.6  # at or above this, position 0 is healthy for any model-based drafter (acceptance.md's curves)


def pos0_healthy(c: Curve, kb: KnowledgeBase, method: str | None) -> bool:
    """Position 0 measured (per-position rates, not a bound from the mean) and at a healthy drafter's level."""
    if c.p1 is None or not c.k_known:
        return False
    typical = kb.method(method).healthy_pos0
    floor = min(HEALTHY_POS0, typical - P1_MARGIN) if typical is not None else HEALTHY_POS0
    return c.p1 >= floor


def _why(premises: list[Premise], signature_text: str) -> str:
    refuted = [p.text for p in premises if p.state == "no"]
    if refuted:
        return "; ".join(refuted)
    parts = [p.text for p in premises if p.state in ("guessed", "unknown")] or [p.text for p in premises]
    return "; ".join([*parts, signature_text]) if signature_text else "; ".join(parts)


def h_layer_offset(st: State) -> Found:
    out = Found()
    ev, kb, c = st.ev, st.kb, st.curve
    ctx = ev.context
    method = premise_method(ctx, "dflash")
    lo, hi = _range(kb, "dflash-layer-offset", "from", "fixed_in")
    version = premise_version(ctx, lo, hi, f"vLLM reads the layer before each id until {fmt_version(hi)}")
    used, published = _drafter_ids(ev, kb)
    premises = [method, version]
    shifted = used is not None and published is not None and used == [i + 1 for i in published]
    if shifted and version.state == "yes":
        out.notes.append(f"target_layer_ids already shifted by one ({used}): the #40727 workaround is applied")
        out.consider(st, "dflash-layer-offset", "ruled-out", f"target_layer_ids are already shifted ({used})")
        return out
    if c is None:
        signature: Signature = "absent"
        sig_text = "no acceptance measured yet"
    elif c.shape in ("all-zero", "collapse"):
        signature, sig_text = "fits", f"position 0 accepts {c.p1 or 0:.3f}: {c.describe()}"
    elif pos0_healthy(c, kb, ctx.method or "dflash"):
        # whatever the later positions do (a cliff has its own causes), a healthy position 0 contradicts a bug
        # whose every drafted position is conditioned on the wrong features
        signature = "against"
        sig_text = (f"but position 0 accepts {c.p1:.2f} with {c.describe()}; the offset collapses position 0 "
                    "(every drafted position is conditioned on the wrong features)")
    elif c.p1 is None:
        low = c.efficiency is not None and c.efficiency < 0.15
        signature = "weak" if low else "absent"
        sig_text = f"no per-position rates; mean {c.mean:.2f}" + (" is low for this k" if low else "")
    else:
        signature, sig_text = "weak", f"position 0 accepts {c.p1:.2f} ({c.describe()})"
    w = weigh(premises, signature)
    out.consider(st, "dflash-layer-offset", w.status, _why(premises, sig_text))
    if w.confidence is None:
        return out
    params = base_params(ev) | {
        "shifted_ids": [i + 1 for i in used] if used else "each id + 1",
        "original_ids": published or "the published ids",
    }
    evidence = [p.text for p in premises]
    if ctx.drafter:
        evidence.append(f"drafter {ctx.drafter} (from {ctx.sources.get('drafter', 'context')})")
    if ev.window is not None and c is not None:
        evidence += window_evidence(ev.window, c)
    if w.status == "possible":  # known to be affected, but the curve does not show it
        f = issue_finding(st, "dflash-layer-offset", severity="info", confidence="low", evidence=evidence,
                          params=params, is_bug=False, priority=85)
        f.summary += (" This release is affected, but the acceptance measured here shows no collapse: the cost is "
                      "likely the small one measured in the PR. Upgrading still helps.")
        out.findings.append(f)
        return out
    severity: Severity = "critical" if signature == "fits" else "warning"
    f = issue_finding(st, "dflash-layer-offset", severity=severity, confidence=w.confidence, evidence=evidence,
                      params=params, is_bug=True, priority=20)
    if version.state != "yes":
        f.summary += " The vLLM version is not known for sure: this applies only from 0.20.0 to 0.21.x."
    out.findings.append(f)
    return out


def h_layer_offset_double(st: State) -> Found:
    out = Found()
    ev, kb = st.ev, st.kb
    ctx = ev.context
    used, published = _drafter_ids(ev, kb)
    shifted = used is not None and published is not None and used == [i + 1 for i in published]
    if not shifted or ctx.method != "dflash":
        return out
    fixed = _range(st.kb, "dflash-layer-offset", "from", "fixed_in")[1]
    version = premise_version(ctx, fixed, (99, 0, 0), f"vLLM adds 1 to each id from {fmt_version(fixed)}")
    if version.state == "no":
        return out
    premises = [version, Premise("yes", f"target_layer_ids {used}, published {published}")]
    c = st.curve
    # the config itself says it (like a log line): the curve only sets how sure we are
    signature: Signature = "absent" if c is None else ("against" if (c.p1 or 0) >= 0.6 else "fits")
    confidence: Confidence = "high" if signature == "fits" and version.state == "yes" else "medium"
    out.consider(st, "dflash-layer-offset-double", "fits", _why(premises, ""))
    out.findings.append(issue_finding(st, "dflash-layer-offset-double", severity="warning", confidence=confidence,
                                      evidence=[p.text for p in premises], is_bug=True, priority=20,
                                      params=base_params(ev) | {"original_ids": published}))
    return out


def h_swa_full_attention(st: State) -> Found:
    out = Found()
    ev, kb, c = st.ev, st.kb, st.curve
    ctx = ev.context
    if any(e.kind == "dflash-mixed-swa-refused" for e in ev.events):
        out.consider(st, "dflash-swa-full-attention", "not-applicable", "this release refused the drafter (see above)")
        return out
    method = premise_method(ctx, "dflash")
    lo, hi = _range(kb, "dflash-swa-full-attention", "from", "silent_before")
    version = premise_version(ctx, lo, hi, f"sliding-window draft layers run as full attention until {fmt_version(hi)}")
    sliding, window = drafter_sliding(ev, kb)
    premises = [method, version, sliding]
    if c is None:
        signature: Signature = "absent"
        sig_text = "no acceptance measured yet"
    elif c.shape == "cliff":
        signature = "specific"
        sig_text = (f"{c.describe()}: the drafter's context is cut at a fixed distance, the signature of its "
                    "sliding-window layers run wrong")
    elif c.shape in ("collapse", "all-zero") or (c.p1 is not None and c.p1 < 0.5):
        signature, sig_text = "weak", f"acceptance is low ({c.describe()})"
    elif c.p1 is None:
        signature, sig_text = "absent", "no per-position rates"
    else:
        signature = "against"
        sig_text = (f"but position 0 accepts {c.p1:.2f} with {c.describe()} and no cliff (long contexts "
                    f"past the {window}-token window would show it most)")
    w = weigh(premises, signature)
    if w.status == "fits" and sliding.state != "yes" and signature != "specific":
        w = Weighed("possible", None)  # a drafter not known to slide: only its own signature counts
    out.consider(st, "dflash-swa-full-attention", w.status, _why(premises, sig_text))
    if w.confidence is None:
        return out
    evidence = [p.text for p in premises]
    if ev.window is not None and c is not None:
        evidence += window_evidence(ev.window, c)[:2]
    params = base_params(ev) | {"window": window}
    if w.status == "possible":  # known to be affected, but the curve does not show it (yet)
        f = issue_finding(st, "dflash-swa-full-attention", severity="info", confidence="low", evidence=evidence,
                          params=params, priority=86)
        f.summary += (f" The acceptance measured here shows no cliff; the cost grows with context past the "
                      f"{window}-token window.")
        out.findings.append(f)
        return out
    out.findings.append(issue_finding(st, "dflash-swa-full-attention", severity="warning", confidence=w.confidence,
                                      evidence=evidence, params=params, is_bug=True, priority=30))
    return out


def h_swa_needs_v2(st: State) -> Found:
    out = Found()
    ev, kb = st.ev, st.kb
    ctx = ev.context
    if ctx.method != "dflash" or ev.window is not None or ctx.model_runner_v2 is not False:
        return out
    v2 = _range(kb, "dflash-swa-full-attention", "from", "v2_from")[1]
    version = premise_version(ctx, v2, (99, 0, 0), "hybrid drafters run on Model Runner V2 only")
    sliding, _ = drafter_sliding(ev, kb)
    if version.state == "yes" and sliding.state == "yes":
        out.findings.append(issue_finding(st, "dflash-swa-needs-v2", severity="warning", confidence="medium",
                                          evidence=[version.text, sliding.text, "VLLM_USE_V2_MODEL_RUNNER is not set"],
                                          params=base_params(ev), is_bug=True, priority=30))
    return out


def h_method_not_in_release(st: State) -> Found:
    out = Found()
    ctx = st.ev.context
    first_text = st.kb.method_first_release.get(ctx.method or "")
    first = parse_version(first_text)
    if first is None or ctx.version is None or ctx.version >= first:
        return out
    src = ctx.sources.get("vllm_version", "context")
    out.consider(st, "method-not-in-release", "fits",
                 f"vLLM {ctx.vllm_version} (from {src}) is older than {first_text}")
    evidence = [f"method {ctx.method} (from {ctx.sources.get('method', 'context')})",
                f"vLLM {ctx.vllm_version} (from {src}); {ctx.method} first shipped in {first_text}"]
    evidence += [line_evidence(e.origin) for e in st.ev.events[-2:]]
    out.findings.append(issue_finding(st, "method-not-in-release", severity="critical", confidence="high",
                                      evidence=evidence, params=base_params(st.ev) | {"first": first_text}, is_bug=True,
                                      priority=8))
    return out


def h_zero_acceptance(st: State) -> Found:
    out = Found()
    ev, c = st.ev, st.curve
    if c is None or ev.window is None:
        return out
    if ev.context.method == "ngram":
        if c.shape == "all-zero":
            out.consider(st, "zero-acceptance", "not-applicable", "n-gram lookup found no match in these prompts")
        return out
    if c.shape != "all-zero":
        out.consider(st, "zero-acceptance", "ruled-out", f"{ev.window.accepted} token(s) accepted"
                     if ev.window.counts_known else "positions accept tokens")
        return out
    if ev.context.method == "draft_model" and ev.context.drafter and ev.context.drafter != ev.context.target_model:
        out.consider(st, "zero-acceptance", "possible", "a separate draft model accepting nothing is first of all a "
                                                        "mismatched pairing")
        return out
    out.consider(st, "zero-acceptance", "fits", "nothing accepted at any position")
    params = base_params(ev) | {"drafted": ev.window.drafted}
    f = issue_finding(st, "zero-acceptance", severity="critical", confidence="high",
                      evidence=window_evidence(ev.window, c), params=params, is_bug=True, priority=15)
    f.upstream += [u for e in _kb_acceptance_threads(st, ev.context.method) for u in e.upstream
                   if u.number not in {x.number for x in f.upstream}]
    f.sources += [s for e in _kb_acceptance_threads(st, ev.context.method) for s in e.sources]
    out.findings.append(f)
    return out


def _kb_acceptance_threads(st: State, method: str | None) -> list[Entry]:
    """Knowledge-base threads of zero acceptance with this method (references, never a diagnosis)."""
    return [e for e in st.base.entries if e.hypothesis == "zero-acceptance" and method
            and (method in e.affected.methods or "any" in e.affected.methods)][:3]
