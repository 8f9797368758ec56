"""Findings from the message atlas: a line of vLLM's that no knowledge-base entry explains.

The knowledge base knows what it was shown; the atlas knows where every message of every release was
printed or raised (bot/core/atlas.py). For an error, a warning or an exception the failure table did
not claim, the report says which part of vLLM raised it, the file, function and release range, the
guarding condition in words, the flags that condition names (with their help), and — when a later
release no longer prints it — the upgrade. Such a finding ranks below a knowledge-base entry and
carries its own confidence: an exact match to a site with a condition is stronger than a guess from
the module a traceback ended in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.core import gpus
from bot.core.logparse import ProblemLine
from bot.core.triage.evidence import position
from bot.core.triage.findings import Confidence, Considered, Finding, Severity, SiteRef

if TYPE_CHECKING:
    from bot.core.atlas import Atlas, AtlasMatch, Site
    from bot.core.triage.detectors import State
    from bot.core.triage.findings import Advice

PART_TITLES: dict[str, str] = {
    "drafter": "the drafter (speculative proposer)", "spec-config": "the speculative-decoding config",
    "parallel": "parallel / distributed setup", "attention": "an attention backend",
    "compilation": "compilation / CUDA graphs", "structured-output": "structured output",
    "model-loading": "model loading", "models": "a model implementation", "quantization": "quantization",
    "kv-cache": "the KV cache", "scheduler": "the scheduler", "entrypoint": "the API server (entrypoint)",
    "engine": "the engine", "worker": "the GPU worker", "platform": "the platform check", "lora": "LoRA",
    "multimodal": "multimodal input", "tokenizer": "the tokenizer", "config": "the engine config",
    "hub": "huggingface_hub (model download)", "transformers": "transformers (model/tokenizer config)",
    "other": "vLLM",
}
_SPEC_PARTS = frozenset({"drafter", "spec-config"})
MAX_ATLAS_FINDINGS = 4
_MESSAGE_CHARS = 160


@dataclass
class _Candidate:
    line: ProblemLine
    frames: list[ProblemLine] = field(default_factory=list)  # the traceback that ended in this line


def _candidates(problems: list[ProblemLine], start: int, fallbacks: frozenset[str]) -> list[_Candidate]:
    """Exceptions (with the frames of their traceback) first, then error lines, then warnings; once each."""
    frames: dict[int, list[ProblemLine]] = {}
    for p in problems:
        if p.kind == "frame" and p.traceback_id is not None:
            frames.setdefault(p.traceback_id, []).append(p)
    # pydantic's `N validation error(s) for XConfig` heads the lines that say what failed: those are placed
    detailed = {p.traceback_id for p in problems if p.kind == "exception" and p.traceback_id is not None
                and (p.config_field or p.exception in ("ValueError", "AssertionError"))}
    seen: set[str] = set()
    out: list[_Candidate] = []
    for rank in ("exception", "error", "warning", "loose"):
        for p in problems:
            explained = p.explained_by is not None and p.explained_by not in fallbacks
            if position(p.origin) < start or explained or p.kind == "frame":
                continue
            level = (p.origin.level or "").upper()
            kind = "exception" if p.kind == "exception" else "loose" if p.kind == "loose" else (
                "error" if level in ("ERROR", "CRITICAL") else "warning" if level in ("WARNING", "WARN") else "")
            if kind != rank:
                continue
            key = p.message.strip()[:200]
            if not key or key in seen:
                continue
            if p.exception == "ValidationError" and p.config_field is None and p.traceback_id in detailed:
                continue
            seen.add(key)
            out.append(_Candidate(p, frames.get(p.traceback_id, []) if p.traceback_id is not None else []))
    return out


def _innermost(atlas: Atlas, frames: list[ProblemLine], version: str | None) -> tuple[ProblemLine, Site | None] | None:
    """The traceback's innermost frame inside vLLM (or a library the atlas reads): which part raised."""
    for frame in reversed(frames):
        path = frame.frame_file or ""
        if "vllm/" not in path and "huggingface_hub/" not in path and "transformers/" not in path:
            continue
        return frame, atlas.frame(path, frame.frame_function or "", version=version)
    return None


