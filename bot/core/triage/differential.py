"""The differential diagnosis run in order: each detector weighs the evidence and what came before it.

Upstream bugs are weighed first, so that what they explain is not blamed on the drafter or on tuning. The
tuning hypotheses still run after a critical bug: each reads the record and says so itself (a drafter
mismatch or low acceptance becomes "possible, a known bug explains it", a smaller k the interim step
beside the fix) — skipping them would drop that interim advice and the hypotheses from "considered".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.core.triage import timeline
from bot.core.triage.atlas_findings import place_unexplained
from bot.core.triage.below import below_vllm
from bot.core.triage.cache_dirs import unwritable_caches
from bot.core.triage.compile_cache import cache_then_crash, compile_backend_failed
from bot.core.triage.detectors.common import spec_decoding
from bot.core.triage.detectors.log_lines import log_event_findings
from bot.core.triage.detectors.low_acceptance import h_drafter_mismatch, h_low_acceptance
from bot.core.triage.detectors.outcome import healthy, no_metrics
from bot.core.triage.detectors.serving import h_engine_stalled, h_high_concurrency, h_kv_saturation, h_server_down
from bot.core.triage.detectors.speculative_tokens import h_too_many_tokens
from bot.core.triage.detectors.state import Found, State, curve_of
from bot.core.triage.detectors.throughput import estimate_speedup, h_not_paying
from bot.core.triage.detectors.upstream_bugs import (
    h_layer_offset,
    h_layer_offset_double,
    h_method_not_in_release,
    h_swa_full_attention,
    h_swa_needs_v2,
    h_zero_acceptance,
)
from bot.core.triage.engine_fork import fork_after_check, started_in_vllms_daemon
from bot.core.triage.evidence import Evidence
from bot.core.triage.findings import STATUS_RANK, Considered, Finding
from bot.core.triage.frame_signatures import frame_signature_findings
from bot.core.triage.knowledge import Knowledge, ReferenceCurve
from bot.core.triage.launch_command import launch_flags
from bot.core.triage.task_choice import pooling_model_as_generator

Detector = Callable[[State], Found]

LOG_LINES: tuple[Detector, ...] = (h_server_down, h_engine_stalled, log_event_findings, frame_signature_findings,
                                  unwritable_caches)
BUGS: tuple[Detector, ...] = (h_method_not_in_release, h_layer_offset, h_layer_offset_double,
                              h_swa_full_attention, h_swa_needs_v2, h_zero_acceptance)
TUNING: tuple[Detector, ...] = (h_drafter_mismatch, h_low_acceptance, h_too_many_tokens, h_not_paying,
                                h_kv_saturation, h_high_concurrency)
LAST: tuple[Detector, ...] = (no_metrics, healthy)
SERVING: tuple[Detector, ...] = (h_kv_saturation,)  # what holds with or without speculation


@dataclass(frozen=True)
class Diagnosis:
    """What the triage concluded and the evidence it weighed; bot.core.report.build_report gives its JSON form."""

    evidence: Evidence
    verdict: str  # healthy | degraded | failing | unknown
    findings: list[Finding]  # ranked: severity, confidence, priority
    considered: list[Considered] = field(default_factory=list)  # fits first, not-applicable last
    plan: list[str] = field(default_factory=list)  # what to try first when more than one cause fits
    shape: str | None = None  # the acceptance curve's
    speedup: float | None = None  # estimated over no speculation, by the acceptance model
    reference: ReferenceCurve | None = None  # the method's published curve, to show beside the measured one
    notes: tuple[str, ...] = ()  # the evidence's, then the detectors', each once


def start(ev: Evidence, knowledge: Knowledge) -> State:
    """The detectors' state before the first of them: the evidence and what is known, an empty record."""
    return State(ev, knowledge.facts, curve_of(ev), [], [], knowledge.base, thresholds=knowledge.thresholds)


