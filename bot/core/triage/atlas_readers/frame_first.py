"""A built-in exception read from its traceback: where it was raised, whose code that is, which input the failing
line read, and what the code's history says — instead of wherever else the same words are printed.

The finding names the owner (vLLM, a plugin, a library, the user's program), the part of vLLM the call came
from, the input the code line names (with its flag or variable), and the fix the owner and the history point at:
- a plugin: its compatibility with this vLLM release, and how to run without it (`VLLM_PLUGINS`);
- a library vLLM calls: the installed version of that library against the one this vLLM release expects;
- the user's program: its own line;
- vLLM: the releases in which the raising line exists — changed in a later release (upgrade past it), new in the
  user's release (a regression candidate: pin the one before while it is reported), or unchanged to the newest.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import owners, switches
from bot.core.history import LineHistory
from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.divisibility import not_divisible
from bot.core.triage.atlas_readers.gpu_requirement import gpu_requirement
from bot.core.triage.atlas_readers.graph_capture import GRAPH_CAPTURE, capture_ran_short
from bot.core.triage.atlas_readers.host import gpu_of, has_spec
from bot.core.triage.atlas_readers.input_knobs import (
    CUDA_ENV_DOC,
    PLUGIN_ENV,
    device_ids,
    knob_lines,
    knobs_of,
    missing_package,
    settable,
)
from bot.core.triage.atlas_readers.line_history import history_fix, history_of, not_in_any_release
from bot.core.triage.atlas_readers.location import PART_TITLES
from bot.core.triage.atlas_readers.model_class import missing_attribute, vllms_object_in_library
from bot.core.triage.atlas_readers.named_in_words import apply_named, named_in_words
from bot.core.triage.atlas_readers.quoting import clip, frame_at, quoted, short_path
from bot.core.triage.atlas_readers.refused_input import named_flags, named_switches
from bot.core.triage.atlas_readers.refused_request import mistral_request
from bot.core.triage.atlas_readers.releases import frames_release
from bot.core.triage.atlas_readers.stack_dump import HEAD, WHAT, Reading, reading_of, stuck_in_collective
from bot.core.triage.atlas_readers.told import told_flags
from bot.core.triage.atlas_readers.torch_ops import unregistered_op
from bot.core.triage.atlas_readers.words_only import aged_caller, unframed, words_only
from bot.core.triage.findings import Confidence, Finding
from bot.core.triage.frames import (
    FRAMES_DECIDE,
    Input,
    Raiser,
    frames_agree,
    generic_words,
    raiser,
)
from bot.core.triage.remedy import Remedy

if TYPE_CHECKING:
    from bot.core.atlas import Atlas, AtlasMatch
    from bot.core.triage.detectors.state import State



def frame_id(path: str, where: str) -> str:
    """A frame-first finding's id: the file it names (read back by `frame_path`) and the function."""
    return f"frame:{path}:{where}"


def frame_path(f: Finding) -> str | None:
    """The file a frame-first finding names (as `frame_id` wrote it), or None for any other finding."""
    return f.id.split(":", 2)[1] if f.id.startswith("frame:") else None


