"""A line the knowledge base knows: the finding is its entry, the evidence the line itself."""

from __future__ import annotations

import re

from bot.core.kb import Entry
from bot.core.parsed_log import LogEvent
from bot.core.triage.context import parse_version
from bot.core.triage.detectors.common import base_params, fill, line_evidence, spec_decoding
from bot.core.triage.detectors.state import Found, State
from bot.core.triage.evidence import position
from bot.core.triage.findings import ADVICE_KINDS, Advice, Finding, Severity

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


_NOTE_LEVELS = frozenset({"WARNING", "INFO", "DEBUG"})


def log_event_findings(st: State) -> Found:
    """A line the knowledge base knows: the finding is the entry, the evidence the line itself."""
    out = Found()
    grouped: dict[str, list[LogEvent]] = {}
    for event in st.ev.events:
        grouped.setdefault(event.kind, []).append(event)
    spec_unsure = spec_decoding(st.ev) != "on"
    for kind, events in grouped.items():
        entry = st.base.get(kind)
        if entry is not None and entry.catch_all:
            # a traceback a logger printed at a warning's level (`logger.warning(…, exc_info=True)`, torch's `W…`
            # records) was logged and gone on from: no crash for the catch-all to claim
            events = [e for e in events if (e.origin.level or "").upper() not in _NOTE_LEVELS]
        if entry is not None and events:
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
        id=entry.id, title=entry.title, severity=severity, confidence="low" if entry.catch_all or _drafters_only(
            entry, spec_unsure) else "high",
        summary=summary, evidence=evidence, upstream=list(entry.upstream),
        sources=list(entry.sources), remediation=remediation, is_bug=severity == "critical",
        priority=10 if entry.fatal_at_launch else 12, advice=advice,
        at=position(events[-1].origin), level=events[-1].origin.level,
        part="models" if spec_unsure and entry.part in ("drafter", "spec-config") else entry.part,
        owner=entry.owner, inputs=_entry_inputs(entry, events), knobs=_tagged(fix, "knob"), deps=_tagged(fix, "dep"),
        host=_tagged(fix, "host"), catch_all=entry.catch_all, waits=entry.waits,
        per_request=entry.per_request, after_start=entry.after_start)


def _drafters_only(entry: Entry, spec_unsure: bool) -> bool:
    """An entry about drafters alone (its methods all speculative) on a log that does not show speculation on: the
    same words come from the target model as well, so the drafter reading is a guess — also for a fallback entry
    whose cause is speculation's share of a general failure (a CUDA out of memory)."""
    return spec_unsure and "any" not in entry.affected.methods and (
        entry.part in ("drafter", "spec-config") or entry.fallback)


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
