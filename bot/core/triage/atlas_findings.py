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

import json
import re
from dataclasses import dataclass, field, replace
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
    before: list[ProblemLine] = field(default_factory=list)  # the problem lines just before it


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
        for n, p in enumerate(problems):
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
            out.append(_Candidate(p, frames.get(p.traceback_id, []) if p.traceback_id is not None else [],
                                  problems[max(0, n - 5):n]))
    # a traceback whose exception line the log (or the paste) does not hold: its frames still say where
    ended = {p.traceback_id for p in problems if p.kind == "exception"}
    for tb, fs in frames.items():
        if tb not in ended and position(fs[-1].origin) >= start:
            out.append(_Candidate(fs[-1], fs))
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
    _hub_refusals(st)
    _locate_known(st, fallbacks)
    _supersede_fallbacks(st, fallbacks)


_MODULE_PARTS = (("huggingface_hub.", "hub"), ("transformers.", "transformers"))


def _module_part(text: str) -> str | None:
    """The library an exception's dotted class names (`huggingface_hub.errors.GatedRepoError: …`)."""
    body = text.split("] ", 1)[-1].strip() if "] " in text else text.strip()
    for prefix, part in _MODULE_PARTS:
        if body.startswith(prefix) or f" {prefix}" in body[:80]:
            return part
    return None


def _locate_known(st: State, fallbacks: frozenset[str]) -> None:
    """An entry's finding says why; the atlas adds where: the part, file and function that printed its line."""
    weighed = [f for f in st.findings if f.site is None and f.part is None and f.id not in fallbacks
               and f.severity in ("critical", "warning")]
    if not weighed:
        return
    lines = {e.kind: e.origin for e in reversed(st.ev.events)}
    todo = [(f, lines[f.id]) for f in weighed if f.id in lines]
    if not todo:
        return
    from bot.core.atlas import load_atlas, split_line

    atlas = load_atlas()
    for f, origin in todo:
        line = split_line(origin.text)
        m = atlas.match(line.message, version=st.ev.context.vllm_version, exc=line.exc, level=origin.level,
                        source_file=origin.source_file, source_line=origin.source_line)
        if m is None or not m.exact:
            f.part = _module_part(origin.text)
            continue
        f.part = m.site.part
        f.site = SiteRef(package=m.site.package, file=m.site.file, function=m.site.function, line=m.line,
                         release=m.release, url=m.url, first=m.site.first, last=m.site.last,
                         condition=m.site.condition, compare_url=m.compare_url)
        f.knobs += [k.flag for k in m.knobs if k.flag not in f.knobs]


_HUB_HTTP_RE = re.compile(r"\b(?P<code>401|403|404)\b[^\n]{0,80}?(?:for url|url):?\s*(?P<url>https://huggingface\.co/\S+)")


def _hub_refusals(st: State) -> None:
    """The Hugging Face Hub answered 401, 403 or 404 for a model file: a gated model whose licence is not
    accepted, a token missing or without access, or a name that does not exist."""
    if any(f.part == "hub" for f in st.findings):
        return
    for p in [*st.ev.parsed.problems, *st.ev.parsed.loose]:
        hm = _HUB_HTTP_RE.search(p.message) or _HUB_HTTP_RE.search(p.origin.text or "")
        if hm is None:
            continue
        code, url = hm["code"], hm["url"]
        repo = "/".join(url.removeprefix("https://huggingface.co/").split("/")[:2])
        why = {"401": "no token, or a token the Hub does not accept",
               "403": "the token has no access to this repository (a gated model whose licence was not accepted "
                      "for this account)",
               "404": "the repository or revision does not exist, or is private and the token cannot see it"}[code]
        st.findings.append(Finding(
            id="hub-access-refused", title=f"The Hugging Face Hub refused the model download ({code}): {repo}",
            severity="critical", confidence="high",
            summary=f"HTTP {code} from the Hub for {url}: {why}.",
            evidence=[f"{p.origin.where()}: {_clip(p.origin.text or p.message, 300)}"],
            remediation=[f"Open https://huggingface.co/{repo} logged in as the account whose token the server uses, "
                         "accept the licence if it is gated, then give the server that token (`HF_TOKEN`) — or "
                         "download the model where you have access and serve it from a local path.",
                         "Check the name and revision for a 404."],
            priority=30, part="hub", knobs=["HF_TOKEN"]))
        return


