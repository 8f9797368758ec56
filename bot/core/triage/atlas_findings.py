"""Findings from the message atlas: a line of vLLM's that no knowledge-base entry explains.

The knowledge base knows what it was shown; the atlas knows where every message of every release was
printed or raised (bot/core/atlas.py). For an error, a warning or an exception the failure table did
not claim, the report says which part of vLLM raised it, the file, function and release range, the
guarding condition in words, the flags that condition names (with their help), and — when a later
release no longer prints it — the upgrade. Such a finding ranks below a knowledge-base entry and
carries its own confidence: an exact match to a site with a condition is stronger than a guess from
the module a traceback ended in.

This module decides which lines are placed and in what order the readers are asked
(bot/core/triage/atlas_readers/ holds them).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from bot.core import gpus
from bot.core.parsed_log import Origin, ProblemLine
from bot.core.triage.atlas_readers.argparse_refusal import argparse_refusal
from bot.core.triage.atlas_readers.attention_backend import backend_refused
from bot.core.triage.atlas_readers.attention_kernel_check import attention_kernel_check
from bot.core.triage.atlas_readers.audio_decode import audio_decode
from bot.core.triage.atlas_readers.bench_client import bench_not_found
from bot.core.triage.atlas_readers.bind_address import bind_address
from bot.core.triage.atlas_readers.candidates import Candidate, candidates, unwrapped
from bot.core.triage.atlas_readers.capture_sizes import capture_sizes
from bot.core.triage.atlas_readers.client_key import client_key
from bot.core.triage.atlas_readers.config_field import field_finding
from bot.core.triage.atlas_readers.content_format import content_format
from bot.core.triage.atlas_readers.cut_raise import cut_raise, later_setting
from bot.core.triage.atlas_readers.disk_space import disk_space
from bot.core.triage.atlas_readers.drafter_kv_layout import drafter_kv_layout
from bot.core.triage.atlas_readers.dropped_variable import dropped_variable
from bot.core.triage.atlas_readers.env_vars import env_finding
from bot.core.triage.atlas_readers.experimental import experimental_first
from bot.core.triage.atlas_readers.field_refusal import field_refusal
from bot.core.triage.atlas_readers.foreign_class import (
    foreign_class,
    foreign_signature,
    stale_caller,
    stale_import,
)
from bot.core.triage.atlas_readers.frame_first import frame_first
from bot.core.triage.atlas_readers.gpu_fault import gpu_fault
from bot.core.triage.atlas_readers.gpu_requirement import capability_refusal, gpu_requirement
from bot.core.triage.atlas_readers.host import gpu_of
from bot.core.triage.atlas_readers.hub import (
    hub_refusals,
    hub_unreachable,
    local_path_lookups,
    modelscope_refusals,
    repo_id_refusals,
)
from bot.core.triage.atlas_readers.hybrid_kv_off import hybrid_kv_off, unify_failed
from bot.core.triage.atlas_readers.index_bound import index_bound
from bot.core.triage.atlas_readers.kernel_dtype import dtype_kernel
from bot.core.triage.atlas_readers.kernel_resources import kernel_resources
from bot.core.triage.atlas_readers.kv_concurrency import kv_concurrency
from bot.core.triage.atlas_readers.layer_types import layer_types
from bot.core.triage.atlas_readers.library_class import config_class, processor_class, tokenizer_class
from bot.core.triage.atlas_readers.location import innermost, module_part, site_ref
from bot.core.triage.atlas_readers.model_class import missing_attribute
from bot.core.triage.atlas_readers.model_type import unknown_model_type
from bot.core.triage.atlas_readers.nonfinite_output import nonfinite_output
from bot.core.triage.atlas_readers.package_words import package_words
from bot.core.triage.atlas_readers.platform_probes import platform_probes
from bot.core.triage.atlas_readers.plugin_load import plugin_load
from bot.core.triage.atlas_readers.proxy_url import proxy_url
from bot.core.triage.atlas_readers.python_run import vllm_not_importable
from bot.core.triage.atlas_readers.refused_request import answered_400
from bot.core.triage.atlas_readers.request_body import request_body_refusals
from bot.core.triage.atlas_readers.request_decode import request_decode
from bot.core.triage.atlas_readers.request_params import request_params
from bot.core.triage.atlas_readers.second_engine import second_engine
from bot.core.triage.atlas_readers.site_finding import site_finding
from bot.core.triage.atlas_readers.socket_path import socket_path
from bot.core.triage.atlas_readers.struct_keyword import struct_keyword
from bot.core.triage.atlas_readers.template_refusal import template_refusal
from bot.core.triage.atlas_readers.unregistered_architecture import unregistered_architecture
from bot.core.triage.atlas_readers.v0_fallback import v0_fallback
from bot.core.triage.atlas_readers.variable_words import variable_words
from bot.core.triage.atlas_readers.weight_loader import unknown_weight
from bot.core.triage.evidence import position
from bot.core.triage.findings import Considered, Finding
from bot.core.triage.remedy import vllm_defect

if TYPE_CHECKING:
    from bot.core.atlas import Atlas, AtlasMatch
    from bot.core.triage.detectors.state import State

__all__ = ["MAX_ATLAS_FINDINGS", "Explained", "explain_line", "place_unexplained"]

MAX_ATLAS_FINDINGS = 4
_PROBLEM_LEVELS = frozenset({"error", "critical", "exception", "warning", "warn", "error_once", "warning_once"})


def place_unexplained(st: State, answered: set[int] | None = None) -> None:
    """`answered`: positions of lines already answered below vLLM (not placed again)."""
    # a catch-all entry ("an error no known signature explains") does not explain a line the atlas places
    fallbacks = frozenset(e.id for e in st.base.entries if e.catch_all)
    _place(st, fallbacks, answered or set())
    hub_refusals(st)
    repo_id_refusals(st)
    modelscope_refusals(st)
    local_path_lookups(st)
    hub_unreachable(st)
    vllm_not_importable(st)
    request_body_refusals(st)
    client_key(st)
    package_words(st)
    _locate_known(st, fallbacks)
    _warmup_requests(st)
    platform_probes(st)
    bind_address(st)
    gpu_fault(st)
    request_decode(st)
    proxy_url(st)
    variable_words(st)
    capture_sizes(st)
    nonfinite_output(st)
    disk_space(st)
    field_refusal(st)
    v0_fallback(st)
    plugin_load(st)
    bench_not_found(st)
    audio_decode(st)
    hybrid_kv_off(st)
    socket_path(st)
    kernel_resources(st)
    unregistered_architecture(st)
    kv_concurrency(st)
    dropped_variable(st)
    template_refusal(st)
    content_format(st)
    attention_kernel_check(st)
    second_engine(st)
    struct_keyword(st)
    drafter_kv_layout(st)
    unify_failed(st)
    request_params(st)
    layer_types(st)
    index_bound(st)
    experimental_first(st)
    _supersede_fallbacks(st, fallbacks)


def _place(st: State, fallbacks: frozenset[str], answered: set[int]) -> None:
    todo = [c for c in _placeable(st, fallbacks) if position(c.line.origin) not in answered]
    if not todo:
        return
    from bot.core.atlas import load_atlas  # the atlas loads only when a line needs it

    atlas = load_atlas()
    version = st.ev.context.vllm_version
    gpu = gpu_of(st)
    made = 0
    placed: list[str] = []
    for cand in todo:
        if made >= MAX_ATLAS_FINDINGS:
            break
        if any(text in cand.line.message for text in placed):
            continue  # a wrapper ("Worker failed with error '…'") restating an exception already placed
        finding = _finding(st, atlas, cand, version, gpu)
        if finding is None:
            continue
        if finding.at is None:
            finding.at = position(cand.line.origin)
            finding.level = "EXCEPTION" if cand.line.kind in ("exception", "frame") else cand.line.origin.level
        _caught(st, cand, finding)
        _caught_by_a_parser(st, cand, finding)
        _ignored_by_python(st, cand, finding)
        if len(cand.line.message.strip()) >= 24:
            placed.append(cand.line.message.strip())
        if any(f.id == finding.id for f in st.findings):
            continue
        st.findings.append(finding)
        st.considered.append(Considered(id=finding.id, title=finding.title, status="fits",
                                        why=_why(finding)))
        made += 1


WARMUP_NOTE = ("Failed during a warmup: vLLM sends its own request at startup, catches what fails, logs it and goes "
               "on serving — a note; a client sending the same kind of request is refused the same way.")
_NEAR = 40  # problem lines: a logger's message and the traceback it printed sit together


def _warmup_requests(st: State) -> None:
    """A failure a warmup logged (vLLM warms a path at startup — the chat template, the renderer — with a request
    of its own, catches what fails, logs it and goes on serving) is a note, and so are the refusal and the
    traceback printed with it: clients sending the same kind of request meet the same refusal, the server is not
    failing."""
    warm = [f for f in st.findings if f.site is not None and f.at is not None and f.site.package == "vllm"
            and f.site.function.rsplit(".", 1)[-1].endswith("warmup") and f.level != "EXCEPTION"]  # logged, not raised
    if not warm:
        return
    # positions are lines or byte offsets, as the log was read: nearness is counted in the log's problem lines
    order = sorted({position(p.origin) for p in (*st.ev.parsed.problems, *st.ev.parsed.loose)})
    near = [bisect.bisect_left(order, w.at) for w in warm if w.at is not None]
    for f in st.findings:
        if f.severity == "info" or f.at is None or \
                not any(abs(bisect.bisect_left(order, f.at) - w) <= _NEAR for w in near):
            continue
        framed_in_warmup = f.id.startswith("atlas-frame:") and f.id.endswith("warmup")
        if any(f is w for w in warm) or "request" in f.inputs or framed_in_warmup:
            f.severity, f.confidence = "info", "low"
            f.covers = [f.at]  # accounted for: not an unexplained error either
            f.priority = max(f.priority, 80)
            f.summary = f"{f.summary} {WARMUP_NOTE}".strip()


# an import a logger reports it could not make: the code caught the ImportError and went on without the module
_LOGGED_IMPORT = re.compile(r"(?i)failed to import|could not import|unable to import|No module named|"
                            r"cannot import name|ImportError|ModuleNotFoundError")


_SHUTDOWN = re.compile(r"Python is likely shutting down|interpreter shutdown|sys\.meta_path is None")


def _ignored_by_python(st: State, cand: Candidate, finding: Finding) -> None:
    """A traceback under Python's `Exception ignored in: <…>` was never raised to the program: a note. At interpreter
    shutdown (its own words say so) the program's work was already done."""
    tb = cand.line.traceback_id
    if tb is None or tb not in st.ev.parsed.ignored or finding.severity == "info":
        return
    shutdown = _SHUTDOWN.search(cand.line.message) is not None
    finding.severity, finding.confidence = "info", "low"
    # the same exception ignored again (one destructor after another at exit): the note covers each of them
    said = cand.line.message.strip()
    finding.covers = [position(q.origin) for q in st.ev.parsed.problems
                      if q is cand.line or (q.kind == "exception" and q.message.strip() == said
                                            and q.traceback_id in st.ev.parsed.ignored)]
    finding.priority = max(finding.priority, 80)
    finding.summary = (f"{finding.summary} {IGNORED_NOTE} (`Exception ignored in`: raised where it could not reach "
                       "the program — a destructor, a callback — so the program went on)"
                       + (", while the interpreter shut down: the work was done by then" if shutdown else "")
                       + ". A note.").strip()
    finding.sources = list(dict.fromkeys([*finding.sources, _UNRAISABLE_DOC]))