def frame_first(st: State, atlas: Atlas, cand: Candidate, m: AtlasMatch | None,
                version: str | None) -> Finding | None:
    """The finding for a built-in exception whose words do not place it (or whose frames contradict where the words
    do); None when the message's own words name a site the frames agree with, or say nothing is contradicted."""
    p = cand.line
    if p.kind == "frame":
        # a traceback whose exception line the log does not hold: the frames alone say whose code it was in — when
        # that is not vLLM's (vLLM's own frames are placed at their site by the atlas)
        r = raiser(cand.frames, None, "")
        if r is None or r.owner.name in ("vllm", "python"):
            return None
        return _from_frames(st, atlas, cand, "A traceback", r, None, version)
    op = unregistered_op(st, cand)  # torch's words name the extension at fault, whichever frame printed them
    if op is not None:
        return op
    refused = mistral_request(cand)  # the request's messages, whichever of vLLM's frames called the validator
    if refused is not None:
        return refused
    exc = (p.exception or "").rsplit(".", 1)[-1]
    split = not_divisible(st, p, exc)  # vLLM's divisibility check: its numbers say what to change, whatever the frames
    if split is not None:
        return split
    said = unframed(st, atlas, cand, m, exc, version) if not cand.frames else aged_caller(atlas, cand, exc, version)
    if said is not None:
        return said
    if p.kind != "exception" or exc not in FRAMES_DECIDE:
        return None
    generic = generic_words(exc, p.message)
    agree = m is not None and frames_agree(m.site.file, m.site.function, cand.frames)
    if not generic and m is not None and (agree or not cand.frames or _own_words(m) or p.config_field):
        # the message is vLLM's own sentence, matched whole: its words name the site (a validator pydantic calls, a
        # check re-raised elsewhere, leave frames that do not pass through it)
        return None
    r = raiser(cand.frames, exc, p.message)
    if r is None:
        return _no_frames(st, atlas, cand, exc, version) if generic else None
    if r.owner.name == "python" and _TRACKER.search(r.frame.frame_file or ""):
        return _tracker_noise(st, cand, r)
    if _plumbing_only(exc, r) and (layer := missing_attribute(st, atlas, cand, version, layers=True)) is not None:
        return layer  # not torch's: the class named is vLLM's, in the part its file lies in
    contradicted = m if (m is not None and not agree) else None
    found = _from_frames(st, atlas, cand, exc, r, contradicted, version)
    need = gpu_requirement(p, gpu_of(st), version)
    if need is not None:  # the message also states the GPU generation or capability it needs
        found.inputs = list(dict.fromkeys([*found.inputs, *need.inputs]))
        found.knobs = list(dict.fromkeys([*found.knobs, *need.knobs]))
        found.host = list(dict.fromkeys([*found.host, *need.host]))
        found.remediation = [*need.remediation, *found.remediation]
        found.part = found.part or need.part
        found.sources = list(dict.fromkeys([*found.sources, *need.sources]))
    return found


# Python's shared-memory resource tracker complains about names other processes already unregistered (CPython
# gh-82300): tracebacks of its own, in a helper process, at shutdown — not the server's failure
_TRACKER = re.compile(r"multiprocessing/resource_tracker\.py$")
TRACKER_SOURCE = "https://github.com/python/cpython/issues/82300"


def _no_frames(st: State, atlas: Atlas, cand: Candidate, exc: str, version: str | None) -> Finding | None:
    """Python's words and no frame: what the words name; where they only repeat a name (no part, no fix), one of
    vLLM's own classes named without an attribute says more."""
    said = words_only(st, atlas, cand, exc, version)
    if said is None or not (said.part or said.advice or said.knobs or said.deps or said.host):
        bare = missing_attribute(st, atlas, cand, version, bare_ok=True)
        if bare is not None:
            return bare
    return said


def _tracker_noise(st: State, cand: Candidate, r: Raiser) -> Finding:
    from bot.core.triage.evidence import position

    p = cand.line
    problems = st.ev.parsed.problems
    noisy = {f.traceback_id for f in problems if f.kind == "frame" and _TRACKER.search(f.frame_file or "")}
    return Finding(
        id="python-resource-tracker-noise", title="Python's resource tracker complains about shared memory it no "
                                                  "longer tracks (not the server's failure)",
        severity="info", confidence="medium",
        summary=("The traceback lies wholly in Python's `multiprocessing.resource_tracker` helper process, which "
                 "warns (or raises KeyError) for shared-memory segments another process already released: a known "
                 "behaviour of CPython's tracker, harmless to a server that goes on running."),
        evidence=[quoted(p), f"raised at {short_path(r.frame.frame_file or '')}:{r.frame.frame_line} in "
                             f"`{r.frame.frame_function}`"],
        remediation=["Nothing to fix in vLLM; judge the server by what it logs around it."],
        sources=[TRACKER_SOURCE], priority=90, owner="python",
        covers=[position(q.origin) for q in problems if q.traceback_id in noisy])