def place_unexplained(st: State) -> None:
    # a catch-all entry ("an error no known signature explains") does not explain a line the atlas places
    fallbacks = frozenset(e.id for e in st.base.entries if e.catch_all)
    _place(st, fallbacks)
    _supersede_fallbacks(st, fallbacks)


def _place(st: State, fallbacks: frozenset[str]) -> None:
    ev = st.ev
    problems = [*ev.parsed.problems, *ev.parsed.loose]
    if not problems:
        return
    from bot.core.triage.evidence import latest_launch

    candidates = _candidates(problems, latest_launch(ev.parsed), fallbacks)
    if not candidates:
        return
    from bot.core.atlas import load_atlas  # the atlas loads only when a line needs it

    atlas = load_atlas()
    version = ev.context.vllm_version
    gpu = _gpu_of(st)
    made = 0
    for cand in candidates:
        if made >= MAX_ATLAS_FINDINGS:
            break
        finding = _finding(st, atlas, cand, version, gpu)
        if finding is None:
            continue
        if any(f.id == finding.id for f in st.findings):
            continue
        st.findings.append(finding)
        st.considered.append(Considered(id=finding.id, title=finding.title, status="fits",
                                        why=_why(finding)))
        made += 1


def _supersede_fallbacks(st: State, fallbacks: frozenset[str]) -> None:
    """A catch-all crash finding says no signature explains the error; once an entry or the atlas does (a
    critical finding of its own, sure of itself), the catch-all is the weaker of two answers to one question
    and moves to "considered"."""
    placed = [f for f in st.findings if f.severity == "critical" and f.confidence in ("high", "medium")
              and f.id not in fallbacks and f.id not in ("server-down", "no-metrics")]
    if not placed:
        return
    by = placed[0]
    where = f"{by.site.file} ({by.site.function})" if by.site else by.id
    for f in [f for f in st.findings if f.id in fallbacks]:
        st.findings.remove(f)
        st.considered.append(Considered(id=f.id, title=f.title, status="ruled-out",
                                        why=f"explained more precisely: {where}"))


def _why(f: Finding) -> str:
    strength = {"high": "matched exactly to the site, with its condition",
                "medium": "matched exactly to the site", "low": "matched on part of the message or on the module"}
    where = f"{f.site.file} ({f.site.function})" if f.site else "the module the traceback ended in"
    return f"{strength[f.confidence]}: {where}"


def _finding(st: State, atlas: Atlas, cand: _Candidate, version: str | None, gpu: gpus.Gpu | None) -> Finding | None:
    p = cand.line
    origin = p.origin
    exc = p.exception.rsplit(".", 1)[-1] if p.exception else None
    m = atlas.match(p.message, version=version, exc=exc, level=origin.level,
                    source_file=origin.source_file, source_line=origin.source_line)
    if m is None and p.config_field:
        return _field_finding(st, atlas, p, version)
    # a line without level or class: only what vLLM raises or logs as a problem counts
    if p.kind == "loose" and (m is None or not (m.site.kind == "raise" or (m.site.level or "") in _PROBLEM_LEVELS)):
        return None
    inner = _innermost(atlas, cand.frames, version) if cand.frames else None
    if m is None and inner is None:
        return None
    if m is None and p.kind != "exception":
        return None
    severity, confidence = _weight(p, m)
    site_ref: SiteRef | None = None
    part: str
    if m is not None:
        site = m.site
        part = site.part
        site_ref = SiteRef(package=site.package, file=site.file, function=site.function, line=m.line,
                           release=m.release, url=m.url, first=site.first, last=site.last,
                           condition=site.condition, compare_url=m.compare_url)
        fid = f"atlas:{site.id}"
    else:
        assert inner is not None
        frame, frame_site = inner
        part = frame_site.part if frame_site else atlas.part_of(frame.frame_file or "")
        fid = f"atlas-frame:{_short_path(frame.frame_file or '')}:{frame.frame_function}"
    what = p.exception or (origin.level or "line").upper()
    title = f"{what} from {PART_TITLES.get(part, part)}: {_clip(p.message, 90)}"
    summary = _summary(m, inner, part, version)
    evidence = [f"{origin.where()}: {_clip(origin.text or p.message, 300)}"]
    if inner is not None:
        frame = inner[0]
        evidence.append(f"innermost frame in vLLM: {_short_path(frame.frame_file or '')}:{frame.frame_line} in "
                        f"{frame.frame_function}")
    remediation, knobs, advice = _remedies(st, m, part, gpu)
    return Finding(id=fid, title=title, severity=severity, confidence=confidence, summary=summary,
                   evidence=evidence, remediation=remediation, sources=[m.url] if m is not None else [],
                   is_bug=False, priority=40, part=part, knobs=knobs, advice=advice, site=site_ref)