_UNRAISABLE_DOC = "https://docs.python.org/3/library/sys.html#sys.unraisablehook"
IGNORED_NOTE = "Python printed it as an exception it ignored"


_PARSER_NOTE = ("Caught and logged by the output parser itself (the logger's record above the traceback is from the "
                "parser's own file): the parser gave up on that output and the server sent it as plain text — "
                "degraded answers, the server went on serving.")
# the OpenAI server's output parsers: on an exception they log it and hand the output back unparsed
_PARSERS = re.compile(r"(?:^|/)vllm/(?:tool_parsers|entrypoints/openai/tool_parsers|reasoning)/")


def _caught_by_a_parser(st: State, cand: Candidate, finding: Finding) -> None:
    """A traceback under an ERROR record logged from a tool or reasoning parser's file that the traceback runs
    through: the parser caught what it raised (Python's `logger.exception`) and returned the output unparsed —
    degraded, not a failed server, unless a later exception of the launch ended it."""
    tb = cand.line.traceback_id
    if tb is None or not cand.frames or finding.severity != "critical":
        return
    earlier = [q for q in st.ev.parsed.problems if position(q.origin) < tb and q.kind not in ("exception", "frame")]
    record = max(earlier, key=lambda q: position(q.origin), default=None)
    if record is None or (record.origin.level or "").upper() != "ERROR" or not record.origin.source_file:
        return
    logged_in = record.origin.source_file.rsplit("/", 1)[-1]
    if not any((f.frame_file or "").rsplit("/", 1)[-1] == logged_in and _PARSERS.search(f.frame_file or "")
               for f in cand.frames):
        return
    at = position(cand.line.origin)
    if any(position(q.origin) > at and q.kind == "exception" for q in st.ev.parsed.problems):
        return
    finding.severity = "warning"
    finding.summary = f"{finding.summary} {_PARSER_NOTE}".strip()