def _own_words(m: AtlasMatch) -> bool:
    """A whole-message match of a template with words enough of its own to name one site."""
    literal = sum(len(part.strip()) for part in re.split(r"\{[^{}]*\}", m.site.template))
    return m.exact and literal >= 32


# ---- with a traceback --------------------------------------------------------------------------------------------

def _from_frames(st: State, atlas: Atlas, cand: Candidate, exc: str, r: Raiser, contradicted: AtlasMatch | None,
                 version: str | None) -> Finding:
    p = cand.line
    vframe = r.frame if r.owner.name == "vllm" else r.vllm_frame
    part = atlas.part_of(vframe.frame_file or "", vframe.frame_function) if vframe is not None else None
    inputs = settable(atlas, list(r.inputs), version) + device_ids(p.message)
    knobs, input_lines = knobs_of(atlas, inputs, version, has_spec(st))
    given_by = [k for k in knobs if k.startswith("--")]  # the flags the keys it read are given with: inputs too
    history = history_of(vframe, version)
    fix = _fix_of(r, exc, p.message, inputs, vframe, history, version)
    switch, part = _switch_and_part(cand, r, vframe, part, inputs, version)
    if switch is not None:
        fix.remediation.insert(0, switch[0])
        knobs = [*knobs, switch[1]]
    fix.remediation = knob_lines([k for k in knobs if switch is None or k != switch[1]]) + fix.remediation
    sources = _sources_of(history, r, fix)
    confidence: Confidence = "medium" if (inputs or history is not None or r.owner.name != "vllm") else "low"
    reading = reading_of(st, r.frame)
    f = Finding(
        id=frame_id(short_path(r.frame.frame_file or ''), r.frame.frame_function or f"line {r.frame.frame_line}"),
        title=_frame_title(p, exc, r, vframe, inputs, reading),
        severity="info" if reading == "snapshot" else "critical",
        confidence="low" if p.kind == "frame" else confidence,
        summary=" ".join(_frame_summary(p, exc, r, vframe, part, input_lines, contradicted, reading)),
        evidence=_frame_evidence(p, r, vframe), remediation=list(dict.fromkeys(fix.remediation)), sources=sources,
        priority=38, part=part if part and part != "other" else ("platform" if r.owner.name == "plugin" else None),
        owner=r.owner.name, inputs=list(dict.fromkeys([*(i.tag for i in inputs), *given_by])),
        knobs=list(dict.fromkeys(knobs)), advice=fix.advice,
        deps=fix.deps, host=fix.host, is_bug=r.owner.name == "vllm" and not inputs)
    f.knobs = list(dict.fromkeys([*f.knobs, *fix.knobs]))  # the owner's own fix (a debugger: --enforce-eager)
    f.switch = switch[0] if switch is not None else None
    _said_in_words(f, atlas, p.message, vframe, inputs, version)
    if exc == "AttributeError":
        vllms_object_in_library(f, atlas, p.message, r.owner.name, r.frame.source, version)
    stuck_in_collective(f, r.frame, reading)
    if switch is not None:
        capture_ran_short(st, f, r.frame, p, atlas, version)
    # an argument the call passes that is an engine argument (`worker_extension_cls`) is that flag, named so too
    flagged = ["--" + i.name.replace("_", "-") for i in inputs if i.kind == "argument"]
    f.inputs = list(dict.fromkeys([*f.inputs, *(k for k in flagged if k in f.knobs)]))
    if r.owner.name == "remote-code":
        f.inputs = list(dict.fromkeys([*f.inputs, "checkpoint"]))  # the code came with the checkpoint
    return f