def config_part(atlas: Atlas, cls: str) -> str:
    """The part a config class belongs to, from its module (`CacheConfig` lives in vllm/config/cache.py)."""
    stem = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.removesuffix("Config")).lower()
    return atlas.part_of(f"vllm/config/{stem}.py") if stem else "config"


def _field_finding(st: State, atlas: Atlas, p: ProblemLine, version: str | None) -> Finding | None:
    """A config field's own constraint (pydantic: `gpu_memory_utilization: Input should be less than or equal
    to 1`): no vLLM message to place, but the field is named, and with it the flag that sets it."""
    assert p.config_field is not None
    cls, _, name = p.config_field.partition(".")
    knobs = atlas.knobs_for([p.config_field], version)
    part = config_part(atlas, cls)
    remediation = [f"The value comes from {'`' + k.flag + '`' + (f' (its `{k.key}` key)' if k.key else '')}"
                   + (f": {_clip(k.help, 220)}" if k.help else "") for k in knobs]
    if not knobs:
        remediation.append(f"No flag of {version or 'this release'} maps to `{p.config_field}` in the atlas; "
                           "look for it in the config file or the code that builds the engine.")
    return Finding(
        id=f"config-field:{p.config_field}", title=f"Invalid `{name}` ({cls}): {_clip(p.message, 90)}",
        severity="critical", confidence="high" if knobs else "medium",
        summary=(f"vLLM's config validation refused the value of `{p.config_field}` before the engine started "
                 f"(pydantic: {_clip(p.message, 200)})."),
        evidence=[f"{p.origin.where()}: {_clip(p.origin.text or p.message, 300)}"], remediation=remediation,
        priority=40, part=part, knobs=[k.flag for k in knobs])


_PROBLEM_LEVELS = frozenset({"error", "critical", "exception", "warning", "warn", "error_once", "warning_once"})


def _weight(p: ProblemLine, m: AtlasMatch | None) -> tuple[Severity, Confidence]:
    level = (p.origin.level or "").upper()
    if p.kind == "loose" and m is not None:  # no level printed: the site's own says how bad it is
        level = "ERROR" if m.site.kind == "raise" else (m.site.level or "").split("_")[0].upper()
    if p.kind == "exception" or (m is not None and m.site.kind == "raise" and level not in ("WARNING", "INFO")):
        severity: Severity = "critical"
    elif level in ("ERROR", "CRITICAL"):
        severity = "warning"
    else:
        severity = "info"
    if m is None or not m.exact:
        return severity, "low"
    return severity, "high" if m.site.condition else "medium"


def _summary(m: AtlasMatch | None, inner: tuple[ProblemLine, Site | None] | None, part: str,
             version: str | None) -> str:
    if m is None:
        assert inner is not None
        frame, site = inner
        span = f" (in vLLM {site.first}–{site.last})" if site else ""
        return (f"No known failure matches this line, and its message is not one the atlas of vLLM's releases "
                f"holds; the traceback ended in {PART_TITLES.get(part, part)}, "
                f"{_short_path(frame.frame_file or '')} in {frame.frame_function}{span}.")
    site = m.site
    kind = "raised" if site.kind == "raise" else f"logged at {site.level or 'some'} level"
    package = {"vllm": "vLLM", "huggingface_hub": "huggingface_hub", "transformers": "transformers"}.get(
        site.package, site.package)
    where = PART_TITLES.get(part, part)
    parts = [f"{package} {kind} this in {where}: {site.file}:{m.line}, `{site.function}` "
             f"(releases {site.first}–{site.last}; source: {m.url})."]
    if m.condition_text:
        parts.append(f"It does so when {m.condition_text}.")
    if m.gone_after and version:
        parts.append(f"vLLM {m.gone_after} is the last release that prints it; {m.fixed_in} no longer does.")
    elif m.in_release is False and version:
        parts.append(f"Your release ({version}) does not have this line: the log is from another build, or the "
                     "version given is wrong.")
    return " ".join(parts)