# vLLM passing over an implementation it cannot use on this host (`Cannot use FA version 2 is not supported due to …`,
# logged even at ERROR by the backend selection) and choosing another: a note unless something later needs it
_PASSED_OVER = re.compile(r"\s*(?:Cannot|Can't|Unable to) use \S")


def _caught(st: State, cand: Candidate, finding: Finding) -> None:
    """A record a logger printed (not a raised exception's traceback) is what the code caught and went on after: at
    WARNING level never critical; an import it could not make (an optional module probed), or an implementation vLLM
    passed over for another, is a note unless a traceback follows it in the same launch — where it was needed, the
    failure raises its own error."""
    level = (cand.line.origin.level or "").upper()
    if cand.frames or level not in ("WARNING", "WARN", "ERROR") or finding.severity == "info":
        return
    if level != "ERROR" and finding.severity == "critical":
        finding.severity = "warning"
        finding.level = level
    chose_other = finding.part in ("attention", "platform") and _PASSED_OVER.match(cand.line.message) is not None
    if not chose_other and not _LOGGED_IMPORT.search(cand.line.origin.text or cand.line.message):
        return
    if finding.standing:
        return  # not a module probed and absent: one installed that refuses the environment, off for the whole run
    at = position(cand.line.origin)
    if any(position(p.origin) > at and p.kind in ("exception", "frame") for p in st.ev.parsed.problems):
        return
    finding.severity, finding.confidence = "info", "low"
    finding.covers = [at]  # the line is accounted for: a note, not an unexplained error
    finding.priority = max(finding.priority, 80)
    finding.summary = (finding.summary + (" Logged, not raised: vLLM passed over it and chose another implementation"
                                           if chose_other else " Logged, not raised: the code caught the failed "
                                           "import and went on without the module") + " — a note unless a later "
                       "error needs what it names (nothing after it in this log does).").strip()


