"""The differential diagnosis: every known issue is a hypothesis weighed against the evidence.

A hypothesis has premises (the vLLM version range it affects, the method, facts about the drafter)
and an expected signature in the acceptance curve (bot/core/triage/acceptance.py). Each premise is
known (`yes`/`no`, from a flag, the log or the knowledge base), only guessed (a version read off the
`[metrics.py:LINE]` hint, a method read off a drafter's name) or unknown. The rule:

- a premise that is known false          -> not-applicable
- the signature is there                 -> fits (high confidence when every premise is known)
- no acceptance data to compare with     -> fits when every premise is known, else possible
- the evidence contradicts the signature -> possible (known premises: a note, not a problem), else ruled-out

So a finding about a bug needs its signature (or a log line that says so) whenever a premise is only
guessed, and acceptance that contradicts it rules it out. Tuning advice (fewer tokens) is never given
on top of a bug: fix first, then tune. The words and facts come from known_issues.yaml and the
knowledge base (bot/core/knowledge/); the code decides when they apply and how sure it is.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from bot.core.kb import KB, Entry
from bot.core.parsed_log import LogEvent, Origin
from bot.core.triage.acceptance import TPS_NOISE, Curve, KAdvice, classify, estimated_speedup, k_advice
from bot.core.triage.context import DeploymentContext, Version, fmt_version, parse_version
from bot.core.triage.evidence import Evidence, Window, latest_launch, position
from bot.core.triage.findings import ADVICE_KINDS, Advice, Confidence, Considered, Finding, Severity, Status
from bot.core.triage.knowledge import KnowledgeBase, Thresholds

if TYPE_CHECKING:
    from bot.core.triage.timeline import Progress

MAX_EVIDENCE_CHARS = 400
PAYING = 1.3  # an estimated speedup at or above this makes low acceptance a note, not a problem
P1_MARGIN = 0.15  # below the method's typical first-position rate by more than this: low
TYPICAL_DECAY = 0.8  # each position ~80% of the one before, on a matched pair (acceptance.md's curves)
PremiseState = Literal["yes", "no", "guessed", "unknown"]
# specific: only this cause shows it; fits: consistent, though other causes show it too
Signature = Literal["specific", "fits", "weak", "absent", "against"]


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


@dataclass(frozen=True)
class Premise:
    state: PremiseState
    text: str


@dataclass
class Weighed:
    status: Status
    confidence: Confidence | None  # None: no finding, only a line under "considered"


def weigh(premises: list[Premise], signature: Signature) -> Weighed:
    if any(p.state == "no" for p in premises):
        return Weighed("not-applicable", None)
    known = all(p.state == "yes" for p in premises)
    unknown = any(p.state == "unknown" for p in premises)
    if signature == "specific":
        return Weighed("fits", "high" if known else "medium")
    if signature == "fits":
        if unknown:  # others explain it as well: only a premise we know (or guess) makes it this cause
            return Weighed("possible", None)
        return Weighed("fits", "high" if known else "medium")
    if signature == "weak":
        return Weighed("fits", "medium") if known else Weighed("possible", None)
    if signature == "absent":
        return Weighed("fits", "medium") if known else Weighed("possible", None)
    return Weighed("possible", "low") if known else Weighed("ruled-out", None)


# --- context --------------------------------------------------------------------------------------

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


def premise_method(ctx: DeploymentContext, method: str) -> Premise:
    if ctx.method is None:
        return Premise("unknown", "the method is not known (give --method)")
    source = ctx.sources.get("method", "context")
    guessed = source in ("drafter name", "drafter config")
    if ctx.method != method:
        return Premise("no", f"the method is {ctx.method} (from {source})")
    return Premise("guessed" if guessed else "yes", f"method {method} (from {source})")


def premise_version(ctx: DeploymentContext, lo: Version, hi: Version, what: str) -> Premise:
    """Is the version in [lo, hi)? `what` says what that range means, e.g. 'before the fix in 0.22.0'."""
    span = f"{fmt_version(lo)}–{_before(hi)}"
    if ctx.vllm_version and ctx.version is not None:
        v = ctx.version
        src = ctx.sources.get("vllm_version", "context")
        if lo <= v < hi:
            return Premise("yes", f"vLLM {ctx.vllm_version} (from {src}) is in {span} ({what})")
        return Premise("no", f"vLLM {ctx.vllm_version} (from {src}) is outside {span} ({what})")
    bounds = ctx.version_bounds()
    if bounds is not None:
        a, b = bounds
        where = ctx.sources.get("version_range", "the log")
        guess = f"the version could be {fmt_version(a)}–{fmt_version(b)} ({where})"
        if b < lo or a >= hi:
            return Premise("no", f"{guess}, outside {span}")
        return Premise("guessed", guess)
    return Premise("unknown", "the vLLM version is not known (give --vllm-version)")


def _range(kb: KnowledgeBase, issue_id: str, lo_key: str, hi_key: str) -> tuple[Version, Version]:
    """The release range an issue's facts give (known_issues.yaml `affected`), as versions."""
    affected = kb.issues[issue_id].affected
    lo, hi = parse_version(affected.get(lo_key)), parse_version(affected.get(hi_key))
    if lo is None or hi is None:
        raise ValueError(f"known_issues.yaml: {issue_id}.affected needs {lo_key} and {hi_key}")
    return lo, hi