def _place(st: State, fallbacks: frozenset[str]) -> None:
    ev = st.ev
    problems = [*ev.parsed.problems, *ev.parsed.loose]
    if not problems:
        return
    from bot.core.triage.evidence import latest_launch

    candidates = _candidates(problems, latest_launch(ev.parsed), fallbacks)
    if ev.window is not None:
        # a server that reports its metrics: its warnings and stray lines are the noise of a working server, and
        # not worth the atlas's load on every diagnosis; its errors and exceptions still are placed
        candidates = [c for c in candidates if c.line.kind in ("exception", "frame")
                      or (c.line.origin.level or "").upper() in ("ERROR", "CRITICAL")]
    if not candidates:
        return
    from bot.core.atlas import load_atlas  # the atlas loads only when a line needs it

    atlas = load_atlas()
    version = ev.context.vllm_version
    gpu = _gpu_of(st)
    made = 0
    placed: list[str] = []
    for cand in candidates:
        if made >= MAX_ATLAS_FINDINGS:
            break
        if any(text in cand.line.message for text in placed):
            continue  # a wrapper ("Worker failed with error '…'") restating an exception already placed
        finding = _finding(st, atlas, cand, version, gpu)
        if finding is None:
            continue
        if len(cand.line.message.strip()) >= 24:
            placed.append(cand.line.message.strip())
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