def _placeable(st: State, fallbacks: frozenset[str]) -> list[Candidate]:
    ev = st.ev
    problems = [*ev.parsed.problems, *ev.parsed.loose]
    if not problems:
        return []
    from bot.core.triage.evidence import latest_launch

    # a DEBUG line is vLLM thinking aloud (a platform probe quoting why a platform is absent): never a claim
    found = [c for c in candidates(problems, latest_launch(ev.parsed), fallbacks)
             if (c.line.origin.level or "").upper() != "DEBUG"]
    if ev.window is None:
        return found
    # a server that reports its metrics: its warnings and stray lines are the noise of a working server, and
    # not worth the atlas's load on every diagnosis; its errors and exceptions still are placed
    return [c for c in found if c.line.kind in ("exception", "frame")
            or (c.line.origin.level or "").upper() in ("ERROR", "CRITICAL")]


def _finding(st: State, atlas: Atlas, cand: Candidate, version: str | None, gpu: gpus.Gpu | None) -> Finding | None:
    p = unwrapped(cand.line)
    if p is not cand.line:
        cand = replace(cand, line=p)
    refused = argparse_refusal(atlas, p, version) or unknown_model_type(atlas, cand, version)
    if refused is not None:
        return refused
    m, need = _through_wrapper(atlas, p, _match_line(atlas, p, version, cand.frames), version, gpu)
    cut = m is None and p.kind == "frame"
    if cut:  # the exception line is cut: the `raise` under the last frame opens it
        m = cut_raise(atlas, cand, version)
    if need is not None:
        return need
    framed = _framed(st, atlas, cand, m, version)
    if framed is not None:
        if not any(_UNCHANGED in r for r in framed.remediation):
            vllm_defect(framed, atlas.releases[-1] if atlas.releases else None)
        return framed
    read = _read_apart(st, atlas, cand, m, version, gpu)
    if read is not None:
        return read
    answered = answered_400(p) if m is None else None  # a 400 whose message no site of vLLM's words
    if answered is not None:
        return answered
    if p.kind == "loose" and not _a_problem(m, p):
        return _loose(p, m, gpu, version)
    inner = innermost(atlas, cand.frames, version) if cand.frames else None
    if m is None and (inner is None or p.kind not in ("exception", "frame")):
        return gpu_requirement(p, gpu, version)
    found = site_finding(st, atlas, cand, m, inner, version, gpu)
    later = later_setting(atlas, cand, m) if cut and m is not None else None
    if later is not None:
        # the check's own setting answers it: turning the whole part off goes last, and is not the plan's first step
        if found.switch is not None and found.switch in found.remediation:
            found.remediation = [r for r in found.remediation if r != found.switch] + [found.switch]
        found.switch = None
        found.remediation.insert(0, later[0])
        found.knobs = list(dict.fromkeys([*found.knobs, *later[1]]))
        found.advice = list(dict.fromkeys([*found.advice, "upgrade"]))
    if not any(_UNCHANGED in r for r in found.remediation):
        vllm_defect(found, atlas.releases[-1] if atlas.releases else None)
    return found