# what a caller written for another release of a library raises at its boundary
_API_DRIFT_EXCEPTIONS = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError", "TypeError", "NameError"})
# the one owner name owners.LIBRARIES gives all the tokenizer libraries (tokenizers, sentencepiece, tiktoken)
_TOKENIZER_OWNER = "tokenizers"


def _switch_and_part(cand: Candidate, r: Raiser, vframe: ProblemLine | None, part: str | None, inputs: list[Input],
                     version: str | None) -> tuple[tuple[str, str] | None, str | None]:
    """The switch the plan proves it with first, and the part: an attention backend refusing what the model's layers
    pass it is the backend's choice, before the part the frame is in."""
    backend = _attention_callee(inputs, version)
    if backend is not None:
        return backend, "attention"
    switch = _switch_of(vframe, r, version or frames_release(list(cand.frames))) \
        if r.owner.name != "debugger" else None
    return switch, _part_beside(part, r, cand, switch)


def _part_beside(part: str | None, r: Raiser, cand: Candidate, switch: tuple[str, str] | None) -> str | None:
    """The part when vLLM's frame names none: a debugger inside a compiled forward is the compile's; a library that
    runs only through one of vLLM's parts is that part's."""
    if r.owner.name == "debugger" and any("torch/_dynamo/" in (f.frame_file or "") for f in cand.frames):
        return "compilation"
    if part in (None, "other") and "torch/distributed/" in (r.frame.frame_file or ""):
        return "parallel"  # torch.distributed's collectives: the ranks of the parallel part talking to each other
    if part in (None, "other") and r.owner.name == _TOKENIZER_OWNER:
        return "tokenizer"  # tokenizers, sentencepiece, tiktoken: vLLM reaches them only to tokenize
    if part is None and switch is not None:
        found = _library_switch(r)
        return found.part if found is not None else None
    return part


def _sources_of(history: LineHistory | None, r: Raiser, fix: Remedy) -> list[str]:
    sources = [history.compare_url(history.changed_in)] if history is not None and history.changed_in else []
    sources += [owners.PLUGIN_DOC] if r.owner.name == "plugin" else []
    sources += [CUDA_ENV_DOC] if "device-visibility" in fix.host else []
    return sources


def _fix_of(r: Raiser, exc: str, message: str, inputs: list[Input], vframe: ProblemLine | None,
            history: LineHistory | None, version: str | None) -> Remedy:
    """The owner's fix, then what the code's history says, then the checkpoint and the devices an input names."""
    fix = _owner_fix(r, exc, message, inputs, version)
    if vframe is not None:
        fix.add(*(history_fix(history, vframe, version, r.owner.name == "vllm") if history is not None
                  else not_in_any_release(vframe, version)))
    if any(i.kind == "checkpoint" for i in inputs):
        fix.add(["Or use a checkpoint whose tensor names and layout this release loads (the model card names the "
                 "vLLM version it was made for); loaders learn new layouts in later releases."],
                ["checkpoint", "upgrade"])
    if any(i.name == "CUDA_VISIBLE_DEVICES" for i in inputs):
        fix.host.append("device-visibility")
    if any(i.kind == "request" for i in inputs):
        fix.add(["Find the request (its structured-output grammar, JSON schema or regex) and fix what the client "
                 "sends; a structured-outputs backend that compiles it may be the other way round it."], ["request"])
    return fix