def _remedies(st: State, m: AtlasMatch | None, part: str,
              gpu: gpus.Gpu | None) -> tuple[list[str], list[str], list[Advice]]:
    out: list[str] = []
    knobs: list[str] = []
    advice: list[Advice] = []
    spec = _has_spec(st)
    if m is not None:
        if m.gone_after and m.fixed_in:
            out.append(f"Upgrade: vLLM {m.fixed_in} no longer prints this message (the code changed after "
                       f"{m.gone_after}): {m.compare_url or ''}".rstrip(": "))
            advice.append("upgrade")
        for knob in m.knobs:
            if not spec and knob.flag == "--speculative-config":
                continue
            name = f"`{knob.flag}`" + (f" (its `{knob.key}` key)" if knob.key else "")
            help_text = f": {_clip(knob.help, 220)}" if knob.help else ""
            out.append(f"The setting this check reads is {name}{help_text}")
            if knob.flag not in knobs:
                knobs.append(knob.flag)
        need = gpus.required_capability(m.site.condition, m.site.template)
        if need is not None:
            have = (f"{gpu.name} is {gpu.generation}, compute capability {gpu.capability_text}" if gpu else
                    "the log does not name the GPU (`nvidia-smi --query-gpu=name,compute_cap --format=csv`)")
            out.append(f"This check needs compute capability ≥ {need[0]}.{need[1]}; {have} "
                       f"(NVIDIA's table: {gpus.SOURCE}).")
        out.append(f"Read the check at your release: {m.url}")
    if part in _SPEC_PARTS and spec and st.ev.context.num_speculative_tokens:
        out.append("While it is open, serving without `--speculative-config` tells a drafter problem from a "
                   "target one.")
    return out, knobs, advice


def _has_spec(st: State) -> bool:
    ctx = st.ev.context
    return bool(ctx.method or ctx.num_speculative_tokens or ctx.drafter or st.ev.window is not None)


_GPU_HINT = re.compile(r"nvidia|geforce|tesla|quadro|\brtx\b|\bgpu\b|cuda device", re.IGNORECASE)


def _gpu_of(st: State) -> gpus.Gpu | None:
    ctx = st.ev.context
    if ctx.gpu:
        found = gpus.lookup(ctx.gpu)
        if found is not None:
            return found
    for p in st.ev.parsed.problems:
        text = p.origin.text or p.message
        if _GPU_HINT.search(text):
            found = gpus.find_in(text)
            if found is not None:
                return found
    return None


def _short_path(path: str) -> str:
    for root in ("vllm/", "huggingface_hub/", "transformers/"):
        i = path.rfind("/" + root)
        if i >= 0:
            return path[i + 1:]
        if path.startswith(root):
            return path
    return path


def _clip(text: str, n: int = _MESSAGE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"



@dataclass(frozen=True)
class Explained:
    """One pasted line, read as vLLM would have printed it, and where the atlas places it."""

    message: str
    exception: str | None
    level: str | None
    source: str | None  # `file.py:123` from vLLM's prefix
    match: AtlasMatch | None


def explain_line(text: str, version: str | None = None) -> Explained:
    from bot.core.atlas import load_atlas, split_line
    from bot.core.logparse import strip_outer_prefix

    line = split_line(strip_outer_prefix(text.strip()))
    exc = line.exc.rsplit(".", 1)[-1] if line.exc else None
    match = load_atlas().match(line.message, version=version, exc=exc, level=line.level,
                               source_file=line.source_file, source_line=line.source_line)
    source = f"{line.source_file}:{line.source_line}" if line.source_file else None
    return Explained(line.message, exc, line.level, source, match)