def differential(ev: Evidence, knowledge: Knowledge) -> Diagnosis:
    st = start(ev, knowledge)
    for detector in LOG_LINES:
        st.record(detector(st))
    answered = below_vllm(st)  # what a lower layer printed: its own documentation answers it
    place_unexplained(st, answered)  # what no entry explains: where vLLM's own source prints it
    compile_backend_failed(st)  # vLLM's torch.compile backend raised: the compile (or its cache) is the part
    cache_then_crash(st)  # a start that reused the compile cache and crashed: the cache is a part to switch off
    pooling_model_as_generator(st)  # weights that do not fit the causal LM vLLM chose among pooling tasks
    fork_after_check(st)  # CUDA met in vLLM's own forked child, on a release that checks for it before forking
    started_in_vllms_daemon(st)  # a process refused inside vLLM's own (daemonic) worker: the code running there
    launch_flags(st)  # a printed `vllm serve` command whose flags the release does not have, and nothing after it
    st.notes.extend(timeline.apply(st.findings, ev))  # the verdict is about now: past warnings and startup notices
    # drafters, k and speculation are weighed only where speculation is on: the rest of the world is not told
    speculating = spec_decoding(ev) == "on"
    for detector in (*(BUGS if speculating else ()), *(TUNING if speculating else SERVING), *LAST):
        st.record(detector(st))
    development_build(ev, st.findings)
    platform_plugin(ev, st.findings)
    findings = sorted(st.findings, key=Finding.rank_key)
    return Diagnosis(
        evidence=ev, verdict=verdict_of(ev, findings), findings=findings,
        considered=sorted(st.considered, key=lambda c: STATUS_RANK[c.status]), plan=plan_for(ev, findings),
        shape=st.curve.shape if st.curve else None, speedup=estimate_speedup(ev, knowledge.facts)[0],
        reference=knowledge.facts.reference_curves.get(ev.context.method or ""),
        notes=tuple(dict.fromkeys([*ev.notes, *st.notes])))


def development_build(ev: Evidence, findings: list[Finding]) -> None:
    """A crash in vLLM's own code on a development build (a nightly, a release candidate, a commit): the last
    release is the baseline to pin while it is reported — the build may carry a change not yet released or fixed."""
    from packaging.version import InvalidVersion, Version

    from bot.core.atlas import load_atlas

    text = ev.context.vllm_version
    try:
        v = Version(text.strip().lstrip("v")) if text else None
    except InvalidVersion:
        return
    if v is None or not (v.is_devrelease or v.is_prerelease or v.local):
        return
    base = Version(v.base_version)
    released = [r for r in load_atlas().releases if Version(r) < base or (Version(r) == base and not v.is_prerelease)]
    if not released:
        return
    last = released[-1]
    for f in findings:
        if f.severity != "critical" or f.owner not in (None, "vllm") or "pin" in f.advice:
            continue
        f.remediation.append(f"You run a development build of vLLM ({text}): pin a release below it while you report "
                             f"it — {last} is the last below {base} that specops reads (`pip install vllm=={last}`); a "
                             "change of the build may be the cause.")
        f.advice.append("pin")


# accelerators vLLM runs through an out-of-tree platform plugin (vLLM's plugin system: `vllm.platform_plugins`), and
# the plugin that serves each
PLATFORM_PLUGINS: tuple[tuple[str, str, str], ...] = (
    (r"\bgaudi|\bhpu\b|habana", "vllm-gaudi", "https://github.com/vllm-project/vllm-gaudi"),
    (r"\bascend|\bnpu\b|atlas 800", "vllm-ascend", "https://github.com/vllm-project/vllm-ascend"),
    (r"\bspyre\b", "vllm-spyre", "https://github.com/vllm-project/vllm-spyre"),
    (r"apple|\bmetal\b|\bm[1-4]\b(?: (?:pro|max|ultra))?", "vllm-metal", "https://github.com/vllm-project/vllm-metal"),
)
_ACTIVATED = re.compile(r"Platform plugin (\w+) is activated")