# frame_first's word for a raising line no release changed: an upgrade is no answer there
_UNCHANGED = "an upgrade alone will not change it"


def _framed(st: State, atlas: Atlas, cand: Candidate, m: AtlasMatch | None, version: str | None) -> Finding | None:
    """A built-in exception decided by its traceback (frames before words): a reader that knows its shape (a
    variable of vLLM's, a class of vLLM's without an attribute, a checkpoint tensor) says why, the frames say
    whose code and which input; None when the message's own words place it and no frame disagrees."""
    decided = frame_first(st, atlas, cand, m, version)
    if decided is None:
        return None
    p = cand.line
    known = _known_shape(st, atlas, cand, version) if p.kind == "exception" else None
    if known is None:
        return decided
    if known.callers_release:
        # another's code importing or reading what this vLLM release lacks: the caller's release is the fix; the
        # frames' library-boundary advice (that library's version, its part's switch) is not
        known.evidence = list(dict.fromkeys([*known.evidence, *decided.evidence[1:]]))
        if decided.owner == "plugin":  # the caller is a plugin vLLM loaded: its own fix and how to run without it
            known.owner = "plugin"
            known.advice = list(dict.fromkeys([*known.advice, *decided.advice]))
            known.remediation = list(dict.fromkeys([*known.remediation, *decided.remediation]))
        return known
    known.owner = known.owner or decided.owner
    known.inputs = list(dict.fromkeys([*known.inputs, *decided.inputs]))
    known.knobs = list(dict.fromkeys([*known.knobs, *decided.knobs]))
    known.advice = list(dict.fromkeys([*known.advice, *decided.advice]))
    known.deps = list(dict.fromkeys([*known.deps, *decided.deps]))
    known.remediation = list(dict.fromkeys([*known.remediation, *decided.remediation]))
    known.evidence = list(dict.fromkeys([*known.evidence, *decided.evidence[1:]]))
    known.sources = list(dict.fromkeys([*known.sources, *decided.sources]))
    return known


def _match_line(atlas: Atlas, p: ProblemLine, version: str | None,
                frames: list[ProblemLine] | None = None) -> AtlasMatch | None:
    from bot.core.parts import repo_path

    exc = p.exception.rsplit(".", 1)[-1] if p.exception else None
    source_file, source_line = p.origin.source_file, p.origin.source_line
    raised_at = frames[-1] if p.kind == "exception" and frames and frames[-1].frame_file else None
    if raised_at is not None and (repo_path(raised_at.frame_file or "") or "").startswith("vllm/"):
        # an exception is placed where its traceback says it was raised, not where a logger printed it: among sites
        # with the same words (one sentence raised in two files), the frame's file and line
        source_file, source_line = raised_at.frame_file, raised_at.frame_line
    found = atlas.match(p.message, version=version, exc=exc, level=p.origin.level,
                        source_file=source_file, source_line=source_line)
    if found is None and p.tight:  # lines a terminal wrapped inside a word read whole
        found = atlas.match(p.tight, version=version, exc=exc, level=p.origin.level,
                            source_file=source_file, source_line=source_line)
    return found or _after_labels(atlas, p.message, version)