_REPR_EXC_RE = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception))\((['\"])(.+)\2,?\)$", re.DOTALL)


def _unwrapped(p: ProblemLine) -> ProblemLine:
    """The message inside two common envelopes: an exception logged by its repr (V0's engine logs
    `AssertionError('…')`), and the OpenAI server's JSON error body (`{"object":"error","message":"…"}`)."""
    text = p.message.strip()
    if text.startswith("{") and '"message"' in text:
        try:
            body = json.loads(text)
        except ValueError:
            return p
        if isinstance(body, dict) and isinstance(body.get("message"), str) and body["message"].strip():
            kind = body.get("type")
            return replace(p, kind="exception", message=body["message"].strip(),
                           exception=kind if isinstance(kind, str) and kind else p.exception)
        return p
    hit = _REPR_EXC_RE.match(text)
    if hit is not None:
        return replace(p, kind="exception", message=hit[3].replace("\\'", "'"), exception=hit[1])
    if text.startswith("('") and text.endswith("')"):
        # `raise RuntimeError("a ", "b ")` prints the tuple of its arguments: the message is their concatenation
        pieces = re.findall(r"'((?:[^'\\]|\\.)*)'", text)
        if len(pieces) >= 2:
            return replace(p, message="".join(pieces).strip())
    return p


_ARGPARSE_RE = re.compile(r"error: (?:unrecognized arguments?: (?P<unknown>.+)|argument (?P<arg>--[\w-]+)[^:]*: "
                          r"(?P<why>invalid choice: .+|expected .+))$")
_COMMON_WORDS = frozenset({"enable", "disable", "max", "min", "use", "num", "size", "no", "set", "per", "type"})


def _argparse_refusal(st: State, atlas: Atlas, p: ProblemLine, version: str | None) -> Finding | None:
    """`vllm: error: unrecognized arguments: --lora-path …` and `argument --x: invalid choice: …`: argparse
    refused the command line before vLLM started. The atlas knows every flag each release's parsers add."""
    hit = _ARGPARSE_RE.search(p.message.strip())
    if hit is None:
        return None
    known = atlas.cli_flags(version)
    where = f"vLLM {version}" if version else f"vLLM {atlas.releases[-1] if atlas.releases else ''}".strip()
    remediation: list[str] = []
    knobs: list[str] = []
    advice: list[Advice] = []
    if hit["arg"]:
        flag = hit["arg"]
        help_text = known.get(flag, "")
        remediation.append(f"`{flag}` does not take that value ({_clip(hit['why'], 200)})"
                           + (f"; its help: {_clip(help_text, 220)}" if help_text else "") + ".")
        knobs.append(flag)
        title = f"The command line was refused: {flag} {_clip(hit['why'], 70)}"
    else:
        unknown = [f for f in re.findall(r"(?<![\w-])(--[a-zA-Z][\w-]*)", hit["unknown"]) if f not in known][:3]
        if not unknown:
            return None
        for flag in unknown:
            span = atlas.flag_span(flag)
            if span is not None:
                first, last = span
                if version and _newer(first, version):
                    remediation.append(f"`{flag}` first appears in vLLM {first}: upgrade, or leave it out.")
                    advice.append("upgrade")
                else:
                    remediation.append(f"`{flag}` was a flag of vLLM {first}–{last}; {where} no longer has it.")
            close = _similar_flags(flag, known)
            if close:
                remediation.append(f"{where} has no `{flag}`; its flags with the same words: " + "; ".join(
                    f"`{f}`" + (f" ({_clip(known[f], 110)})" if known[f] else "") for f in close) + ".")
                knobs += [f for f in close if f not in knobs]
            elif span is None:
                remediation.append(f"{where} has no `{flag}` (`vllm serve --help` lists the flags).")
        title = f"The command line was refused: {where} has no {', '.join(unknown)}"
    return Finding(
        id="cli-refused", title=title, severity="critical", confidence="high",
        summary="argparse stopped the command before vLLM started: the flags are checked against the parsers of "
                "the release that runs, which the atlas read.",
        evidence=[f"{p.origin.where()}: {_clip(p.origin.text or p.message, 300)}"], remediation=remediation,
        priority=20, part="config", knobs=knobs, advice=advice)


def _similar_flags(flag: str, known: dict[str, str]) -> list[str]:
    import difflib

    parts = [w for w in flag.lstrip("-").split("-") if w and w not in _COMMON_WORDS]
    words = set(parts)
    sharing = [f for f in known if words & set(f.lstrip("-").split("-"))]

    def rank(f: str) -> tuple[bool, int, float]:
        theirs = [w for w in f.lstrip("-").split("-") if w not in _COMMON_WORDS]
        # the flag's first own word ("lora" of --lora-path) names its subject: flags about it come first
        return (bool(parts) and bool(theirs) and theirs[0] == parts[0], len(words & set(theirs)),
                difflib.SequenceMatcher(None, flag, f).ratio())

    sharing.sort(key=rank, reverse=True)
    return sharing[:5]


def _finding(st: State, atlas: Atlas, cand: _Candidate, version: str | None, gpu: gpus.Gpu | None) -> Finding | None:
    p = _unwrapped(cand.line)
    if p is not cand.line:
        cand = replace(cand, line=p)
    refused = _argparse_refusal(st, atlas, p, version)
    if refused is not None:
        return refused
    origin = p.origin
    exc = p.exception.rsplit(".", 1)[-1] if p.exception else None
    m = atlas.match(p.message, version=version, exc=exc, level=origin.level,
                    source_file=origin.source_file, source_line=origin.source_line)
    if m is not None and m.exact:
        # a wrapper ("Error in model execution: {err}") whose hole holds the message that matters
        inner_text = max(m.holes.values(), key=len, default="").strip(" '\"")
        if len(inner_text) >= 24 and inner_text.count(" ") >= 3:
            wrapped = atlas.match(inner_text, version=version)
            # a short hole in long boilerplate is a wrapper only when the hole is itself a message of vLLM's
            if wrapped is not None and (wrapped.exact or 2 * len(inner_text) > len(p.message)):
                m = wrapped
            elif 2 * len(inner_text) > len(p.message) and (
                    need := _gpu_requirement(st, replace(p, message=inner_text), gpu)) is not None:
                return need
    if m is not None and m.exact and p.kind in ("exception", "level", "loose") and (
            need := _gpu_requirement(st, p, gpu)) is not None and (gpus.required_capability(p.message)
                                                                   or _min_capability(p.message)):
        # a capability refusal is about the GPU whichever file raises it: say so, with the site beside it
        need.site = SiteRef(package=m.site.package, file=m.site.file, function=m.site.function, line=m.line,
                            release=m.release, url=m.url, first=m.site.first, last=m.site.last,
                            condition=m.site.condition, compare_url=m.compare_url)
        need.sources = [m.url, gpus.SOURCE]
        need.knobs += [k.flag for k in m.knobs if k.flag not in need.knobs]
        need.remediation.append(f"Read the check at your release: {m.url}")
        need.confidence = "high" if m.site.condition else "medium"  # vLLM's own check, matched exactly
        return need
    if m is None and p.config_field:
        return _field_finding(st, atlas, p, version)
    if m is None and p.kind == "exception":
        env = (_env_finding(atlas, cand, version) or _missing_attribute(st, atlas, cand, version)
               or _unknown_weight(st, atlas, cand, version) or _backend_refused(st, p))
        if env is not None:
            return env
    # a line without level or class: only what vLLM raises or logs as a problem counts
    if p.kind == "loose" and (m is None or not (m.site.kind == "raise" or (m.site.level or "") in _PROBLEM_LEVELS)):
        return None
    inner = _innermost(atlas, cand.frames, version) if cand.frames else None
    if m is None and inner is None:
        return _gpu_requirement(st, p, gpu)
    if m is None and p.kind not in ("exception", "frame"):
        return _gpu_requirement(st, p, gpu)
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
        part = frame_site.part if frame_site else atlas.part_of(frame.frame_file or "", frame.frame_function)
        part = _module_part(origin.text) or part
        fid = f"atlas-frame:{_short_path(frame.frame_file or '')}:{frame.frame_function}"
    what = p.exception or (origin.level or "line").upper()
    title = f"{what} from {PART_TITLES.get(part, part)}: {_clip(p.message, 90)}"
    if p.kind == "frame":
        title = (f"A traceback ending in {PART_TITLES.get(part, part)} ({_short_path(p.frame_file or '')} in "
                 f"{p.frame_function}); its exception line is not in the log")
    summary = _summary(m, inner, part, version)
    evidence = [f"{origin.where()}: {_clip(origin.text or p.message, 300)}"]
    if inner is not None:
        frame = inner[0]
        evidence.append(f"innermost frame in vLLM: {_short_path(frame.frame_file or '')}:{frame.frame_line} in "
                        f"{frame.frame_function}")
    remediation, knobs, advice = _remedies(st, m, part, gpu)
    env_fix, env_knobs = _env_vars(atlas, cand, version)
    remediation = env_fix + remediation
    knobs += [k for k in env_knobs if k not in knobs]
    if severity == "critical" and part in _SPEC_PARTS and _has_spec(st) and (st.ev.context.num_speculative_tokens
                                                                             or 2) > 1:
        remediation.append("Meanwhile, a smaller `num_speculative_tokens` (1 drafts one position and skips the "
                           "multi-step drafting path) is the usual way around a crash inside the proposer, at the "
                           "cost of some speedup; then report the traceback upstream.")
        advice.append("lower-k")
    return Finding(id=fid, title=title, severity=severity, confidence=confidence, summary=summary,
                   evidence=evidence, remediation=remediation, sources=[m.url] if m is not None else [],
                   is_bug=False, priority=40, part=part, knobs=knobs, advice=advice, site=site_ref)


_ENV_RE = re.compile(r"\bVLLM_[A-Z0-9_]{2,}\b")


def _env_vars(atlas: Atlas, cand: _Candidate, version: str | None) -> tuple[list[str], list[str]]:
    """vLLM's own environment variables the failing lines name (in the message, or in a frame's code): an
    outside value under one of those names (a container platform's service links set `<NAME>_PORT`) breaks
    vLLM where it reads it."""
    known = atlas.env_vars(version)
    texts = [cand.line.message, *(f.source or "" for f in cand.frames), *(b.message for b in cand.before)]
    names = [n for n in dict.fromkeys(n for t in texts for n in _ENV_RE.findall(t)) if n in known]
    if not names:
        return [], []
    in_envs = _reads_env(cand)
    out = []
    for n in names[:3]:
        help_text = f": {_clip(known[n], 220)}" if known[n] else ""
        lead = (f"vLLM failed reading the environment variable `{n}`; check the value the process gets "
                f"(`env | grep {n}`; a Kubernetes service named `vllm` sets `VLLM_PORT=tcp://…`), unset it or "
                "set it to what vLLM expects") if in_envs else f"The line names vLLM's environment variable `{n}`"
        out.append(f"{lead}{help_text}")
    return out, names[:3]


def _reads_env(cand: _Candidate) -> bool:
    code = [f.source or "" for f in cand.frames] + [b.message for b in cand.before]
    return any((f.frame_file or "").endswith("vllm/envs.py") for f in cand.frames) or any(
        "getenv" in c or "environ" in c for c in code)


def _env_finding(atlas: Atlas, cand: _Candidate, version: str | None) -> Finding | None:
    """An exception raised where vLLM reads its environment, with one of its variables named there."""
    if not _reads_env(cand):
        return None
    fix, names = _env_vars(atlas, cand, version)
    if not names:
        return None
    p = cand.line
    return Finding(
        id="env-var-collision", title=f"vLLM cannot read its environment variable {names[0]}: "
                                      f"{_clip(p.message, 80)}",
        severity="critical", confidence="medium",
        summary=(f"The exception is raised where vLLM reads `{names[0]}` from the environment: the value the process "
                 "got is not one vLLM understands — often not set for vLLM at all, but by the platform (a "
                 "Kubernetes service named `vllm` gives every pod `VLLM_PORT=tcp://…`, `VLLM_SERVICE_HOST`, …)."),
        evidence=[f"{b.origin.where()}: {_clip(b.origin.text or b.message, 200)}" for b in cand.before[-2:]]
        + [f"{p.origin.where()}: {_clip(p.origin.text or p.message, 300)}"],
        remediation=fix, priority=38, part="config", knobs=names)


_NO_ATTR_RE = re.compile(r"^'(?P<cls>[A-Z]\w+)' object has no attribute '(?P<attr>\w+)'")
# Hugging Face's naming, which vLLM's model classes keep: <Arch>For<Task>, <Arch>Model
_MODEL_CLASS_RE = re.compile(r"For(?:CausalLM|ConditionalGeneration|SequenceClassification|MaskedLM)$|Model$")
_SPEC_CLASS_RE = re.compile(r"eagle|medusa|mtp|dflash|draft|speculat|proposer|mlpspec", re.IGNORECASE)


def _missing_attribute(st: State, atlas: Atlas, cand: _Candidate, version: str | None) -> Finding | None:
    """`'XForCausalLM' object has no attribute 'y'`: vLLM's own code reads an attribute its own model class does
    not have — a defect of that release (or of the class a checkpoint's architecture maps to), not of the input.
    Python's words, so the atlas does not hold it; the class name says which part."""
    p = cand.line
    hit = _NO_ATTR_RE.match(p.message.strip())
    if hit is None or (p.exception or "").rsplit(".", 1)[-1] != "AttributeError":
        return None
    cls, attr = hit["cls"], hit["attr"]
    spec = _SPEC_CLASS_RE.search(cls) is not None
    if not spec and _MODEL_CLASS_RE.search(cls) is None:
        return None
    part = "drafter" if spec else "models"
    steps, advice = _upgrade_steps(version, "model and drafter classes", atlas.releases)
    remediation = [f"vLLM's code reads `{attr}` from its own class `{cls}`, which does not set it in this release: "
                   "a bug of the release, not of your command.", *steps]
    if spec and _has_spec(st):
        remediation.append(f"Meanwhile, serve without `--speculative-config` (or with another method): `{cls}` is "
                           "the drafter's class.")
    inner = _innermost(atlas, cand.frames, version) if cand.frames else None
    evidence = [f"{p.origin.where()}: {_clip(p.origin.text or p.message, 300)}"]
    if inner is not None:
        frame = inner[0]
        evidence.append(f"innermost frame in vLLM: {_short_path(frame.frame_file or '')}:{frame.frame_line} in "
                        f"{frame.frame_function}")
    return Finding(
        id=f"missing-attribute:{cls}.{attr}", title=f"vLLM's {'drafter' if spec else 'model'} class `{cls}` has no "
                                                     f"attribute `{attr}`",
        severity="critical", confidence="medium",
        summary=(f"AttributeError inside vLLM: `{cls}` is one of vLLM's {'drafter' if spec else 'model'} classes "
                 f"(Hugging Face naming), and the code that runs it expects `{attr}` on it."),
        evidence=evidence, remediation=remediation, priority=40, part=part, advice=advice, is_bug=True)


_WEIGHT_KEY_RE = re.compile(r"^'(?P<key>(?:[\w]+\.)+\w+)'$")
_QUANT_TENSOR_RE = re.compile(r"(?:weight_scale|input_scale|g_idx|qweight|qzeros|scales|zero_point|weight_packed|"
                              r"weight_shape|_scale_inv)$")


def _upgrade_steps(version: str | None, what: str, rels: tuple[str, ...]) -> tuple[list[str], list[Advice]]:
    newer = [r for r in rels if version is None or _newer(r, version)]
    if not newer:
        return [], []
    latest = newer[-1]
    link = (f" (what changed: https://github.com/vllm-project/vllm/compare/v{version}...v{latest})"
            if version and _public_release(version) else "")
    return ([f"Upgrade: {what} change from release to release; try {latest} (newest the atlas read){link}. If it "
             "still fails there, report it upstream with this traceback."], ["upgrade"])


def _unknown_weight(st: State, atlas: Atlas, cand: _Candidate, version: str | None) -> Finding | None:
    """`KeyError: 'layers.0.mlp.down_proj.weight_scale'` out of a model's `load_weights`: the checkpoint holds a
    tensor this release's loader for that architecture has no parameter for — most often a quantized layout
    (scales, g_idx) the loader learned in a later release."""
    p = cand.line
    hit = _WEIGHT_KEY_RE.match(p.message.strip())
    if hit is None or (p.exception or "").rsplit(".", 1)[-1] != "KeyError":
        return None
    frames = [f for f in cand.frames if f.frame_function == "load_weights" and "model_executor/models/" in
              (f.frame_file or "")]
    if not frames and not any("load_weights" in (b.message or "") for b in cand.before):
        return None
    key = hit["key"]
    quant = _QUANT_TENSOR_RE.search(key) is not None
    model_file = _short_path(frames[-1].frame_file or "") if frames else "a model's loader"
    steps, advice = _upgrade_steps(version, "model loaders", atlas.releases)
    remediation = [f"The checkpoint has `{key}`, which {model_file} (`load_weights`) has no parameter for"
                   + (": a quantized tensor — the checkpoint's quantization layout is newer than this loader, or "
                      "not one vLLM supports for this architecture." if quant else "."), *steps,
                   "Or use a checkpoint in a format this release loads (the model card's vLLM version, another "
                   "quantization)."]
    return Finding(
        id=f"unknown-weight:{key.rsplit('.', 1)[-1]}", title=f"The checkpoint holds a tensor vLLM's loader does not "
                                                             f"know: {key}",
        severity="critical", confidence="medium",
        summary=f"KeyError in {model_file} load_weights: no parameter named `{key}`.",
        evidence=[f"{p.origin.where()}: {_clip(p.origin.text or p.message, 300)}"], remediation=remediation,
        priority=40, part="quantization" if quant else "model-loading", advice=advice, is_bug=True)


# vLLM's own words when it passes over an attention backend (platforms/cuda.py, attention/selector.py)
_CANNOT_USE_RE = re.compile(r"Cannot use (?P<backend>[A-Za-z][\w-]*(?: ?\d)?) backend "
                            r"(?P<why>(?:for|because|on) [^.]+)")


def _backend_refused(st: State, p: ProblemLine) -> Finding | None:
    """An exception that asks for a backend vLLM said earlier it could not use ("Only FlashAttention backend is
    supported" after "Cannot use FlashAttention-2 backend for Volta and Turing GPUs"): the earlier line is why."""
    for q in [*st.ev.parsed.loose, *st.ev.parsed.problems]:
        hit = _CANNOT_USE_RE.search(q.message)
        if hit is None or position(q.origin) > position(p.origin):
            continue
        name = re.split(r"[-\d ]", hit["backend"])[0]
        if len(name) < 5 or name.lower() not in p.message.lower():
            continue
        why = hit["why"]
        generation = _GENERATION_WORD_RE.search(why)
        return Finding(
            id="gpu-too-old" if generation else "backend-unavailable",
            title=f"{p.exception or 'The error'} needs the {hit['backend']} backend, which vLLM could not use: {why}",
            severity="critical", confidence="medium",
            summary=(f"The failing code requires {hit['backend']} ({_clip(p.message, 120)}), and vLLM said before "
                     f"that it could not use that backend {why}, so it chose another."),
            evidence=[f"{q.origin.where()}: {_clip(q.origin.text or q.message, 200)}",
                      f"{p.origin.where()}: {_clip(p.origin.text or p.message, 200)}"],
            remediation=[f"Run it where {hit['backend']} works ({why.removeprefix('for ').removeprefix('because ')} "
                         "is what rules it out), or use the feature's option for the backend this host has."],
            priority=42, part="attention")
    return None


_GENERATION_WORD_RE = re.compile(r"\b(Kepler|Maxwell|Pascal|Volta|Turing|Ampere|Ada|Hopper|Blackwell)\b|compute "
                                 r"capability", re.IGNORECASE)


def _newer(release: str, version: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(release) > Version(Version(version).base_version)
    except InvalidVersion:
        return True


def _public_release(version: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(version)
    except InvalidVersion:
        return False
    return not (v.is_devrelease or v.local)


_GENERATION_RE = re.compile(r"\b(Kepler|Maxwell|Pascal|Volta|Turing|Ampere|Ada|Hopper|Blackwell)\b[^.]{0,40}?"
                            r"\b(?:or newer|or later|and newer|and later|or above|required|only)\b", re.IGNORECASE)


def _gpu_requirement(st: State, p: ProblemLine, gpu: gpus.Gpu | None) -> Finding | None:
    """A message that names the GPU generation or compute capability it needs (from vLLM or a kernel library
    the atlas does not read): the report puts the host's GPU beside it."""
    if p.kind not in ("exception", "level", "loose"):
        return None
    text = p.message
    gen = _GENERATION_RE.search(text)
    cap = gpus.required_capability(text) or _min_capability(text)
    arch = _ARCH_RE.search(text)
    if gen is None and cap is None and arch is None:
        return None
    if cap:
        need = f"compute capability ≥ {cap[0]}.{cap[1]}"
    elif gen:
        need = f"an {gen[1].capitalize()} GPU or newer"
    else:
        need = "of an architecture this setting supports (the message does not say which)"
    low = text.lower()
    part = ("attention" if re.search(r"attention|flash|xformers|backend", low) else
            "quantization" if re.search(r"quantiz|awq|gptq|fp8|marlin|int4|int8|w4a16|nvfp4", low) else "platform")
    current = _CURRENT_CAP_RE.search(text)
    if current:  # the message's own reading of the device it ran on beats a name from the context
        cc = (int(current[1]), int(current[2]))
        era = gpus.generation_of(cc)
        have = f"the GPU vLLM ran on reports compute capability {cc[0]}.{cc[1]}" + (f" ({era})" if era else "")
        if gpu and gpu.capability != cc:
            have += f", not {gpu.name}'s {gpu.capability_text}: check which GPU `CUDA_VISIBLE_DEVICES` selects"
    elif gpu:
        have = f"{gpu.name} is {gpu.generation}, compute capability {gpu.capability_text}"
    else:
        have = "the log does not name the GPU: `nvidia-smi --query-gpu=name,compute_cap --format=csv` tells"
    remediation = [f"The GPU must be {need}; {have} (NVIDIA's table: {gpus.SOURCE}).",
                   "On an older GPU: a dtype, quantization or attention backend this generation supports "
                   "(`--dtype half` for bf16 models, another `--quantization`, another attention backend), or a "
                   "newer GPU."]
    fp8 = re.search(r"\bfp8", low) is not None
    if fp8 and re.search(r"fp8e5\b|e5m2", low):
        # the message lists what this GPU has: E5M2 is a KV-cache format of vLLM's own (`fp8_e5m2`)
        remediation.insert(1, "The message names the FP8 formats this GPU supports, E5M2 among them: if the FP8 is "
                              "the KV cache's, `--kv-cache-dtype fp8_e5m2` selects that format (`auto` keeps the "
                              "model's dtype); an FP8 checkpoint needs another `--quantization` or a newer GPU.")
    knobs = [k for k, rx in (("--dtype", r"bfloat16|bf16|dtype"), ("--quantization", r"quantiz|awq|gptq|marlin|fp8"),
                             ("--kv-cache-dtype", r"kv.cache|\bfp8"))
             if re.search(rx, low)]
    if fp8 and "--dtype" in knobs and not re.search(r"bfloat16|bf16", low):
        knobs.remove("--dtype")  # "fp8 dtypes" names the FP8 formats, not the model's --dtype
    return Finding(id="gpu-too-old", title=f"The GPU is too old for this setting: {_clip(text, 90)}",
                   severity="critical" if p.kind in ("exception", "loose") or (p.origin.level or "") == "ERROR"
                   else "warning", confidence="medium" if gpu or current else "low",
                   summary=f"The message asks for {need}." + (f" {have}." if gpu else ""),
                   evidence=[f"{p.origin.where()}: {_clip(p.origin.text or text, 300)}"], remediation=remediation,
                   priority=45, part=part, knobs=knobs, sources=[gpus.SOURCE])


_ARCH_RE = re.compile(r"not supported (?:on|in|by|for) (?:this|the current|your) (?:gpu |cuda )?"
                      r"(?:architecture|gpu|device|hardware)", re.IGNORECASE)
_CURRENT_CAP_RE = re.compile(r"[Cc]urrent capability:?\s*(\d{1,2}?)(\d)\b")
_MIN_CAP_RE = re.compile(r"[Mm]in(?:imum)? capability:?\s*(\d{1,2}?)(\d)\b")


def _min_capability(text: str) -> tuple[int, int] | None:
    m = _MIN_CAP_RE.search(text)
    return (int(m[1]), int(m[2])) if m else None


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
    if p.kind == "frame":  # a traceback is something raised, whether or not its last line survived
        return "critical", "low"
    if p.kind == "loose" and m is not None:  # no level printed: the site's own says how bad it is
        level = "ERROR" if m.site.kind == "raise" else (m.site.level or "").split("_")[0].upper()
    if p.kind == "exception" or (m is not None and m.site.kind == "raise" and level not in ("WARNING", "INFO")):
        severity: Severity = "critical"
    elif level in ("ERROR", "CRITICAL") or (level in ("WARNING", "WARN") and m is not None and m.exact
                                             and m.site.condition is not None):
        # a warning vLLM prints under a check of its own (a prompt over the limit, an unknown variable) says
        # something is off; a bare notice does not
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
        parts.append(f"{package} {m.gone_after} is the last release that prints it; {m.fixed_in} no longer does.")
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
        if m.gone_after and m.fixed_in and m.site.package == "vllm" and m.knobs and m.site.kind == "raise":
            # a refusal about a setting: the atlas may have lost the check where it moved (a message built in a
            # list and joined), and the setting it names answers it on any release
            out.append(f"vLLM {m.fixed_in} no longer raises this message at this site (after {m.gone_after}): "
                       "upgrade, or — if the check only moved — change the setting below; the diff tells which: "
                       f"{m.compare_url or ''}".rstrip(": "))
            advice.append("upgrade")
        elif m.gone_after and m.fixed_in and m.site.package == "vllm":
            out.append(f"Upgrade: vLLM {m.fixed_in} no longer prints this message (the code changed after "
                       f"{m.gone_after}): {m.compare_url or ''}".rstrip(": "))
            advice.append("upgrade")
        elif m.gone_after and m.fixed_in:
            # a library's message reworded is not a fix, and its release follows vLLM's pin, not the user's choice
            out.append(f"{m.site.package} words this differently from {m.fixed_in} on (the last release that "
                       f"prints it is {m.gone_after}): {m.compare_url or ''}".rstrip(": "))
        for knob in m.knobs:
            if not spec and knob.flag == "--speculative-config":
                continue
            name = f"`{knob.flag}`" + (f" (its `{knob.key}` key)" if knob.key else "")
            help_text = f": {_clip(knob.help, 220)}" if knob.help else ""
            out.append(f"The setting this check reads is {name}{help_text}")
            if knob.flag not in knobs:
                knobs.append(knob.flag)
        # a flag the message itself names that no config field maps (the API server's own: --tool-call-parser)
        named = [f for f in dict.fromkeys(_FLAG_IN_TEXT.findall(m.site.template)) if f not in knobs]
        if named:
            out.append("The message names the flag(s) to set at launch: " + ", ".join(f"`{f}`" for f in named)
                       + " (`vllm serve --help` lists them).")
            knobs += named
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


_FLAG_IN_TEXT = re.compile(r"(?<![\w-])(--[a-z][a-z0-9]+(?:-[a-z0-9]+)*)")


def _has_spec(st: State) -> bool:
    from bot.core.triage.detectors import spec_decoding

    return spec_decoding(st.ev) == "on"


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
    from bot.core.atlas import repo_path

    return repo_path(path) or path


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