def platform_plugin(ev: Evidence, findings: list[Finding]) -> None:
    """On an accelerator vLLM reaches through a platform plugin (the log says the plugin is activated, or the GPU
    named is one), a crash in code the log does not pin on vLLM itself is first the plugin's: its release must
    match vLLM's, and it has its own fixes."""
    from bot.core.owners import PLUGIN_DOC

    named = " ".join([ev.context.gpu or ""] + [c.origin.text for c in ev.parsed.clues if c.kind == "progress"])
    active = [m.group(1) for c in ev.parsed.clues if c.kind == "progress" and (m := _ACTIVATED.search(c.origin.text))]
    plugin = next(((pkg, repo) for rx, pkg, repo in PLATFORM_PLUGINS
                   if re.search(rx, named, re.IGNORECASE) or any(re.search(rx, a, re.IGNORECASE) for a in active)),
                  None)
    if plugin is None:
        return
    pkg, repo = plugin
    for f in findings:
        if f.severity != "critical" or f.owner not in (None, "vllm") or "request" in f.inputs:
            continue
        f.remediation.append(f"This accelerator runs vLLM through the `{pkg}` platform plugin ({repo}): check that "
                             f"the installed `{pkg}` is the release made for your vLLM (`pip show {pkg} vllm`), and "
                             "look for the failure in its own issues and releases — upgrading the plugin is often the "
                             "fix.")
        f.advice = list(dict.fromkeys([*f.advice, "disable-plugin"]))
        f.deps = list(dict.fromkeys([*f.deps, pkg]))
        f.sources = list(dict.fromkeys([*f.sources, PLUGIN_DOC, repo]))
        if f.owner is None:
            f.owner = "plugin"


def verdict_of(ev: Evidence, findings: list[Finding]) -> str:
    if any(f.severity == "critical" for f in findings):
        return "failing"
    if any(f.severity == "warning" for f in findings):
        return "degraded"
    if ev.window is not None or any(f.id == "healthy" for f in findings):
        return "healthy"
    return "unknown"


def plan_for(ev: Evidence, findings: list[Finding]) -> list[str]:
    """What to try first when more than one cause fits, and why; for a crash in a part that can be switched off,
    the switch first (turn it off to prove it), then the fix."""
    ids = {f.id for f in findings if f.severity in ("critical", "warning")}
    critical = [f for f in findings if f.severity == "critical"]
    top = critical[0] if critical else None
    if top is not None and not top.switch and top.catch_all:
        # the catch-all crash finding knows no part; a finding that placed the crash in a part that can be switched
        # off says what to try first
        top = next((f for f in critical[1:] if f.switch), top)
    if top is not None and top.switch:
        fix = next((r for r in top.remediation if r != top.switch), None)
        return [f"First, prove it: {top.switch}"] + ([f"Then: {fix}"] if fix else [])
    host = ev.context.host or "<host>"
    version = ev.context.version_text()
    if {"dflash-layer-offset", "dflash-swa-full-attention"} <= ids:
        return [
            "Two known upstream causes fit: the layer-index offset (vllm#40727) and the sliding-window "
            "drafter layers run as full attention (vllm#40898, then vllm#46104).",
            "Try first: upgrade to vLLM ≥ 0.26.0 with `VLLM_USE_V2_MODEL_RUNNER=1` "
            f"(`specops deploy dflash --host {host}`). One change fixes both: #40727 is in every release from "
            "0.22.0, and hybrid sliding/full drafters run correctly on Model Runner V2 from 0.26.0.",
            f"If you must stay on {version}: shift `target_layer_ids` by one first. The offset feeds every "
            "drafted position the wrong target features, which is what a collapse at short context looks like; "
            "the full-attention SWA layers cost most past the 2048-token window and have no switch on this "
            "release. Until then MTP is faster on this host "
            f"(`specops deploy mtp --host {host}`).",
        ]
    return []