# a label a paste or a wrapper put before the message (`# Error: `, `launch error：`, a class name mistyped): at most
# two, each a few words ending in a colon
_LABEL = re.compile(r"^\s*#?\s*[\w .()-]{1,40}?\s*[:：]\s+")


def _after_labels(atlas: Atlas, message: str, version: str | None) -> AtlasMatch | None:
    """The message under the labels before it, when vLLM's code words it exactly (the only proof that what the
    labels hid is one of vLLM's sentences)."""
    rest = message
    for _ in range(2):
        label = _LABEL.match(rest)
        if label is None or len(rest) - label.end() < 20:
            return None
        rest = rest[label.end():]
        found = atlas.match(rest, version=version)
        if found is not None and found.exact:
            return found
    return None


def _through_wrapper(atlas: Atlas, p: ProblemLine, m: AtlasMatch | None, version: str | None,
                     gpu: gpus.Gpu | None) -> tuple[AtlasMatch | None, Finding | None]:
    """A wrapper ("Error in model execution: {err}") whose hole holds the message that matters: that message's
    match instead, or the GPU requirement it states."""
    if m is None or not m.exact:
        return m, None
    inner_text = max(m.holes.values(), key=len, default="").strip(" '\"")
    if len(inner_text) < 24 or inner_text.count(" ") < 3:
        return m, None
    wrapped = atlas.match(inner_text, version=version)
    # a short hole in long boilerplate is a wrapper only when the hole is itself a message of vLLM's
    mostly_hole = 2 * len(inner_text) > len(p.message)
    if wrapped is not None and (wrapped.exact or mostly_hole):
        return wrapped, None
    if mostly_hole:
        return m, gpu_requirement(replace(p, message=inner_text), gpu, version)
    return m, None


def _read_apart(st: State, atlas: Atlas, cand: Candidate, m: AtlasMatch | None, version: str | None,
                gpu: gpus.Gpu | None) -> Finding | None:
    """A line a reader of its own explains better than its site: a capability refusal, or — a message the atlas
    does not hold — a config field's constraint, or an exception about vLLM's environment, its model classes,
    a checkpoint's tensors, an attention backend it could not use."""
    p = cand.line
    if m is not None and m.exact:
        return capability_refusal(p, m, gpu)
    if m is not None:
        # words that only resemble a site's (Python's own wording of a refused call): a reader that knows the
        # exception's shape says more, when one does
        return _known_shape(st, atlas, cand, version) if p.kind == "exception" else None
    if p.config_field:
        return field_finding(atlas, p, version, cand.frames)
    if p.kind != "exception":
        return None
    return _known_shape(st, atlas, cand, version, bare_ok=True) or backend_refused(st, p)


def _known_shape(st: State, atlas: Atlas, cand: Candidate, version: str | None,
                 bare_ok: bool = False) -> Finding | None:
    """An exception whose shape a reader of its own explains: a variable of vLLM's, a class of vLLM's (or of a
    library's, or of a plugin's) without an attribute, a checkpoint tensor, a kernel without the dtype. A class of
    vLLM's named on a line with no frames only where no other reading placed the line (`bare_ok`)."""
    return (env_finding(atlas, cand, version) or missing_attribute(st, atlas, cand, version, bare_ok=bare_ok)
            or foreign_class(atlas, cand, version) or stale_caller(atlas, cand, version)
            or foreign_signature(atlas, cand, version) or stale_import(atlas, cand, version)
            or tokenizer_class(atlas, cand, version) or config_class(atlas, cand, version)
            or processor_class(atlas, cand, version)
            or unknown_weight(atlas, cand, version)
            or dtype_kernel(cand))


_NEWS_LEVELS = ("INFO", "DEBUG")


def _loose(p: ProblemLine, m: AtlasMatch | None, gpu: gpus.Gpu | None, version: str | None) -> Finding | None:
    """A line without level or class: only what vLLM raises or logs as a problem counts — or a kernel's own words
    asking for a newer GPU (Triton's `type fp8e4nv not supported in this architecture`, pasted alone)."""
    return gpu_requirement(p, gpu, version) if m is None and gpus.required_capability(p.message) else None