def _before(v: Version) -> str:
    major, minor, _ = v
    return f"{major}.{minor - 1}.x" if minor > 0 else f"before {fmt_version(v)}"


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


def _window_evidence(w: Window, curve: Curve) -> list[str]:
    out = []
    counts = f": accepted {w.accepted} of {w.drafted} drafted tokens ({w.rate:.1f}%)" if w.counts_known else ""
    ceiling = f" of at most {curve.ceiling:.0f} (k = {curve.k})" if curve.ceiling else ""
    out.append(f"mean acceptance length {w.mean:.2f}{ceiling} over {len(w.samples)} sample(s){counts}")
    if w.per_position:
        out.append(f"per-position acceptance: {', '.join(f'{x:.3f}' for x in w.per_position)} — {curve.describe()}")
    last = w.samples[-1].origin if w.samples else None
    if last is not None and last.text:
        out.append(line_evidence(last, "last sample, "))
    return out


# --- the hypotheses -------------------------------------------------------------------------------

@dataclass(frozen=True)
class State:
    """What the detectors read — the evidence, the facts, the curve, the knowledge base, the thresholds — and the
    record so far (findings, hypotheses considered, notes). A detector reads the record to weigh what came before
    it (a bug explains a collapse) and returns what it found; only the pipeline writes the record."""

    ev: Evidence
    kb: KnowledgeBase
    curve: Curve | None
    findings: list[Finding]
    considered: list[Considered]
    base: KB
    thresholds: Thresholds = field(default_factory=Thresholds)
    notes: list[str] = field(default_factory=list)

    @property
    def bug_fits(self) -> bool:
        return any(f.is_bug and f.severity in ("critical", "warning") for f in self.findings)

    @property
    def bug_known(self) -> bool:
        """A bug whose every premise is known (not a guessed version): it explains what it covers."""
        return any(f.is_bug and f.severity in ("critical", "warning") and f.confidence == "high" for f in self.findings)

    def record(self, found: Found) -> None:
        if found.withdrawn:
            self.findings[:] = [f for f in self.findings if f.id not in found.withdrawn]
        self.findings.extend(found.findings)
        self.considered.extend(found.considered)
        self.notes.extend(found.notes)


@dataclass
class Found:
    """What one detector concluded, for the pipeline to add to the record."""

    findings: list[Finding] = field(default_factory=list)
    considered: list[Considered] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # for the report: what the evidence shows beside any finding
    withdrawn: list[str] = field(default_factory=list)  # ids of findings in the record that this one supersedes

    def consider(self, st: State, issue_id: str, status: Status, why: str,
                 params: dict[str, Any] | None = None) -> None:
        facts = st.kb.issues[issue_id]
        title = fill(facts.title, base_params(st.ev) | (params or {}))
        self.considered.append(Considered(id=issue_id, title=title, status=status, why=why,
                                          upstream=[u.to_upstream() for u in facts.upstream]))

    def merge(self, other: Found) -> Found:
        self.findings += other.findings
        self.considered += other.considered
        self.notes += other.notes
        self.withdrawn += other.withdrawn
        return self


