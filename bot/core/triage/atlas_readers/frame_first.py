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
from bot.core.history import LineHistory, load_history
from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.api_surface import API_FILES
from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.gpu_requirement import gpu_requirement
from bot.core.triage.atlas_readers.host import gpu_of, has_spec
from bot.core.triage.atlas_readers.line_history import history_fix, history_of, not_in_any_release
from bot.core.triage.atlas_readers.location import PART_TITLES
from bot.core.triage.atlas_readers.model_class import missing_attribute
from bot.core.triage.atlas_readers.named_in_words import apply_named, named_in_words
from bot.core.triage.atlas_readers.newer_argument import newer_argument
from bot.core.triage.atlas_readers.quoting import clip, frame_at, quoted, short_path
from bot.core.triage.atlas_readers.refused_input import named_flags, named_switches
from bot.core.triage.atlas_readers.refused_request import mistral_request
from bot.core.triage.atlas_readers.releases import frames_release, newer
from bot.core.triage.atlas_readers.site_finding import told_flags
from bot.core.triage.atlas_readers.stack_dump import HEAD, WHAT, Reading, reading_of, stuck_in_collective
from bot.core.triage.atlas_readers.torch_ops import unregistered_op
from bot.core.triage.atlas_readers.weight_loader import quantized_layout
from bot.core.triage.findings import Advice, Confidence, Finding
from bot.core.triage.frames import FRAMES_DECIDE, Input, Raiser, frames_agree, generic_words, inputs_of, raiser
from bot.core.triage.remedy import Remedy

if TYPE_CHECKING:
    from bot.core.atlas import Atlas, AtlasMatch
    from bot.core.triage.detectors.state import State