def _a_problem(m: AtlasMatch | None, p: ProblemLine) -> bool:
    if m is None:
        return False
    if not m.exact and m.site.kind == "raise" and (p.origin.level or "").upper() in _NEWS_LEVELS:
        return False  # a record logged as news that shares words with a check (a request's parameters by name)
    return m.site.kind == "raise" or (m.site.level or "") in _PROBLEM_LEVELS


def _locate_known(st: State, fallbacks: frozenset[str]) -> None:
    """An entry's finding says why; the atlas adds where: the part, file and function that printed its line."""
    todo = _unlocated(st, fallbacks)
    if not todo:
        return
    from bot.core.atlas import load_atlas
    from bot.core.atlas_words import split_line

    atlas = load_atlas()
    for f, origin in todo:
        line = split_line(origin.text)
        m = atlas.match(line.message, version=st.ev.context.vllm_version, exc=line.exc, level=origin.level,
                        source_file=origin.source_file, source_line=origin.source_line)
        if m is None or not m.exact:
            f.part = module_part(origin.text)
            continue
        f.part = m.site.part
        f.site = site_ref(m)
        f.knobs += [k.flag for k in m.knobs if k.flag not in f.knobs]


def _unlocated(st: State, fallbacks: frozenset[str]) -> list[tuple[Finding, Origin]]:
    """The entries' problem findings that no site is given for yet, with the line each was found on."""
    weighed = [f for f in st.findings if f.site is None and f.part is None and f.id not in fallbacks
               and f.severity in ("critical", "warning")]
    if not weighed:
        return []
    lines = {e.kind: e.origin for e in reversed(st.ev.events)}
    return [(f, lines[f.id]) for f in weighed if f.id in lines]


def _supersede_fallbacks(st: State, fallbacks: frozenset[str]) -> None:
    """A catch-all crash finding says no signature explains the error; once an entry or the atlas does (a
    critical finding of its own, sure of itself), the catch-all is the weaker of two answers to one question
    and moves to "considered"."""
    placed = [f for f in st.findings if f.severity == "critical" and f.confidence in ("high", "medium")
              and f.id not in fallbacks and f.id not in ("server-down", "no-metrics")]
    # a traceback shown to be harmless noise (Python's own resource tracker) explains the catch-all's "crash"
    placed += [f for f in st.findings if f.id == "python-resource-tracker-noise"]
    # so is a traceback an output parser caught and logged: the server went on
    placed += [f for f in st.findings if f.severity == "warning" and _PARSER_NOTE in f.summary]
    # so is a refusal shown to be a warmup's own request
    placed += [f for f in st.findings if f.severity == "info" and WARMUP_NOTE in f.summary]
    # and exceptions Python itself ignored, when they are every exception the log holds
    ignored = [f for f in st.findings if f.severity == "info" and _UNRAISABLE_DOC in f.sources]
    covered = {at for f in ignored for at in f.covers}
    if ignored and all(position(p.origin) in covered for p in st.ev.parsed.problems if p.kind == "exception"):
        placed += ignored
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


@dataclass(frozen=True)
class Explained:
    """One pasted line, read as vLLM would have printed it, and where the atlas places it."""

    message: str
    exception: str | None
    level: str | None
    source: str | None  # `file.py:123` from vLLM's prefix
    match: AtlasMatch | None


def explain_line(text: str, version: str | None = None, platform: str | None = None) -> Explained:
    """Where vLLM raises or prints the line. When the same sentence is raised in several platforms' files (CUDA's
    and ROCm's dtype check), the platform decides: the one given, else the GPU the line names (an NVIDIA GPU is
    CUDA's), else the file the line itself names."""
    from bot.core import gpus
    from bot.core.atlas import load_atlas
    from bot.core.atlas_words import split_line
    from bot.core.line_kinds import strip_outer_prefix

    line = split_line(strip_outer_prefix(text.strip()))
    exc = line.exc.rsplit(".", 1)[-1] if line.exc else None
    if platform is None and gpus.find_in(line.message) is not None:
        platform = "cuda"
    source_file = f"{platform}.py" if platform else line.source_file
    match = load_atlas().match(line.message, version=version, exc=exc, level=line.level,
                               source_file=source_file, source_line=line.source_line)
    source = f"{line.source_file}:{line.source_line}" if line.source_file else None
    return Explained(line.message, exc, line.level, source, match)