def _said_in_words(f: Finding, atlas: Atlas, message: str, vframe: ProblemLine | None, inputs: list[Input],
                   version: str | None) -> None:
    """What the message's words add: a package and its version, a missing package, the settings it names."""
    apply_named(f, named_in_words(message, vframe.frame_function if vframe is not None else None, f.part))
    missing = missing_package(next((i for i in inputs if i.kind == "module"), None))
    if missing is not None:
        f.deps = list(dict.fromkeys([*f.deps, missing[0]]))
        f.remediation.insert(0, missing[1])
        module = next(i for i in inputs if i.kind == "module")
        if f.owner == "vllm" and "." in module.name:
            # vLLM's import of a name the installed package no longer (or not yet) has: that package's release is
            # what changed under a line of vLLM's that did not
            f.owner = owners.of_package(module.name.split(".", 1)[0]).name
    named = named_flags(atlas, message, "", version)
    if named and _REFUSAL_WORDS.search(message):  # a refusal names the settings it refused: they are the input
        f.inputs = list(dict.fromkeys([*f.inputs, *named]))
    told, told_knobs = told_flags(atlas, message, version)  # "Please set dtype to torch.float": vLLM's flag for it
    if told_knobs:
        f.knobs = list(dict.fromkeys([*f.knobs, *told_knobs]))
        f.remediation = [*told, *f.remediation]
    said = [k for k in [*named, *named_switches(atlas, message, version)] if k not in f.knobs]
    if said:  # settings the message names in words (`max_num_seqs`, "tensor parallel size", "V2 model runner")
        f.knobs += said
        f.remediation.insert(0, "The message names the setting(s) to change: " + ", ".join(f"`{k}`" for k in said)
                             + ".")


# the words of a check refusing what it was given ("X with enforce_eager = False is not supported yet")
_REFUSAL_WORDS = re.compile(r"(?i)\bnot (?:yet )?(?:supported|allowed|compatible|valid)\b|\bmust (?:be|not)\b|"
                            r"\bunable to configure\b|"
                            r"\bcannot be\b|\binvalid\b|\bshould (?:be|not)\b|\bonly supports?\b|\bexceeds?\b")