# a GPU or MIG device named by its UUID (CUDA_VISIBLE_DEVICES takes indices or UUIDs: the CUDA Programming Guide's
# "CUDA Environment Variables"); code that parses the variable as integers fails on the UUID form
_DEVICE_UUID = re.compile(r"'(?:MIG-GPU-|MIG-|GPU-)[0-9a-fA-F]{8}-[0-9a-fA-F-]{20,}(?:/\d+/\d+)?'")
CUDA_ENV_DOC = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-environment-variables"
PLUGIN_ENV = "VLLM_PLUGINS"


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
    said = _unframed(atlas, cand, m, exc, version) if not cand.frames else _aged_caller(atlas, cand, exc, version)
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
        return _words_only(st, atlas, cand, exc, version) if generic else None
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
    inputs = list(r.inputs) + _device_ids(p.message)
    knobs, input_lines = _knobs_of(atlas, inputs, version, has_spec(st))
    given_by = [k for k in knobs if k.startswith("--")]  # the flags the keys it read are given with: inputs too
    history = history_of(vframe, version)
    fix = _fix_of(r, exc, p.message, inputs, vframe, history, version)
    switch = _switch_of(vframe, r, version or frames_release(list(cand.frames))) \
        if r.owner.name != "debugger" else None
    part = _part_beside(part, r, cand, switch)
    if switch is not None:
        fix.remediation.insert(0, switch[0])
        knobs = [*knobs, switch[1]]
    fix.remediation = _knob_lines([k for k in knobs if switch is None or k != switch[1]]) + fix.remediation
    sources = _sources_of(history, r, fix)
    confidence: Confidence = "medium" if (inputs or history is not None or r.owner.name != "vllm") else "low"
    reading = reading_of(st, r.frame)
    f = Finding(
        id=f"frame:{short_path(r.frame.frame_file or '')}:" + (r.frame.frame_function or f"line {r.frame.frame_line}"),
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
    stuck_in_collective(f, r.frame, reading)
    # an argument the call passes that is an engine argument (`worker_extension_cls`) is that flag, named so too
    flagged = ["--" + i.name.replace("_", "-") for i in inputs if i.kind == "argument"]
    f.inputs = list(dict.fromkeys([*f.inputs, *(k for k in flagged if k in f.knobs)]))
    return f


# the one owner name owners.LIBRARIES gives all the tokenizer libraries (tokenizers, sentencepiece, tiktoken)
_TOKENIZER_OWNER = "tokenizers"


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
    missing = _missing_package(next((i for i in inputs if i.kind == "module"), None))
    if missing is not None:
        f.deps = list(dict.fromkeys([*f.deps, missing[0]]))
        f.remediation.insert(0, missing[1])
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
    elif owner.name == "user-script":
        fix.add([f"The failing line is in your own program ({where}): fix the call there"
                 + (f" — {inputs[0].detail}" if inputs else "") + "."], ["fix-script"])
    elif owner.name not in ("vllm", "python"):
        vpath = short_path(r.vllm_frame.frame_file or "") if r.vllm_frame is not None else None
        fix.add([_library_fix(owner, vpath, exc, version)], [])
        fix.deps.append(owner.name)
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
    library = _LIBRARY_SWITCHES.get(r.owner.name) or next(
        (sid for ns, sid in _NATIVE_SWITCHES.items() if (r.frame.frame_function or "").startswith(ns)), None)
    if library is None and _TORCH_COMPILER.search((r.frame.frame_file or "").replace("\\", "/")):
        library = "torch-compile"  # Dynamo and Inductor run in vLLM only as its torch.compile of the model
    return switches.by_id(library) if library else None


_TORCH_COMPILER = re.compile(r"(?:^|/)torch/_(?:inductor|dynamo)/")


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


def _device_ids(message: str) -> list[Input]:
    if _DEVICE_UUID.search(message):
        return [Input("env", "CUDA_VISIBLE_DEVICES", "holds a GPU or MIG UUID where vLLM parses device indices")]
    return []


def _knobs_of(atlas: Atlas, inputs: list[Input], version: str | None,
              spec: bool) -> tuple[list[str], list[str]]:
    """The flags and variables behind the inputs, and a sentence per input."""
    knobs: list[str] = []
    lines: list[str] = []
    known_env = atlas.env_vars(version)
    for i in inputs:
        if i.kind == "env":
            knobs.append(i.name)
            help_text = known_env.get(i.name, "")
            lines.append(f"The failing line reads the environment variable `{i.name}` ({i.detail})"
                         + (f": {clip(help_text, 160)}" if help_text else "") + ".")
        elif i.kind == "config":
            found = atlas.knobs_for([f"?.{i.name}", f"self.{i.name}"], version)
            flag = next((k.flag for k in found if spec or k.flag != "--speculative-config"), None)
            if flag:
                knobs.append(flag)
            lines.append(f"The failing line reads the config field `{i.name}` ({i.detail})"
                         + (f", set by `{flag}`" if flag else ", from the model's (or drafter's) config.json") + ".")
        elif i.kind == "checkpoint":
            lines.append(f"The checkpoint tensor `{i.name}` has no place in the model vLLM built ({i.detail}).")
        elif i.kind == "argument":
            lines.append(f"The call passes `{i.name}`, which the callee does not take ({i.detail}): the caller and "
                         "the callee come from different releases.")
        elif i.kind == "module":
            lines.append(f"`{i.name}` is not in the installed package ({i.detail}).")
        elif i.kind in ("attribute", "list", "key", "shape"):
            lines.append(f"The failing line reads `{i.name}` ({i.detail}).")
    return list(dict.fromkeys(knobs)), list(dict.fromkeys(lines))  # an input the line reads twice: one sentence


def _knob_lines(knobs: list[str]) -> list[str]:
    return [f"Check `{k}`: the failing line reads it." for k in knobs[:2]]


# ---- no traceback: the words say what failed, not where ----------------------------------------------------------

def _words_only(st: State, atlas: Atlas, cand: Candidate, exc: str, version: str | None) -> Finding | None:
    p = cand.line
    inputs = _device_ids(p.message) + inputs_of(exc, p.message, "")
    whose = _whose_words(st, atlas, cand, exc, inputs, version)
    if whose is not None or not inputs:
        return whose
    module = next((i for i in inputs if i.kind == "module"), None)
    klass = next((i for i in inputs if i.kind == "class"), None)
    if klass is not None:
        return _abstract_class(atlas, cand, exc, klass)
    knobs, lines = _knobs_of(atlas, inputs, version, has_spec(st))
    knobs = list(knobs)
    host = ["device-visibility"] if any(i.name == "CUDA_VISIBLE_DEVICES" for i in inputs) else []
    remediation = list(lines)
    advice: list[Advice] = []
    sources: list[str] = [CUDA_ENV_DOC] if host else []
    missing = _missing_package(module)
    if missing is not None:
        remediation.insert(0, missing[1])
    layout = _what_inputs_say(inputs, remediation, advice, knobs, sources)
    if host:
        remediation.insert(0, "Give vLLM device indices, not UUIDs: set `CUDA_VISIBLE_DEVICES` to `0,1,…` inside the "
                              "container or job (a MIG slice or GPU the scheduler assigned by UUID is relabelled "
                              "0..n-1 there), or let the runtime expose the devices and leave the variable unset.")
    return Finding(
        id=f"words:{exc}:{inputs[0].name}", title=f"{exc}: {inputs[0].name} — {inputs[0].detail}",
        severity="critical", confidence="medium" if host or missing is not None or layout is not None else "low",
        summary=(f"{exc} in Python's own words, with no traceback: the log does not say where it was raised; the "
                 f"message names what failed. " + " ".join(lines)),
        evidence=[quoted(p)], remediation=remediation, sources=sources, priority=45,
        part="platform" if host else ("quantization" if layout is not None else
                                      "model-loading" if "checkpoint" in advice else None),
        inputs=[i.tag for i in inputs],
        knobs=knobs, host=host, advice=advice, deps=[missing[0]] if missing is not None else [],
        owner=owners.of_package(module.name.split(".", 1)[0]).name if missing is not None and module is not None
        else None)


def _what_inputs_say(inputs: list[Input], remediation: list[str], advice: list[Advice], knobs: list[str],
                     sources: list[str]) -> tuple[str, list[str], list[str]] | None:
    """In place, what the named inputs advise: a checkpoint's tensors (and the quantized layout they show, returned),
    a keyword the callee does not take."""
    layout: tuple[str, list[str], list[str]] | None = None
    if any(i.kind == "checkpoint" for i in inputs):
        remediation.append("The checkpoint and this release's loader disagree on its tensors: a later release may "
                           "load this layout (loaders learn new ones: upgrade), or use a checkpoint in a layout this "
                           "release knows (the model card names the vLLM version it was made for).")
        advice += ["upgrade", "checkpoint"]
        layout = next((q for i in inputs if i.kind == "checkpoint" and (q := quantized_layout(i.name))), None)
        if layout is not None:
            remediation.insert(0, layout[0])
            knobs += layout[1]
            sources += layout[2]
    if any(i.kind == "argument" for i in inputs):
        remediation.append("The caller passes an argument what it calls does not take in the installed versions (a "
                           "keyword renamed or removed between releases): change the call in the calling code, or "
                           "install the versions it was written for.")
        advice.append("fix-script")
    return layout


def _missing_package(module: Input | None) -> tuple[str, str] | None:
    """A module of another package that is missing, or lacks a name it should have: that package's install."""
    if module is None or module.name.startswith("vllm"):
        return None
    top = module.name.split(".", 1)[0]
    owner = owners.of_package(top)
    if owner.name in ("vllm", "python", "user-script"):
        return None
    # what to install is the package, named as pip names it (`lmcache`, `torch-npu`), also when its owner is a
    # plugin or has no name of its own
    dep = owner.name if owner.name in owners.LIBRARIES.values() and owner.name != "plugin" else \
        top.lower().replace("_", "-")
    if "." in module.name:
        return dep, (f"`{module.name}` is not in the installed `{top}`: another version of it than this vLLM "
                            f"was built against — install the version vLLM pins (`pip show {top} vllm`).")
    return dep, (f"The module `{top}` is not installed: install it (`pip install {top.replace('_', '-')}`, the "
                        "version this vLLM release pins), or turn off the feature that imports it.")


def _abstract_class(atlas: Atlas, cand: Candidate, exc: str, klass: Input) -> Finding:
    """`Can't instantiate abstract class X with abstract method m`: X and the base that requires `m` come from
    different code — vLLM's own class in a release whose base gained a method it does not implement (a regression
    of that release), or a plugin's class made for another vLLM release."""
    path = atlas.class_file(klass.name)
    owner = "vllm" if path is not None else "plugin"
    where = f"vLLM's `{klass.name}` ({path})" if path else f"`{klass.name}`, a class no vLLM release has (a plugin's?)"
    remediation = ([f"{where} {klass.detail}: in vLLM's own tree, the base changed in this release and the class did "
                    "not follow — pin the release before it, or upgrade to one where they agree (the release notes "
                    "name the fix)."] if path else
                   [f"{where} {klass.detail}: install the plugin's release made for this vLLM, or run without it "
                    f"(`{PLUGIN_ENV}=` empty) to confirm."])
    return Finding(
        id=f"abstract-class:{klass.name}", title=f"{exc}: {klass.name} {klass.detail}",
        severity="critical", confidence="medium" if path else "low",
        summary=f"{exc}: {clip(cand.line.message, 160)}", evidence=[quoted(cand.line)], remediation=remediation,
        sources=[owners.PLUGIN_DOC] if not path else [], priority=42,
        part=atlas.part_of(path) if path else "platform", owner=owner, inputs=[klass.name],
        advice=["pin", "upgrade"] if path else ["disable-plugin"])


# torch's `Module.__getattr__` raises AttributeError for every attribute a module lacks: it only passes on the read
# of the code that called it
_MODULE_GETATTR = re.compile(r"torch/nn/modules/module\.py$")


def _plumbing_only(exc: str, r: Raiser) -> bool:
    """An AttributeError whose only frames are torch's `Module.__getattr__`: the object it names says whose it is."""
    return (exc == "AttributeError" and r.vllm_frame is None
            and _MODULE_GETATTR.search((r.frame.frame_file or "").replace("\\", "/")) is not None)


# vLLM's own compiled extensions (`vllm._C`, `vllm._moe_C`, `vllm._rocm_C`, `vllm.vllm_flash_attn._vllm_fa2_C`): built
# with the wheel, absent from a build for another platform (TPU, CPU, a source tree never compiled)
_VLLM_EXTENSION = re.compile(r"^vllm(?:\.\w+)*\._\w*C$")


def _missing_vllm_extension(cand: Candidate, exc: str, module: Input, version: str | None) -> Finding:
    return Finding(
        id=f"missing-vllm-extension:{module.name}", title=f"vLLM's compiled extension `{module.name}` is not in this "
                                                          "install",
        severity="critical", confidence="medium",
        summary=(f"{exc}: `{module.name}` is built with vLLM's wheel for its platform; a build for another platform "
                 "(TPU, CPU, an out-of-tree platform) or a source checkout that was never compiled has none. Where "
                 "the platform does not use it, vLLM logs this and goes on."),
        evidence=[quoted(cand.line)],
        remediation=[f"Install the vLLM wheel built for this platform (`pip install vllm=={version or 'X'}`), or "
                     "build the source tree (`pip install -e .` compiles it); a source checkout on the path shadows "
                     "the installed wheel when run from its directory."],
        priority=40, part="platform", owner="vllm", inputs=[module.name], deps=["vllm"])


def _whose_words(st: State, atlas: Atlas, cand: Candidate, exc: str, inputs: list[Input],
                 version: str | None) -> Finding | None:
    """Words that name whose code failed: a vLLM module that is not there, a call into vLLM's API it refused."""
    module = next((i for i in inputs if i.kind == "module"), None)
    if module is not None and module.name.startswith("vllm."):
        return _missing_vllm_module(st, cand, exc, module, version)
    call = _api_call(atlas, exc, cand.line.message) if inputs else None
    return _caller_passes(cand, exc, call, inputs[0], version) if call is not None else None


def _aged_caller(atlas: Atlas, cand: Candidate, exc: str, version: str | None) -> Finding | None:
    """A caller outside vLLM passing an engine argument of another release: the caller's age, whatever frame of
    vLLM's raised it."""
    return newer_argument(atlas, cand, exc, version) if cand.line.kind == "exception" else None


def _unframed(atlas: Atlas, cand: Candidate, m: AtlasMatch | None, exc: str, version: str | None) -> Finding | None:
    """A line with no traceback whose own words say whose it is or what to give: the interpreter's sentence quoted
    without its class (a refused call into vLLM's API is still a TypeError), or a refusal no vLLM site words that
    names the setting it needs."""
    p = cand.line
    if p.kind == "loose":
        call = _api_call(atlas, "TypeError", p.message.strip())
        args = inputs_of("TypeError", p.message.strip(), "") if call is not None else []
        return _caller_passes(cand, "TypeError", call, args[0], version) if call is not None and args else None
    newer = newer_argument(atlas, cand, exc, version) if p.kind == "exception" else None
    if newer is not None:
        return newer  # Python's words, whatever site of vLLM's shares them
    if p.kind == "exception" and m is None:
        return _told_setting(atlas, cand, exc, version) or _told_variable(cand, exc)
    if p.kind == "level" and m is None and (p.origin.level or "").upper() in ("ERROR", "CRITICAL"):
        told = _told_variable(cand, "A logged error")
        if told is not None and _plugins_logger(p):
            # vLLM's log prefix on a file no vLLM release has: a plugin logging through vLLM's logger
            told.owner, told.advice = "plugin", ["disable-plugin"]
            told.sources = [owners.PLUGIN_DOC]
        return told
    return None


def _plugins_logger(p: ProblemLine) -> bool:
    hist = load_history()
    name = (p.origin.source_file or "").rsplit("/", 1)[-1]
    return bool(name.endswith(".py")) and hist is not None and not hist.has_file_named(name)


# a refusal that names the environment variable to set in place of the one given (`Please use HIP_VISIBLE_DEVICES
# instead of ROCR_VISIBLE_DEVICES`)
_USE_INSTEAD = re.compile(r"\buse `?(?P<new>[A-Z][A-Z0-9]*_[A-Z0-9_]{2,60})`? instead of `?(?P<old>[A-Z][A-Z0-9]*_"
                          r"[A-Z0-9_]{2,60})`?")


# a refusal that names the environment variable to set and what setting it allows (`Set
# VLLM_ALLOW_INSECURE_SERIALIZATION=1 to allow fallback to pickle-based serialization.`)
_SET_TO = re.compile(r"\b(?:[Ss]et|[Ee]xport) `?(?P<name>[A-Z][A-Z0-9]*_[A-Z0-9_]{2,60})=(?P<value>[\w.:-]{1,40})`? "
                     r"(?P<why>(?:to|if|in order to) [^.;]{3,160})")


_HINT_ONLY = re.compile(r"DEBUG|LOG|VERBOSE|TRACE")
_MORE_TO_SEE = re.compile(r"(?i)\b(?:see|more (?:information|info|details)|details|debug|trace)\b")


def _told_variable(cand: Candidate, exc: str) -> Finding | None:
    hit = _USE_INSTEAD.search(cand.line.message)
    if hit is None:
        return _told_to_set(cand, exc)
    new, old = hit["new"], hit["old"]
    devices = "VISIBLE_DEVICES" in new or "VISIBLE_DEVICES" in old
    finding = _told(cand, new, f"{exc}: the message asks for `{new}` instead of `{old}`",
                    f"{exc} with no traceback; its own words name the environment variable to set (`{new}`) in place "
                    f"of the one this launch set (`{old}`).",
                    f"Set `{new}` (to the value `{old}` held) and unset `{old}`, where the process is started (the "
                    "container's or the job's environment).", inputs=[old], knobs=[new, old])
    if devices:
        finding.part, finding.host = "platform", ["device-visibility"]
    return finding


def _told(cand: Candidate, name: str, title: str, summary: str, remedy: str, inputs: list[str],
          knobs: list[str]) -> Finding:
    """A refusal whose own words name the environment variable to set."""
    return Finding(id=f"told-variable:{name}", title=title, severity="critical", confidence="medium",
                   summary=summary, evidence=[quoted(cand.line)], remediation=[remedy], priority=38, inputs=inputs,
                   knobs=knobs)


def _told_to_set(cand: Candidate, exc: str) -> Finding | None:
    hit = _SET_TO.search(cand.line.message)
    if hit is None or _HINT_ONLY.search(hit["name"]) or _MORE_TO_SEE.search(hit["why"]):
        return None  # a way to see more (a debug or trace switch), not the way out
    name, value, why = hit["name"], hit["value"], " ".join(hit["why"].split())
    return _told(cand, name, f"{exc}: the message asks to set `{name}={value}`",
                 f"{exc} with no traceback; its own words name the environment variable that lets this go on "
                 f"(`{name}={value}`, {why}).",
                 f"Set `{name}={value}` where the process is started (the container's or the job's environment) — "
                 f"{why}: weigh what it relaxes first; the code that sent what was refused is the other fix.",
                 inputs=[name], knobs=[name])


def _told_setting(atlas: Atlas, cand: Candidate, exc: str, version: str | None) -> Finding | None:
    """A refusal no release of vLLM words this way (a wrapper's, a launcher's), with no traceback, that names the vLLM
    setting to give (`you must explicitly provide --kv-transfer-config`): that setting is the input and the fix."""
    said, flags = told_flags(atlas, cand.line.message, version)
    if not flags:
        return None
    return Finding(
        id=f"told:{flags[0]}", title=f"{exc}: the message asks for {', '.join(f'`{f}`' for f in flags)}",
        severity="critical", confidence="medium",
        summary=(f"{exc} with no traceback, in words no vLLM release the atlas read prints (the program that starts "
                 "vLLM, or a plugin, refused the launch); it names the setting it needs."),
        evidence=[quoted(cand.line)], remediation=said, priority=38, inputs=list(flags), knobs=list(flags))


# a call into vLLM's Python API (`LLM.generate()`, `SamplingParams()`) refused for its arguments
_API_CALL = re.compile(r"^(?P<cls>[A-Z]\w{1,60})(?:\.(?P<fn>\w{1,60}))?\(\) (?:got an unexpected keyword argument|"
                       r"missing \d+ required (?:positional|keyword-only) argument|takes \d+ positional argument)")


def _api_call(atlas: Atlas, exc: str, message: str) -> str | None:
    """`Class.method` when the message refuses a call of a class vLLM offers its callers (the offline `LLM`, the
    engines, the parameters), by the file the atlas knows the class from."""
    hit = _API_CALL.match(message) if exc == "TypeError" else None
    path = atlas.class_file(hit["cls"]) if hit is not None else None
    if hit is None or path is None or not path.startswith(API_FILES):
        return None
    return f"{hit['cls']}.{hit['fn']}" if hit["fn"] else hit["cls"]


def _caller_passes(cand: Candidate, exc: str, call: str, arg: Input, version: str | None) -> Finding:
    """A call into vLLM's API that this release refuses, with no traceback below it: the caller's code passes what
    the API of this release does not take (an argument renamed or removed between releases)."""
    return Finding(
        id=f"api-call:{call}", title=f"Your code calls `{call}()` in a way this vLLM release does not take",
        severity="critical", confidence="medium",
        summary=(f"{exc}: `{call}()` is vLLM's API, called by the program that uses vLLM; the release installed"
                 + (f" ({version})" if version else "") + f" does not take `{arg.name}` there. Arguments of the "
                 "offline and engine APIs are renamed and removed between releases."),
        evidence=[quoted(cand.line)],
        remediation=[f"Change the call to what this release's `{call}()` takes (its docstring, or the release notes "
                     "of the release that changed it), or pin the vLLM release the code was written for."],
        priority=38, part="entrypoint", owner="user-script", inputs=[arg.name], advice=["fix-script"])


# Python's words for a package that imports from itself while it is still being imported: vLLM's own code, run from
# a `vllm/` folder that is not the installed package (the source checkout, or a `vllm.py` beside the script)
_SELF_IMPORT = re.compile(r"from partially initialized module 'vllm'")


def _source_tree_shadows(cand: Candidate, exc: str, module: Input) -> Finding:
    return Finding(
        id=f"vllm-source-tree-shadows:{module.name}", title="vLLM is imported from a folder that is not the installed "
                                                             f"package (its `{module.name}` is missing there)",
        severity="critical", confidence="medium",
        summary=(f"{exc}: `vllm` was still being imported when its own code asked it for `{module.name}` (Python: "
                 "\"partially initialized module 'vllm'\"). The `vllm` Python found first is a folder without the "
                 "installed package's compiled modules: the source checkout, when the program runs from its root, or "
                 "a `vllm.py` / `vllm/` beside the script."),
        evidence=[quoted(cand.line)],
        remediation=["Run the program from another directory (or rename a local `vllm.py` / `vllm/`), so the "
                     "installed vLLM is imported; to use the checkout itself, build it in place (`pip install -e .`)."],
        priority=38, part="platform", owner="user-script", inputs=[module.name], advice=["fix-script"])


def _one_release(version: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        Version(version)
    except InvalidVersion:
        return False
    return True


def _missing_vllm_module(st: State, cand: Candidate, exc: str, module: Input,
                         version: str | None) -> Finding | None:
    """`No module named 'vllm.x.y'`: code written for another vLLM release imports a module this one does not
    have — a plugin, a KV connector or the user's program, since vLLM's own modules import what they ship."""
    if _VLLM_EXTENSION.match(module.name):
        return _missing_vllm_extension(cand, exc, module, version)
    if any(_SELF_IMPORT.search(q.message) for q in st.ev.parsed.problems):
        return _source_tree_shadows(cand, exc, module)
    hist = load_history()
    path = "vllm/" + module.name.split(".", 1)[1].replace(".", "/") if "." in module.name else None
    rels: list[str] = []
    if hist is not None and path is not None:
        rels = hist.module_releases(path + ".py") or hist.module_releases(path + "/__init__.py")
    first = rels[0] if rels else None
    version = version if version and _one_release(version) else None  # a range (`>=0.25.0`) names no one release
    upgrade = bool(version and first and newer(first, version))
    # vLLM removed it: the last release read that has it is older than the user's (or than the newest read)
    newest = hist.releases[-1] if hist is not None and hist.releases else None
    last = rels[-1] if rels else None
    removed = bool(last and (newer(version, last) if version else newest is not None and newer(newest, last)))
    where = (f" It exists in vLLM {rels[0]}–{rels[-1]}" + (f", not in {version}" if version else "")
             + (f": vLLM removed it after {last}" if removed else "") + "." if rels else "")
    remediation = [f"A package built for another vLLM release imports `{module.name}`: a plugin or KV connector "
                   "(an out-of-tree platform, a KV-cache connector), an application that runs vLLM, or your own "
                   f"code. Install the release of that package made for vLLM {version or '(your version)'}"
                   + (f", or upgrade vLLM to {first} or later" if upgrade else "")
                   + (f", or pin vLLM to {last}, the last release that has it" if removed else "") + ".",
                   f"To confirm, run without it: `{PLUGIN_ENV}=` (empty) for general plugins, or drop the connector "
                   "from `--kv-transfer-config`."]
    advice: list[Advice] = ["disable-plugin", "upgrade"] if upgrade else ["disable-plugin"]
    if removed:
        advice.append("pin")
    return Finding(
        id=f"missing-vllm-module:{module.name}", title=f"Code built for another vLLM release imports {module.name}",
        severity="critical", confidence="medium",
        summary=f"{exc}: the installed vLLM has no `{module.name}`.{where}", evidence=[quoted(cand.line)],
        remediation=remediation, sources=[owners.PLUGIN_DOC], priority=40, part="platform", owner="plugin",
        inputs=[module.name], advice=advice)