def _issue(st: State, issue_id: str, *, severity: Severity, confidence: Confidence, evidence: list[str],
           params: dict[str, Any], finding_id: str | None = None, is_bug: bool = False, priority: int = 50,
           sources: list[str] | None = None) -> Finding:
    facts = st.kb.issues[issue_id]
    return Finding(
        id=finding_id or issue_id, title=fill(facts.title, params), severity=severity, confidence=confidence,
        summary=fill(facts.summary, params).strip(), evidence=evidence,
        upstream=[u.to_upstream() for u in facts.upstream], sources=list(sources or facts.sources),
        remediation=[fill(r, params).strip() for r in facts.remediation], is_bug=is_bug, priority=priority,
        part=facts.part, inputs=list(facts.inputs), knobs=list(facts.knobs),
        advice=[a for a in facts.advice if a in ADVICE_KINDS],
    )


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
        evidence += _window_evidence(ev.window, c)
    if w.status == "possible":  # known to be affected, but the curve does not show it
        f = _issue(st, "dflash-layer-offset", severity="info", confidence="low", evidence=evidence, params=params,
                   is_bug=False, priority=85)
        f.summary += (" This release is affected, but the acceptance measured here shows no collapse: the cost is "
                      "likely the small one measured in the PR. Upgrading still helps.")
        out.findings.append(f)
        return out
    severity: Severity = "critical" if signature == "fits" else "warning"
    f = _issue(st, "dflash-layer-offset", severity=severity, confidence=w.confidence, evidence=evidence,
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
    out.findings.append(_issue(st, "dflash-layer-offset-double", severity="warning", confidence=confidence,
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
        evidence += _window_evidence(ev.window, c)[:2]
    params = base_params(ev) | {"window": window}
    if w.status == "possible":  # known to be affected, but the curve does not show it (yet)
        f = _issue(st, "dflash-swa-full-attention", severity="info", confidence="low", evidence=evidence,
                   params=params, priority=86)
        f.summary += (f" The acceptance measured here shows no cliff; the cost grows with context past the "
                      f"{window}-token window.")
        out.findings.append(f)
        return out
    out.findings.append(_issue(st, "dflash-swa-full-attention", severity="warning", confidence=w.confidence,
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
        out.findings.append(_issue(st, "dflash-swa-needs-v2", severity="warning", confidence="medium",
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
    out.findings.append(_issue(st, "method-not-in-release", severity="critical", confidence="high", evidence=evidence,
                               params=base_params(st.ev) | {"first": first_text}, is_bug=True, priority=8))
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
    f = _issue(st, "zero-acceptance", severity="critical", confidence="high",
               evidence=_window_evidence(ev.window, c), params=params, is_bug=True, priority=15)
    f.upstream += [u.to_upstream() for e in _kb_acceptance_threads(st, ev.context.method) for u in e.upstream
                   if u.number not in {x.number for x in f.upstream}]
    f.sources += [s for e in _kb_acceptance_threads(st, ev.context.method) for s in e.sources]
    out.findings.append(f)
    return out


def _kb_acceptance_threads(st: State, method: str | None) -> list[Entry]:
    """Knowledge-base threads of zero acceptance with this method (references, never a diagnosis)."""
    return [e for e in st.base.entries if e.hypothesis == "zero-acceptance" and method
            and (method in e.affected.methods or "any" in e.affected.methods)][:3]


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
        f = _issue(st, "self-drafter-collapse", severity="critical", confidence="medium",
                   evidence=_window_evidence(ev.window, c), params=base_params(ev), priority=25)
        threads = [e for e in st.base.entries if e.hypothesis in ("self-drafter-collapse", "zero-acceptance")
                   and ("mtp" in e.affected.methods)]
        f.upstream += [u.to_upstream() for e in threads for u in e.upstream]
        f.sources += [s for e in threads for s in e.sources]
        out.findings.append(f)
        return out
    out.consider(st, "drafter-mismatch", "fits", c.describe())
    params = base_params(ev) | {"floor": facts.healthy_pos0, "healthy_range": facts.healthy_range}
    evidence = _window_evidence(ev.window, c)
    if ev.context.drafter:
        evidence.append(f"drafter {ev.context.drafter}, target {ev.context.target_model or 'unknown'}")
    separate = ev.context.method == "draft_model" and bool(ev.context.drafter)
    out.findings.append(_issue(st, "drafter-mismatch", severity="critical", confidence="high" if separate else "medium",
                               evidence=evidence, params=params, priority=25))
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
    f = _issue(st, "low-acceptance", severity="info" if paying else "warning", confidence="medium",
               evidence=[why, *_window_evidence(ev.window, c)], params=params, priority=40 if not paying else 75)
    if paying:
        f.summary += f" Still ≈ {c.speedup:.1f}× faster than no speculation by the cost model."
    out.findings.append(f)
    return out


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
    finding = _issue(st, "not-paying-off", severity="warning", confidence=confidence, evidence=evidence,
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


def h_kv_saturation(st: State) -> Found:
    out = Found()
    ev = st.ev
    e = ev.engine
    if e is None or e.max_kv is None or e.max_kv < st.thresholds.kv_saturated or e.max_waiting == 0:
        return out
    params = base_params(ev) | {"kv": e.max_kv, "waiting": e.max_waiting}
    evidence = [line_evidence(e.kv_at_max.origin if e.kv_at_max else None)]
    out.findings.append(_issue(st, "kv-cache-saturated", severity="warning", confidence="high", evidence=evidence,
                               params=params, priority=70))
    return out


def h_high_concurrency(st: State) -> Found:
    out = Found()
    ev = st.ev
    e = ev.engine
    if ev.context.method != "dflash" or e is None or e.max_running <= 8:
        return out
    params = base_params(ev) | {"running": e.max_running}
    out.findings.append(_issue(st, "dflash-high-concurrency", severity="info", confidence="low",
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
    out.findings.append(_issue(st, "server-down", severity="critical", confidence="high", evidence=evidence + tail,
                               params=params, priority=5))
    return out


SEVERITY_OF: dict[str, Severity] = {"failing": "critical", "degraded": "warning", "info": "info"}
# a remedy about speculative decoding itself: the drafter, its config, its tokens
_VLLM_ENV_RE = re.compile(r"(?<![\w.])VLLM_[A-Z0-9_]*[A-Z0-9]\b")
_SPEC_ADVICE_RE = re.compile(r"--speculative-config|--speculative-model|\bdrafter|\bdraft model|"
                             r"num_speculative_tokens|speculative decoding|\bspeculation\b", re.IGNORECASE)
# a remedy that lowers k: "lower num_speculative_tokens", "num_speculative_tokens=3 (reported working)", "<= n_predict"
_SMALLER_K_RE = re.compile(
    r"(?:lower|reduce|decrease|smaller|fewer)\b[^.;]{0,60}?num_speculative_tokens"
    r"|num_speculative_tokens\s*(?:=|<=|≤|<)\s*(?:\d+|n_predict)", re.IGNORECASE)


def smaller_k_workaround(entry: Entry) -> str | None:
    """The remediation line of a knowledge-base entry that works around it with a smaller k, if it has one."""
    return next((r.strip() for r in entry.remediation if _SMALLER_K_RE.search(r)), None)


_SPEC_FRAME = re.compile(r"spec_decode/|/(?:\w*eagle\w*|\w*mtp\w*|\w*dflash\w*|medusa|ngram_proposer)\.py$")


def spec_decoding(ev: Evidence) -> Literal["on", "off", "unknown"]:
    """Does the deployment speculate? On: a method, k or drafter is known, the log has SpecDecoding lines, or a
    traceback runs through the speculative-decoding code. Off: the server's own arguments were read and name no
    speculative config, and nothing else says so."""
    ctx = ev.context
    if ctx.method or ctx.num_speculative_tokens or ctx.drafter or ev.window is not None or ev.parsed.samples:
        return "on"
    if any(p.kind == "frame" and _SPEC_FRAME.search((p.frame_file or "").replace("\\", "/"))
           for p in ev.parsed.problems):
        return "on"
    args = [c.value for c in ev.parsed.clues if c.kind == "args" and isinstance(c.value, dict)]
    if args and not any(a.get("speculative_config") or a.get("speculative_model") for a in args):
        return "off"
    return "unknown"


def log_event_findings(st: State) -> Found:
    """A line the knowledge base knows: the finding is the entry, the evidence the line itself."""
    out = Found()
    grouped: dict[str, list[LogEvent]] = {}
    for event in st.ev.events:
        grouped.setdefault(event.kind, []).append(event)
    spec_unsure = spec_decoding(st.ev) != "on"
    for kind, events in grouped.items():
        entry = st.base.get(kind)
        if entry is not None:
            out.findings.append(entry_finding(st, entry, events, spec_unsure))
    return out


def entry_finding(st: State, entry: Entry, events: list[LogEvent], spec_unsure: bool) -> Finding:
    evidence = [line_evidence(e.origin) for e in events[:3]]
    if len(events) > 3:
        evidence.append(f"… and {len(events) - 3} more such line(s)")
    severity = SEVERITY_OF[entry.severity]
    # advice about the drafter's share fits only a server that runs one (or an entry about speculation itself)
    spec_off = spec_unsure and "any" in entry.affected.methods
    remediation = [fill(r, base_params(st.ev)) for r in entry.remediation]
    if spec_off:
        remediation = [r for r in remediation if not _SPEC_ADVICE_RE.search(r)]
    summary, advice = _entry_summary(st, entry, spec_off)
    fix = [t for t in entry.fix if not (spec_off and t == "knob:--speculative-config")]
    advice += [a for a in (t.split(":", 1)[1] for t in fix if t.startswith("advice:"))  # type: ignore[misc]
               if a in ADVICE_KINDS and a not in advice]
    return Finding(
        # an entry that names only that something failed says nothing sure about why
        id=entry.id, title=entry.title, severity=severity, confidence="low" if entry.catch_all else "high",
        summary=summary, evidence=evidence, upstream=[u.to_upstream() for u in entry.upstream],
        sources=list(entry.sources), remediation=remediation, is_bug=severity == "critical",
        priority=10 if entry.fatal_at_launch else 12, advice=advice,
        at=position(events[-1].origin), level=events[-1].origin.level,
        part="models" if spec_unsure and entry.part in ("drafter", "spec-config") else entry.part,
        owner=entry.owner, inputs=_entry_inputs(entry, events), knobs=_tagged(fix, "knob"), deps=_tagged(fix, "dep"),
        host=_tagged(fix, "host"), catch_all=entry.catch_all, waits=entry.waits)


def _entry_inputs(entry: Entry, events: list[LogEvent]) -> list[str]:
    # the entry names the inputs its cause rests on; the vLLM variables its lines name are the ones this log set
    named = (n for e in events for n in _VLLM_ENV_RE.findall(e.origin.text))
    return list(dict.fromkeys([*entry.inputs, *named]))


def _tagged(fix: list[str], kind: str) -> list[str]:
    return [t.split(":", 1)[1] for t in fix if t.startswith(kind + ":")]


def _entry_summary(st: State, entry: Entry, spec_off: bool) -> tuple[str, list[Advice]]:
    summary = entry.cause
    version = st.ev.context.version
    if entry.fixed_in:
        fixed = parse_version(entry.fixed_in)
        summary += f" First fixed in vLLM {entry.fixed_in}."
        if fixed and version and version >= fixed:
            summary += f" This server reports {st.ev.context.vllm_version}: a regression, or another cause."
    elif entry.no_fix:
        summary += f" {entry.no_fix}"
    workaround = smaller_k_workaround(entry)
    if workaround is not None and not spec_off:
        return summary + f" A smaller k is a known workaround: {workaround.rstrip('.')}.", ["lower-k"]
    return summary, []


def no_metrics(st: State) -> Found:
    out = Found()
    ev = st.ev
    if ev.window is not None:
        return out
    if spec_decoding(ev) != "on" and any(f.severity == "critical" for f in st.findings):
        return out  # a crash of a server not known to speculate: its missing acceptance lines say nothing
    where = ""
    if any("no SpecDecoding metrics in the last" in n or "no SpecDecoding line" in n for n in ev.notes):
        where = " in the part that was read"
    params = base_params(ev) | _missing_in(ev, where)
    evidence = [f"{ev.parsed.stats.lines} line(s) read, {len(ev.parsed.engine)} Engine line(s)"]
    if ev.parsed.stats.skipped:
        evidence.append(f"{ev.parsed.stats.skipped} metrics-like line(s) were truncated or garbled and skipped")
        evidence += [f"could not read: {x}" for x in ev.parsed.stats.skipped_examples[:1]]
    out.findings.append(_issue(st, "no-metrics", severity="info", confidence="high", evidence=evidence,
                               params=params, priority=90))
    return out


def _missing_in(ev: Evidence, where: str) -> dict[str, str]:
    """What was read and found without metrics: a log, a /metrics scrape, both, or Prometheus' series (the title
    names it)."""
    if ev.metrics_from == "prometheus" and ev.parsed.stats.lines == 0:
        return {"in_what": "in Prometheus for this instance",
                "missing": "Prometheus holds no `vllm:spec_decode_*` series for this instance: this server reports no "
                           "speculative decoding (or Prometheus has not scraped it since it started)."}
    scraped = ev.metrics_from == "scrape"
    logged = ev.parsed.stats.lines > 0 or not scraped
    in_log = f"The log has no `SpecDecoding metrics` line{where}."
    in_scrape = ("The /metrics scrape has no `vllm:spec_decode_*` counters: this server reports no speculative "
                 "decoding.")
    if scraped and logged:
        return {"in_what": "in the log or the /metrics scrape", "missing": f"{in_log} {in_scrape}"}
    if scraped:
        return {"in_what": "in the /metrics scrape", "missing": in_scrape}
    return {"in_what": "in this log", "missing": in_log}


def healthy(st: State) -> Found:
    ev, kb, c = st.ev, st.kb, st.curve
    w = ev.window
    started = next((f for f in st.findings if f.id == "server-started"), None)
    if w is None:
        return _started_clean(st, started)
    # the metrics say more than the startup line
    out = Found(withdrawn=[started.id] if started is not None else [])
    if w is None or c is None or any(f.severity in ("critical", "warning") for f in st.findings):
        return out
    facts = kb.method(ev.context.method)
    parts = [f"Mean acceptance length {w.mean:.2f}"
             + (f" of at most {c.ceiling:.0f} (k = {c.k}, {100 * (c.efficiency or 0):.0f}% of drafted tokens "
                "accepted)" if c.ceiling else "") + f" over {len(w.samples)} sample(s)"]
    if w.per_position:
        parts.append(f"per position {w.per_position[0]:.3f} → {w.per_position[-1]:.3f}, {c.describe()}")
    if facts.healthy_range:
        parts.append(f"typical for {ev.context.method}: {facts.healthy_range}")
    if c.speedup is not None:
        parts.append(f"estimated speedup ≈ {c.speedup:.1f}× over no speculation")
    if ev.context.baseline_tps and ev.engine and ev.engine.single_request_tps:
        parts.append(f"{ev.engine.single_request_tps:.1f} tok/s for one request vs the reference "
                     f"{ev.context.baseline_tps:.1f}")
    if ev.context.method is None:
        parts.append("judged without knowing the method (give --method for a sharper judgement)")
    params = base_params(ev) | {"detail": "; ".join(parts) + "."}
    out.findings.append(_issue(st, "healthy", severity="info", confidence="high" if ev.context.method else "medium",
                                evidence=_window_evidence(w, c), params=params, priority=100))
    return out


_TROUBLE_RE = re.compile(r"error|exception|traceback|fail|fatal|warn|abort|denied|refused|killed|timeout|"
                         r"cannot|unable|not (?:found|supported)", re.IGNORECASE)


def _started_clean(st: State, started: Finding | None) -> Found:
    """A log with no metrics yet: healthy when the server started (or its startup went on) and nothing current is
    wrong — no error, traceback or warning finding left once past warnings and startup notices are notes. A log that
    shows no startup progress at all (a banner, a stray line) stays unknown: a hang looks so."""
    from bot.core.triage.timeline import progress_of

    ev = st.ev
    if any(f.severity in ("critical", "warning") for f in st.findings) or _unexplained(st):
        return Found()
    progress = progress_of(ev)
    # vLLM's own notices, placed at their sites, and the lines a note accounts for (an import probe logged and passed)
    notices = [f for f in st.findings if f.severity == "info"
               and ((f.site is not None and f.site.package == "vllm") or f.covers)]
    deprecations = [p for p in ev.parsed.loose if _DEPRECATION_RE.search(p.message)]
    if started is None and progress.last < 0 and not notices and not deprecations:
        return Found()
    spec = "speculative decoding configured; " if spec_decoding(ev) == "on" else ""
    notes = sum(1 for f in st.findings if f.severity == "info" and f.id not in ("no-metrics", "server-started"))
    noted = f" ({notes} notice(s) below, none current)" if notes else ""
    title, what = _how_it_started(started, progress, len(notices) + len(deprecations))
    return Found(withdrawn=[started.id] if started is not None else [], findings=[Finding(
        id="healthy", title=title, severity="info", confidence="medium",
        summary=(f"{what}; no error or traceback in {ev.parsed.stats.lines} line(s){noted}. {spec}No SpecDecoding "
                 "metrics yet, so acceptance is not judged: send traffic, then diagnose again."),
        evidence=list(started.evidence) if started is not None else [progress.startup_text[:300]],
        sources=list(started.sources) if started is not None else [], priority=100)])


def _unexplained(st: State) -> bool:
    """An error or a traceback of the latest launch no finding took up, or a stray line whose words say something
    went wrong."""
    ev = st.ev
    start = latest_launch(ev.parsed)
    covered = {at for f in st.findings for at in f.covers}
    return any(position(p.origin) >= start and position(p.origin) not in covered
               and (p.kind in ("exception", "frame") or (p.origin.level or "").upper() in ("ERROR", "CRITICAL"))
               for p in ev.parsed.problems) \
        or any(position(p.origin) >= start and _TROUBLE_RE.search(p.message) and not _NOTICE_RE.search(p.message)
               and (p.origin.level or "").upper() not in ("INFO", "DEBUG") for p in ev.parsed.loose)


def _how_it_started(started: Finding | None, progress: Progress, notices: int) -> tuple[str, str]:
    if started is not None or progress.served:
        what = started.evidence[0] if started is not None and started.evidence else "The server is up and serving"
        return "The server started and the log shows nothing wrong", what
    if progress.last < 0:
        return ("Only notices: nothing in the log failed",
                f"The log holds only notices ({notices}), each a note vLLM prints and goes on after")
    return ("Starting normally so far: nothing wrong in the log",
            f"Startup was going on at the last line (`{_clip(progress.startup_text)}`)")


# a line at INFO or DEBUG level, also under another logger's prefix (`[2025-06-16 15:50:30,791] LMCache INFO: …`,
# uvicorn's `INFO:     127.0.0.1 …`), or a warning: a note, whatever words it carries
# a warning that something is deprecated (Python's DeprecationWarning/FutureWarning, torch's c10 `Warning: … is
# deprecated`): it says what will change, never that anything failed
_DEPRECATION_RE = re.compile(r"(?i)(?:DeprecationWarning|FutureWarning|\bwarn(?:ing)?\b[^\n]{0,200}\bdeprecated\b)")
_NOTICE_RE = re.compile(r"^\s*(?:INFO|DEBUG)\b|^[^\n]{0,80}?(?<![\w-])(?:INFO|DEBUG)(?::|\s)|(?i:warning)")


def _clip(text: str, n: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def curve_of(ev: Evidence) -> Curve | None:
    w = ev.window
    if w is None:
        return None
    k = w.k or ev.context.num_speculative_tokens
    return classify(w.per_position, w.mean, k, ev.context.method, w.accepted if w.counts_known else None,
                    ev.context.first_position_floor)