def _owner_fix(r: Raiser, exc: str, message: str, inputs: list[Input], version: str | None) -> Remedy:
    """What the owner of the failing code says to do: a plugin's compatibility, a library's version, the user's
    line, or — vLLM's own code calling itself wrongly — a clean install."""
    fix = Remedy()
    owner = r.owner
    where = frame_at(r.frame)
    if owner.name == "plugin":
        fix.add(_plugin_fix(owner, version), ["disable-plugin"])
        fix.deps.append(owner.package)
    elif owner.name == "other":
        pkg = owner.package
        fix.add([f"The code that failed belongs to `{pkg}`, a program that runs vLLM through its Python API, not to "
                 f"vLLM: it calls vLLM {version or '(your release)'} in a way that release does not take — the two "
                 f"come from different releases. Pin vLLM to the release `{pkg}` names in its requirements, or "
                 f"install `{pkg}`'s release made for this vLLM."], ["pin", "upgrade"])
        fix.deps.append(pkg)
    elif owner.name == "debugger":
        fix.add([f"The exception is raised inside the debugger's own hooks ({where}), in code vLLM runs compiled: run "
                 "the server without the debugger, or with `--enforce-eager` (no torch.compile, no CUDA graphs) "
                 "when you must step through it."], [])
        fix.knobs.append("--enforce-eager")
    elif owner.name == "remote-code" and exc in _API_DRIFT_EXCEPTIONS:
        fix.add([f"The failing line is in the checkpoint's own Python code ({where}), which transformers fetched from "
                 f"the model repository `{owner.package}` and runs under `--trust-remote-code`: a name it imports or "
                 "calls is not what the installed transformers (or torch) has — the code was written for other "
                 "releases. Use a revision of the repository whose code fits them, install the transformers release "
                 "the code was written for, or — where vLLM implements the architecture itself — serve without "
                 "`--trust-remote-code`."], ["checkpoint"])
        fix.deps.append("transformers")
    elif owner.name == "remote-code":
        fix.add([f"The failing line is in the checkpoint's own Python code ({where}), run under "
                 f"`--trust-remote-code` from the model repository `{owner.package}`: read what it checks there (the "
                 "input it was given, or its own state); where vLLM implements the architecture itself, serving "
                 "without `--trust-remote-code` takes that code out."], ["checkpoint"])
    elif owner.name == "user-script":
        fix.add([f"The failing line is in your own program ({where}): fix the call there"
                 + (f" — {inputs[0].detail}" if inputs else "") + "."], ["fix-script"])
    elif owner.name not in ("vllm", "python"):
        vpath = short_path(r.vllm_frame.frame_file or "") if r.vllm_frame is not None else None
        fix.add([_library_fix(owner, vpath, exc, version)], [])
        fix.deps.append(owner.name)
    elif exc == "AttributeError" and message.startswith(f"module '{_FI_WRAPPER}' has no attribute"):
        # (vllm/utils/flashinfer.py defines some of its entry points under `if has_flashinfer():`, False without the
        # package or — in the releases that check — without nvcc or prebuilt kernels; a name it defines
        # unconditionally missing is files of two versions: the log's line at import tells the two apart)
        fix.add([f"Two readings. `{_FI_WRAPPER}` (vLLM's wrapper of FlashInfer) defines some entry points only when "
                 "FlashInfer was usable as vLLM imported it (`has_flashinfer()`): the package installed and — in "
                 "releases that check it — nvcc found on PATH (the newest also read CUDA_HOME / CUDA_PATH and want "
                 "ninja) or FlashInfer's prebuilt kernels installed; a line at import (`FlashInfer unavailable …`, "
                 "`FlashInfer kernels are disabled …`, at debug level in most releases) says which was missing. Then "
                 "give the server's environment the CUDA toolkit (its bin on PATH) or install flashinfer-cubin at "
                 "flashinfer-python's version — or choose another kernel backend. Otherwise the installed vLLM files "
                 "come from two versions (the wrapper without that name): reinstall one release cleanly."],
                ["upgrade"])
        fix.host.append("cuda-toolkit")
        fix.deps.append("flashinfer")
    elif _inconsistent_install(exc, r, message):
        fix.add(["vLLM's own code calls vLLM's own code with what it does not take: the installed files come from "
                 "two versions (a source checkout between commits, an upgrade over an old install, a stale build). "
                 "Reinstall one release cleanly (`pip install --force-reinstall vllm==X`), or move to the commit or "
                 "release with the fix; if the previous release worked, pin it meanwhile."], ["upgrade", "pin"])
    elif owner.name == "vllm" and exc == "AssertionError" and not inputs:
        # vLLM checks what users set with exceptions that say what to change; a bare `assert` over its own state is
        # an invariant of its code, so its failure is a defect of the release, not a setting to change
        fix.add(["An `assert` on vLLM's own state failed: an invariant of its code, not a check of your settings — a "
                 "defect of this build. Upgrade to a release that fixed it (read the history below, and search vLLM's "
                 "issues for the assertion), or pin the release before if that one worked; report it with this "
                 "traceback otherwise."], ["upgrade"])
    return fix


# the callee a TypeError names (`FlashAttentionImpl.__init__() got an unexpected keyword argument 'layer_idx'`)
_CALLEE_CLASS = re.compile(r"^`(?P<cls>[A-Z]\w{2,80})\.__init__\(\)` does not take it$")


def _attention_callee(inputs: list[Input], version: str | None) -> tuple[str, str] | None:
    """An attention backend's implementation refusing what the model's attention layer passes it: the layer was
    built for another backend (a model with an attention of its own names the one it needs), so the backend chosen
    is the setting — before a mixed install."""
    from bot.core.atlas import load_atlas

    arg = next((i for i in inputs if i.kind == "argument"), None)
    named = _CALLEE_CLASS.match(arg.detail) if arg is not None else None
    path = load_atlas().class_file(named["cls"]) if named is not None else None
    if arg is None or named is None or path is None or "/attention/backends/" not in path:
        return None
    sw = switches.by_id("attention-backend")
    offer = sw.offer(version) if sw is not None else None
    if offer is None:
        return None
    return (f"The callee is an attention backend (`{named['cls']}`, {path}): the model's attention layers pass "
            f"`{arg.name}`, which this backend does not take — if the model has an attention of its own (dual-chunk, "
            f"sparse) its card or vLLM's documentation names the backend made for it: choose that one. Otherwise the "
            f"installed files may come from two releases (next step). {offer[0]}", offer[1])


def _frame_title(p: ProblemLine, exc: str, r: Raiser, vframe: ProblemLine | None, inputs: list[Input],
                 reading: Reading | None) -> str:
    frame_only = p.kind == "frame"
    where = (f" ({frame_at(vframe, line=False)})" if vframe is not None and r.owner.name == "vllm" else
             f" ({frame_at(r.frame, line=False)})")
    tail = f": {inputs[0].name}" if inputs else (f": {clip(p.message, 70)}" if not frame_only else "")
    head = (HEAD[reading] if reading is not None else "Crash in") if frame_only else f"{exc} in"
    return f"{head} {r.owner.title}{where}{tail}"


def _frame_summary(p: ProblemLine, exc: str, r: Raiser, vframe: ProblemLine | None, part: str | None,
                   input_lines: list[str], contradicted: AtlasMatch | None, reading: Reading | None) -> list[str]:
    what = exc if p.kind != "frame" else (WHAT[reading] if reading is not None else
                                          "A traceback (its exception line is not in the log)")
    where = frame_at(r.frame)
    summary = [f"{what} raised in {r.owner.title} at {where}" + (f": `{clip(r.code, 120)}`" if r.code else "") + "."]
    if vframe is not None and vframe is not r.frame:
        summary.append(f"vLLM called it from {short_path(vframe.frame_file or '')}:{vframe.frame_line} in "
                       f"`{vframe.frame_function}` ({PART_TITLES.get(part or '', part or 'vLLM')}).")
    summary += input_lines
    if contradicted is not None:
        summary.append(f"The same words are printed at {contradicted.site.file} ({contradicted.site.function}), "
                       "but the traceback does not pass there: that site is not where this came from.")
    return summary


def _frame_evidence(p: ProblemLine, r: Raiser, vframe: ProblemLine | None) -> list[str]:
    where = frame_at(r.frame)
    evidence = [quoted(p), f"raised at {where}" + (f": {clip(r.code, 160)}" if r.code else "")]
    if vframe is not None and vframe is not r.frame:
        evidence.append(f"called from vLLM at {short_path(vframe.frame_file or '')}:{vframe.frame_line} in "
                        f"{vframe.frame_function}" + (f": {clip(vframe.source or '', 160)}" if vframe.source else ""))
    return evidence


_FI_WRAPPER = "vllm.utils.flashinfer"


def _inconsistent_install(exc: str, r: Raiser, message: str) -> bool:
    """A call between two of vLLM's own modules that does not fit (a wrong argument count or keyword, a name one
    module imports from the other that is not there): only files of two versions do that."""
    if r.owner.name != "vllm" or exc not in ("TypeError", "ImportError", "AttributeError"):
        return False
    if exc == "ImportError":
        return "from 'vllm" in message
    if exc == "AttributeError":
        return message.startswith("module 'vllm")
    return bool(re.match(r"^[A-Z]\w*\.\w+\(\) (?:takes|missing|got)", message))


def _switch_of(vframe: ProblemLine | None, r: Raiser, version: str | None) -> tuple[str, str] | None:
    """The switch that turns off the part the failing frames lie in (the innermost frame's, else vLLM's), on this
    release: the advice and the knob it turns."""
    from bot.core.parts import repo_path

    for frame in (r.frame, vframe):
        if frame is None:
            continue
        path = repo_path(frame.frame_file or "")
        if path is None:
            continue
        sw = switches.for_frame(path, frame.frame_function)
        if sw is None:
            continue
        offer = sw.offer(switches.release_hint(version, path))
        if offer is not None:
            return offer
    sw = _library_switch(r)
    return sw.offer(version) if sw is not None else None


def _library_switch(r: Raiser) -> switches.Switch | None:
    if r.owner.name == "ray" and _RAY_COMPILED_GRAPH.search((r.frame.frame_file or "").replace("\\", "/")):
        return switches.by_id("ray-compiled-graph")
    library = _LIBRARY_SWITCHES.get(r.owner.name) or next(
        (sid for ns, sid in _NATIVE_SWITCHES.items() if (r.frame.frame_function or "").startswith(ns)), None)
    if library is None and _TORCH_COMPILER.search((r.frame.frame_file or "").replace("\\", "/")):
        library = "torch-compile"  # Dynamo and Inductor run in vLLM only as its torch.compile of the model
    if library is None and GRAPH_CAPTURE.search((r.frame.frame_file or "").replace("\\", "/")):
        library = "cuda-graphs"  # torch's (or an accelerator's torch) graph capture: vLLM captures only its graphs
    return switches.by_id(library) if library else None


_TORCH_COMPILER = re.compile(r"(?:^|/)torch/_(?:inductor|dynamo)/")
# Ray's compiled graphs and their channels (ray/dag/compiled_dag_node.py, ray/experimental/channel/…)
_RAY_COMPILED_GRAPH = re.compile(r"(?:^|/)ray/(?:dag/|experimental/channel/|experimental/compiled_dag)")


# a library that only runs in vLLM through one of vLLM's parts: a crash inside it is that part's, and the part's
# switch proves it (Ray's compiled graphs and channels run vLLM's workers only under the Ray executor)
_LIBRARY_SWITCHES = {"ray": "ray-executor"}
# a native frame's C++ namespace (a stack dump with native frames) that one of vLLM's parts alone calls: FlashInfer's
# sampling kernels run only in the sampler vLLM's switch turns off
_NATIVE_SWITCHES = {"flashinfer::sampling::": "flashinfer-sampler"}


def _plugin_fix(owner: owners.Owner, version: str | None) -> list[str]:
    pkg = owner.package
    dist = pkg.replace("_", "-")
    return [f"The code that failed belongs to the plugin `{pkg}`, not to vLLM: check that its release supports vLLM "
            f"{version or '(your version)'} (`pip show {dist} vllm`; a plugin names the vLLM release it was built "
            f"for) and install the one that does.",
            f"To tell a plugin problem from a vLLM one, run without it: `{PLUGIN_ENV}=` (empty) loads no general "
            "plugin; an out-of-tree platform plugin is uninstalled (`pip uninstall " + dist + "`) or pinned to the "
            "release made for your vLLM."]


def _library_fix(owner: owners.Owner, vpath: str | None, exc: str, version: str | None) -> str:
    lib = owner.package
    api = exc in ("TypeError", "AttributeError", "ImportError", "ModuleNotFoundError")
    head = (f"The exception is raised inside {owner.title} (`{lib}`)"
            + (f", called from vLLM's {vpath}" if vpath else "") + ".")
    if api:
        return (head + f" An {exc} at a library boundary is most often a version mismatch: install the `{lib}` "
                f"version vLLM {version or '(your release)'} requires (`pip show {lib}`; vLLM's requirements files "
                "pin it), or upgrade both together.")
    return head + f" Check the installed `{lib}` against the version vLLM {version or '(your release)'} pins."


# torch's `Module.__getattr__` raises AttributeError for every attribute a module lacks: it only passes on the read
# of the code that called it
_MODULE_GETATTR = re.compile(r"torch/nn/modules/module\.py$")


def _plumbing_only(exc: str, r: Raiser) -> bool:
    """An AttributeError whose only frames are torch's `Module.__getattr__`: the object it names says whose it is."""
    return (exc == "AttributeError" and r.vllm_frame is None
            and _MODULE_GETATTR.search((r.frame.frame_file or "").replace("\\", "/")) is not None)
