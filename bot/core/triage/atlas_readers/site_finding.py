"""The finding for a line the atlas placed: at the site whose template it matched, or — a message the atlas does
not hold — at the innermost frame of its traceback. How bad it is, where, why, and what to change."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import gpus, owners
from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.attention_backend import selector_settings
from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.env_vars import TIMEOUT_LEAD, component_env, env_vars, timeout_vars
from bot.core.triage.atlas_readers.host import has_spec
from bot.core.triage.atlas_readers.line_history import history_fix, history_of
from bot.core.triage.atlas_readers.location import PART_TITLES, SPEC_PARTS, module_part, site_ref
from bot.core.triage.atlas_readers.model_given import flag_for, refused_model
from bot.core.triage.atlas_readers.named_in_words import apply_named, named_in_words
from bot.core.triage.atlas_readers.quoting import clip, frame_line, quoted, short_path
from bot.core.triage.atlas_readers.refused_input import REQUEST_FILES, caller_type_check, refused_input
from bot.core.triage.atlas_readers.releases import frames_release
from bot.core.triage.atlas_readers.told import told_flags, told_in
from bot.core.triage.findings import Confidence, Finding, Severity
from bot.core.triage.frames import generic_words
from bot.core.triage.remedy import CLIENT_FILES, Remedy, benchmark_reads_server

if TYPE_CHECKING:
    from bot.core.atlas import Atlas, AtlasMatch, Site
    from bot.core.triage.detectors.state import State
    from bot.core.triage.findings import Advice

_FLAG_IN_TEXT = re.compile(r"(?<![\w-])(--[a-z][a-z0-9]+(?:-[a-z0-9]+)*)")
_PACKAGE_NAMES = {"vllm": "vLLM", "huggingface_hub": "huggingface_hub", "transformers": "transformers"}


def site_finding(st: State, atlas: Atlas, cand: Candidate, m: AtlasMatch | None,
                 inner: tuple[ProblemLine, Site | None] | None, version: str | None,
                 gpu: gpus.Gpu | None) -> Finding:
    """`inner` is the traceback's innermost frame the atlas reads; without a match, the finding is placed there."""
    p = cand.line
    severity, confidence, stopped = _in_context(st, p, m)
    part, fid = _part_and_id(atlas, p, m, inner)
    what = _remedies_of(st, atlas, cand, m, part, gpu, severity, version)
    remediation, knobs, advice, refused_inputs = what.remediation, what.knobs, what.advice, what.inputs
    timed_out = any(r.startswith(TIMEOUT_LEAD) for r in remediation)  # its own variable goes before any switch
    evidence = [quoted(p)] + ([frame_line(inner[0])] if inner is not None else [])
    # the settings the site's check reads are the inputs it refused (a refusal), beside what the message names
    inputs = [k for k in knobs if m is not None and m.site.kind == "raise"] + refused_inputs
    if m is not None and gpus.required_capability(m.site.condition, m.site.template):
        inputs.append("gpu")
    switch = _switched(p, m, inner, version or _frames_release(st, cand, inner), remediation, knobs, inputs,
                       own_fix=bool(refused_inputs) or timed_out) if severity == "critical" else None
    part, every_backend = _backend_selection(atlas, p, m, part, knobs, remediation, version)
    if every_backend:
        switch = _no_other_backend(switch, remediation, knobs)
    finding = Finding(id=fid, title=_title(p, part, m), severity=severity, confidence=confidence,
                   summary=summary(m, inner, part, version), evidence=evidence, remediation=remediation,
                   sources=[m.url] if m is not None else [], is_bug=False, priority=40, part=part, knobs=knobs,
                   advice=advice, site=site_ref(m) if m is not None else None, inputs=inputs,
                   owner=_owner(m, inner), deps=what.deps)
    finding.switch = switch
    finding.summary += _ENDED_BY.get(stopped or "", "")
    _printed_elsewhere(atlas, finding, p, m)
    _v0_already(st, p, finding)
    _transformers_fallback(st, finding, p)
    if m is not None and m.rivals:
        finding.summary += (f" The same sentence is raised in {', '.join(f'`{r}`' for r in m.rivals[:3])} as well: "
                            "the line alone does not say which (a traceback would).")
    if severity in ("critical", "warning"):
        _words_of(st, finding, p, m, inner, part)
    if m is None and inner is not None and severity == "critical" and finding.owner == "vllm":
        # placed by its innermost frame: what the code's history says of the line that raised comes first
        said, then = history_fix(history_of(inner[0], version), inner[0], version, True) \
            if inner[0].source else ([], [])
        finding.remediation[:0] = said
        finding.advice = list(dict.fromkeys([*then, *finding.advice]))
    if m is not None and m.site.package != "vllm" and severity != "info":
        # a library raised it while vLLM called it: that library's installed version is one thing to change
        finding.deps = list(dict.fromkeys([*finding.deps, owners.of_package(m.site.package).name]))
        _argument_refused(finding, _frames_of(st, cand), cand.line.message, m)
    return finding


def _words_of(st: State, finding: Finding, p: ProblemLine, m: AtlasMatch | None,
              inner: tuple[ProblemLine, Site | None] | None, part: str) -> None:
    """What the message's own words name (packages, host changes, settings); a refused `--model` value first."""
    function = m.site.function if m is not None else (inner[0].frame_function if inner is not None else None)
    # (the refusal named the value given only where it was not a request's: its flag is then among the inputs)
    model = refused_model(m) if m is not None else None
    flag = flag_for(model, st.ev.context.drafter, st.ev.context.target_model) if model is not None else None
    flag = flag if flag in finding.inputs else None
    trusted = any(c.kind == "args" and isinstance(c.value, dict) and c.value.get("trust_remote_code") is True
                  for c in st.ev.parsed.clues)
    apply_named(finding, named_in_words(f"{p.message} {m.site.template if m is not None else ''}", function,
                                        part, model_refused=flag is not None, trusted=trusted))
    if flag is not None:  # the value given is what the check refused: its flag first
        finding.inputs = [flag, *(i for i in finding.inputs if i != flag)]
        finding.knobs = [flag, *(k for k in finding.knobs if k != flag)]


# the V0 engine's own process (MQLLMEngine): vLLM runs it only with V1 off. (`llm_engine.py` is no proof: in 0.8–0.10
# its `from_engine_args` is where V1 is chosen, and an argument check refusing V1 passes through it.)
_V0_ENGINE = ("vllm/engine/multiprocessing/",)
_SUGGESTS_V0 = re.compile(r"\bVLLM_USE_V1\s*=\s*0\b")


def _v0_already(st: State, p: ProblemLine, finding: Finding) -> None:
    """A message that itself suggests `VLLM_USE_V1=0` in a log whose tracebacks run in the V0 engine's own process
    (and never in V1's): the suggestion is already in effect — it is no fix here."""
    from bot.core.parts import repo_path

    if "VLLM_USE_V1" not in finding.knobs or _SUGGESTS_V0.search(p.message) is None:
        return
    paths = [repo_path(q.frame_file or "") or "" for q in st.ev.parsed.problems if q.kind == "frame"]
    if not any(x.startswith(_V0_ENGINE) for x in paths) or any(x.startswith("vllm/v1/") for x in paths):
        return
    finding.knobs = [k for k in finding.knobs if k != "VLLM_USE_V1"]
    finding.inputs = [k for k in finding.inputs if k != "VLLM_USE_V1"]
    finding.remediation = [r for r in finding.remediation if "VLLM_USE_V1" not in r]
    finding.summary += (" The tracebacks run in the V0 engine (vllm/engine/), never in V1's: `VLLM_USE_V1=0`, which "
                        "the message suggests, is already in effect.")


# a process reported dead by a negative exit code (multiprocessing's: killed by that signal) of SIGTERM, 15
_SIGTERM = re.compile(r"\bexit ?code:? ?-15\b|\bdied\b.{0,80}\bsignal 15\b")


# what a line reporting an end another failure caused adds to its summary
_ENDED_BY = {"sigterm": " The process was ended by SIGTERM (exit code -15), the signal vLLM's own shutdown sends its "
                        "workers once another failure ends the engine: that earlier failure is likely the cause, not "
                        "this line.",
             "died": " It reports a process's death after a failure of the same launch printed above it: that "
                     "failure is likely the cause, not this line."}


def _no_other_backend(switch: str | None, remediation: list[str], knobs: list[str]) -> str | None:
    """In place: every backend the platform has refused the configuration — another backend is no way out, so its
    switch is not offered."""
    if switch is not None and switch in remediation:
        remediation.remove(switch)
        knobs[:] = [k for k in knobs if f"`{k}" not in switch]  # the switch's own (a flag, or the variable)
        return None
    return switch


# a process reported dead with the status it exited with (vLLM's worker monitor: `Worker … died, exit code: 1`) — a
# status, not a signal: a negative code is the signal that killed it (-9: the kernel's OOM killer), a cause of its own
_DIED = re.compile(r"\bdied\b.{0,80}\bexit ?code:? ?\d", re.IGNORECASE)


def _died_after_failure(st: State, p: ProblemLine) -> bool:
    """A process reported dead with an exit status after a failure of the same launch printed above it — an
    exception Python did not ignore and no request's, or a lower layer's error found critical (a CUDA error): the
    report of the death says only that the failure ended it."""
    from bot.core.triage.evidence import latest_launch, position

    if p.kind == "exception" or _DIED.search(p.message) is None:
        return False
    at, start = position(p.origin), latest_launch(st.ev.parsed)
    return _raised_before(st, p) or any(
        f.severity == "critical" and f.id.startswith("below:") and f.at is not None and start <= f.at < at
        for f in st.findings)


def _raised_before(st: State, p: ProblemLine) -> bool:
    """An exception of the same launch before the line: not one Python ignored, not a request the server refused and
    went on from."""
    from bot.core.triage.evidence import latest_launch, position

    at, start, ignored = position(p.origin), latest_launch(st.ev.parsed), st.ev.parsed.ignored
    return any(q.kind == "exception" and start <= position(q.origin) < at and q.traceback_id not in ignored
               and not _request_path(st, q) for q in st.ev.parsed.problems)


def _stopped_by_shutdown(st: State, p: ProblemLine) -> bool:
    """A worker ended by SIGTERM after an exception of the same launch that ended the engine (not one Python ignored,
    not a request the server refused and went on from): likely the shutdown vLLM sends after that failure, a
    consequence. SIGTERM from outside (a scheduler stopping the pod) looks the same, so with no such exception before
    it the line stands (SIGKILL, -9, is another matter: the kernel's OOM killer sends it)."""
    if p.kind == "exception" or _SIGTERM.search(p.message) is None:
        return False
    return _raised_before(st, p)


def _request_path(st: State, exc: ProblemLine) -> bool:
    """An exception whose traceback ran through the API server's request handling: one request refused, the
    server went on."""
    from bot.core.parts import repo_path

    return exc.traceback_id is not None and any(
        q.kind == "frame" and q.traceback_id == exc.traceback_id
        and REQUEST_FILES.search(repo_path(q.frame_file or "") or "") is not None for q in st.ev.parsed.problems)


# a library's own words for an argument it does not take (`Kwargs ['x'] are not supported by …`)
_ARGUMENT_REFUSED = re.compile(r"(?i)\bkwargs?\b.{0,200}\bnot (?:supported|accepted|allowed)\b|"
                               r"\bunexpected keyword argument\b")


def _frames_release(st: State, cand: Candidate, inner: tuple[ProblemLine, Site | None] | None) -> str | None:
    """The release the line's traceback (or, for a line printed apart, the innermost frame's) fits."""
    frames = _frames_of(st, cand)
    if not frames and inner is not None and inner[0].traceback_id is not None:
        frames = [q for q in st.ev.parsed.problems if q.kind == "frame" and q.traceback_id == inner[0].traceback_id]
    return frames_release(frames)


def _frames_of(st: State, cand: Candidate) -> list[ProblemLine]:
    """The line's frames; for an exception line printed alone (a summary above its traceback), those of the
    traceback that ends in the same exception and message."""
    if cand.frames:
        return list(cand.frames)
    p = cand.line
    problems = st.ev.parsed.problems
    same = next((q for q in problems if q is not p and q.kind == "exception" and q.traceback_id is not None
                 and q.exception == p.exception and q.message == p.message), None)
    return [] if same is None else [q for q in problems if q.kind == "frame" and q.traceback_id == same.traceback_id]


def _argument_refused(finding: Finding, frames: list[ProblemLine], message: str, m: AtlasMatch) -> None:
    """In place: a library refusing an argument vLLM's own code passed it (a vLLM frame calls it) — the two installs
    were not made for each other: vLLM's release and the library's version are the fix, whichever moves."""
    if not _ARGUMENT_REFUSED.search(message):
        return
    caller = next((f for f in reversed(frames) if (o := owners.of_path(f.frame_file or "")) is not None
                   and o.name == "vllm"), None)
    if caller is None:
        return
    library = _PACKAGE_NAMES.get(m.site.package, m.site.package)
    finding.remediation.insert(0, f"vLLM's own code ({short_path(caller.frame_file or '')} in "
                                  f"`{caller.frame_function}`) passes {library} an argument this {library} refuses — "
                                  f"unless the request itself sent it (a chat template's keyword arguments are passed "
                                  f"on): then the two installs were not made for each other. Upgrade vLLM to a release "
                                  f"made for this {library}, or install the {library} version your vLLM release "
                                  f"requires (`pip show vllm {m.site.package}`).")
    finding.advice = list(dict.fromkeys([*finding.advice, "upgrade", "pin"]))


# a template's field (`{module_name}`, quoted or not) as a value fills it: the interpreter's wording is judged on
# the sentence the site prints (`No module named {module_name}` is Python's `No module named 'x'`); a field may be a
# name or a number (`index {i} is out of bounds … with size {n}`), so both fillings are judged
_FIELD = re.compile(r"'?\{[^{}]{0,80}\}'?")


def _python_words(exc: str, template: str) -> bool:
    return any(generic_words(exc, _FIELD.sub(value, template)) for value in ("'x'", "0"))


def _weighed(p: ProblemLine, m: AtlasMatch | None) -> tuple[Severity, Confidence]:
    if m is not None and p.kind == "exception" and generic_words((p.exception or "").rsplit(".", 1)[-1], p.message):
        # the line is in the interpreter's own words (a library may print them too): words place no site, a note
        return "info", "low"
    severity, confidence = weight(p, m)
    if m is not None and m.site.exc and _python_words(m.site.exc.rsplit(".", 1)[-1], m.site.template):
        # the interpreter's own words (`list index out of range`), raised by any code: they name no site alone
        confidence = "low"
    if p.kind == "frame" and m is not None and not _WRAPPER_RE.search(m.site.template):
        # the exception line is cut, and the `raise` under the last frame opens this site's sentence, in its own file
        # and function: the code says which check it was, though not the whole message (placed by the frame's line
        # alone, with no code under it, the frame may be a call that raised deeper: low)
        confidence = "medium" if (p.source or "").strip() else "low"
    if m is not None and _another_packages_class(p, m.site.package, m.site.exc):
        # `openai_harmony.HarmonyError: …` matched to a huggingface_hub site: the class says whose error it is
        confidence = "low"
    return severity, confidence


# an exception printed with its module path (`openai_harmony.HarmonyError: …`): the package that defines the class
_QUALIFIED_CLASS = re.compile(r"(?:^|\s)(?P<pkg>[a-z_][a-z0-9_]{2,40})\.(?:[A-Za-z_]\w*\.){0,6}(?P<cls>[A-Z]\w*"
                              r"(?:Error|Exception)):")


def _another_packages_class(p: ProblemLine, package: str, exc: str | None) -> bool:
    """A library's site matched by its words, while the exception's class — not the one the site raises — is
    defined by another package (its module path says which). vLLM's own sites are reached through any carrier
    (pydantic's validation, torch's errors), so they are not judged so."""
    from bot.core import owners

    hit = _QUALIFIED_CLASS.search(p.origin.text or "")
    if package == "vllm" or hit is None or hit["pkg"] in ("builtins", "torch", package.replace("-", "_")) \
            or (exc or "").rsplit(".", 1)[-1] == hit["cls"]:
        return False
    owner = owners.of_package(hit["pkg"])
    return owner.name not in ("python", owners.of_package(package).name)


def _switched(p: ProblemLine, m: AtlasMatch | None, inner: tuple[ProblemLine, Site | None] | None,
              version: str | None, remediation: list[str], knobs: list[str], inputs: list[str], *,
              own_fix: bool = False) -> str | None:
    """The switch to try first, added (in place) to the remedies and knobs: the attention backend a check refused
    (then also the input), else the part the traceback ended in — after the check's own setting, and then not
    the plan's first step, when the check reads one."""
    backend = _backend_switch(m, p, version) or _engine_switch(m, version)
    if backend is not None:
        inputs.append(backend[1])
        remediation.insert(0, backend[0])
        knobs.append(backend[1])
        return backend[0]
    switch = _site_switch(m, version) if _site_deeper(inner, m) else None
    switch = switch or _switch(inner, version) or _site_switch(m, version)
    if switch is None:
        return None
    knobs.append(switch[1])
    if own_fix or (m is not None and m.knobs and m.site.kind == "raise"):
        # a check that reads a setting of its own (a timeout's variable, a limit's flag), or a message naming the
        # setting to give: that setting is the first thing to change; turning the whole part off is said after it
        remediation.append(switch[0])
        return None
    remediation.insert(0, switch[0])
    return switch[0]


def _remedies_of(st: State, atlas: Atlas, cand: Candidate, m: AtlasMatch | None, part: str, gpu: gpus.Gpu | None,
                 severity: Severity, version: str | None) -> Remedy:
    """What to change (remedies, knobs, kinds of advice, packages) and the inputs a refusal refused: from the part,
    the env vars the line names, the proposer, the message's own words and what it refuses — the most specific
    first."""
    p = cand.line
    remediation, knobs, advice = remedies(st, m, part, gpu)
    env_fix, env_knobs = env_vars(atlas, cand, version)
    if not env_knobs and m is not None and m.site.package == "vllm" and severity == "critical":
        # the component's variables, guessed from its file's name: a place to look, said but not claimed as the fix
        env_fix = component_env(atlas, m.site.file, version)[0]
    timed = timeout_vars(atlas, m.site.file, p.message, version) \
        if not env_knobs and m is not None and m.site.package == "vllm" and severity == "critical" else ([], [])
    if timed[1]:  # a wait of vLLM's that ran out: its own variable, which the atlas's help text names
        env_fix, env_knobs = timed
    remediation = env_fix + remediation
    knobs += [k for k in env_knobs if k not in knobs]
    if severity == "critical" and _proposer_crash(st, part):
        remediation.append("Meanwhile, a smaller `num_speculative_tokens` (1 drafts one position and skips the "
                           "multi-step drafting path) is the usual way around a crash inside the proposer, at the "
                           "cost of some speedup; then report the traceback upstream.")
        advice.append("lower-k")
    said, said_advice, said_knobs = told_in(p.message if m is None else f"{m.site.template} {p.message}", has_spec(st))
    flag_said, flags = told_flags(atlas, p.message, version) if severity != "info" else ([], [])
    remediation = flag_said + said + remediation
    advice += [a for a in said_advice if a not in advice]
    knobs += [k for k in [*flags, *said_knobs] if k not in knobs]
    models = (st.ev.context.drafter, st.ev.context.target_model)
    refused = refused_input(atlas, m, p.message, version, models) if m is not None and severity != "info" else None
    if refused is None:
        return Remedy(remediation=remediation, advice=advice, knobs=knobs, inputs=flags)
    advice += [a for a in refused.advice if a not in advice]
    knobs += [k for k in refused.knobs if k not in knobs]
    return Remedy(remediation=refused.remediation + remediation, advice=advice, knobs=knobs, deps=refused.deps,
                  inputs=list(dict.fromkeys([*refused.inputs, *flags])))


# a check that picks or refuses the attention backend (`get_attn_backend_cls`, `Selected backend
# AttentionBackendEnum.ROCM_ATTN is not valid …`): whatever frame it was reached from, the backend is what it judged
_BACKEND_SITE = re.compile(r"attn_backend|attention_backend|AttentionBackendEnum\.\w+|[Ss]elected backend")
# a refusal naming the backend by its enum (`Qwen2-VL does not support _Backend.FLASHINFER backend now`): whatever part
# raised it (a model's own check), the backend that was selected is what it refused
_BACKEND_NAMED = re.compile(r"\b(?:_Backend|AttentionBackendEnum)\.[A-Z][A-Z0-9_]+")


def _backend_switch(m: AtlasMatch | None, p: ProblemLine, version: str | None) -> tuple[str, str] | None:
    from bot.core import switches

    if m is None or not (_BACKEND_NAMED.search(p.message) or (m.site.part in ("attention", "platform") and (
            _BACKEND_SITE.search(m.site.function) or _BACKEND_SITE.search(p.message)))):
        return None
    sw = switches.by_id("attention-backend")
    return sw.offer(version) if sw is not None else None


# a refusal in the V1 engine's own words ("vLLM V1 does not support per request user provided logits processors"):
# what it refuses is the V1 engine's gap, and the engine is the setting (where the release still has V0)
_V1_REFUSAL = re.compile(r"\bV1\b[^.]{0,60}?\b(?:does not|doesn't|do not|cannot|not yet|not) (?:yet )?support|"
                         r"\bnot (?:yet )?supported (?:in|by|on|with) (?:the )?(?:vLLM )?V1\b")


def _engine_switch(m: AtlasMatch | None, version: str | None) -> tuple[str, str] | None:
    from bot.core import switches

    if m is None or not _V1_REFUSAL.search(m.site.template):
        return None
    sw = switches.by_id("v1-engine")
    return sw.offer(version) if sw is not None else None


def _site_switch(m: AtlasMatch | None, version: str | None) -> tuple[str, str] | None:
    """Without a traceback, the switch for the part whose file raised the message (vLLM's compile backend raising
    "vLLM failed to compile the model": torch.compile off)."""
    from bot.core import switches

    if m is None or m.site.package != "vllm" or m.site.kind != "raise":
        return None
    # the function's whole name: its class says the part (`FlashAttentionImpl.__init__`) where the method does not
    sw = switches.for_frame(m.site.file, m.site.function)
    return sw.offer(switches.release_hint(version, m.site.file)) if sw is not None else None


def _backend_selection(atlas: Atlas, p: ProblemLine, m: AtlasMatch | None, part: str, knobs: list[str],
                       remediation: list[str], version: str | None) -> tuple[str, bool]:
    """The selection of the attention backend refusing (in place: the settings of the configuration it judged):
    the attention part's choice, whatever file holds it; and whether every backend refused it."""
    if m is None or not _BACKEND_SITE.search(m.site.function):
        return part, False
    judged, why = selector_settings(atlas, p.message, version)
    knobs += [k for k in judged if k not in knobs]
    remediation[:0] = [why] if why else []
    return ("attention" if part == "platform" else part), bool(judged)


def _site_deeper(inner: tuple[ProblemLine, Site | None] | None, m: AtlasMatch | None) -> bool:
    """A traceback cut above the raise (the engine's frames, then vLLM's check's own sentence): the check's file is
    deeper than the last frame shown, and its part's switch is the narrower one (the table lists the narrow before the
    broad: an attention backend's before the whole V1 engine's)."""
    from bot.core import switches
    from bot.core.parts import repo_path

    if inner is None or m is None or m.site.package != "vllm" or m.site.kind != "raise":
        return False
    path = repo_path(inner[0].frame_file or "")
    if not path or path == m.site.file:
        return False
    table = switches.load_switches()
    at_frame = switches.for_frame(path, inner[0].frame_function)
    at_site = switches.for_frame(m.site.file, m.site.function)
    return at_site is not None and (at_frame is None or table.index(at_site) < table.index(at_frame))


def _switch(inner: tuple[ProblemLine, Site | None] | None, version: str | None) -> tuple[str, str] | None:
    """The switch for the part the traceback ended in (turn it off to prove it), with the knob it turns."""
    from bot.core import switches
    from bot.core.parts import repo_path

    if inner is None:
        return None
    path = repo_path(inner[0].frame_file or "")
    sw = switches.for_frame(path, inner[0].frame_function) if path else None
    return sw.offer(switches.release_hint(version, path)) if sw is not None else None


def _printed_elsewhere(atlas: Atlas, finding: Finding, p: ProblemLine, m: AtlasMatch | None) -> None:
    """vLLM's logger format, printed from a file no release of vLLM has: a plugin's line (plugins log through
    vllm.logger) whose words only resemble a site of vLLM's — the words do not place it."""
    printer = p.origin.source_file
    if m is None or p.kind == "exception" or not printer or atlas.knows_file(printer) \
            or m.site.file.rsplit("/", 1)[-1] == printer.rsplit("/", 1)[-1]:
        return
    finding.confidence, finding.owner = "low", "plugin"
    finding.title = (f"{(p.origin.level or 'A line').upper()} from `{printer}`, a file no vLLM release has (a "
                     f"plugin's?): {clip(p.message, 90)}")
    finding.summary = (f"The line was printed from `{printer}`, which no vLLM release the atlas reads has: most likely "
                       "a vLLM plugin or out-of-tree platform logging through vLLM's logger. Its words resemble vLLM's "
                       f"{m.site.file} ({m.site.function}), which is not where it came from.")


def _owner(m: AtlasMatch | None, inner: tuple[ProblemLine, Site | None] | None) -> str | None:
    """Who owns the code that printed the line: the site's package, else the innermost frame's."""
    if m is not None:
        return owners.of_package(m.site.package).name
    if inner is not None:
        o = owners.of_path(inner[0].frame_file or "")
        return o.name if o is not None else None
    return None


# the architectures a model check names (`Model architectures ['TransformersModel'] failed to be inspected`)
_ARCHS_NAMED = re.compile(r"Model architectures? \[(?P<archs>[^\[\]]{1,400})\]")


def _transformers_fallback(st: State, finding: Finding, p: ProblemLine) -> None:
    """A model check naming only vLLM's own Transformers-backend classes (`TransformersModel`,
    `TransformersForCausalLM`) when no one asked for that backend: vLLM has no implementation of the checkpoint's
    architecture and took its Transformers backend, whose module then failed to import or inspect — so turning vLLM's
    own implementation off is no test (it was never on)."""
    hit = _ARCHS_NAMED.search(p.message)
    archs = re.findall(r"'(\w{1,80})'", hit["archs"]) if hit else []
    if not archs or not all(a.startswith("Transformers") for a in archs):
        return
    asked = any(c.kind == "args" and isinstance(c.value, dict) and str(c.value.get("model_impl", "")) == "transformers"
                for c in st.ev.parsed.clues)
    if asked:
        return  # the backend was the user's choice: their `--model-impl` is the setting to weigh, kept
    finding.remediation = [r for r in finding.remediation if "--model-impl transformers" not in r]
    finding.knobs = [k for k in finding.knobs if k != "--model-impl"]
    finding.switch = None
    finding.remediation.insert(0, "vLLM named its own Transformers backend (" + ", ".join(f"`{a}`" for a in archs)
                               + "): it took that backend for an architecture it has no implementation of, and the "
                               "backend's module failed to import or inspect (the lines above say why — often the "
                               "installed transformers). Install the transformers release this vLLM pins; if the "
                               "architecture is one the backend cannot run (an encoder-decoder), serve a checkpoint "
                               "of an architecture vLLM lists as supported, or a release that adds this one.")
    finding.advice = list(dict.fromkeys([*finding.advice, "checkpoint", "upgrade"]))
    finding.deps = list(dict.fromkeys([*finding.deps, "transformers"]))


def _part_and_id(atlas: Atlas, p: ProblemLine, m: AtlasMatch | None,
                 inner: tuple[ProblemLine, Site | None] | None) -> tuple[str, str]:
    if m is not None:
        return _drafters_loader(atlas, p, m) or m.site.part, f"atlas:{m.site.id}"
    assert inner is not None
    frame, frame_site = inner
    part = frame_site.part if frame_site else atlas.part_of(frame.frame_file or "", frame.frame_function)
    if p.kind == "frame":
        part = _callee_part(atlas, frame) or part
    return (module_part(p.origin.text) or part,
            f"atlas-frame:{short_path(frame.frame_file or '')}:{frame.frame_function}")


# the last printed frame's line constructing a class (`self.x = StructuredOutputManager(vllm_config)`)
_CALLED_CLASS = re.compile(r"(?:=|\breturn\b|^)\s*(?:[\w.]+\.)?(?P<cls>[A-Z][A-Za-z0-9]{2,80})\(")


def _callee_part(atlas: Atlas, frame: ProblemLine) -> str | None:
    """A traceback cut before its exception whose last frame builds one of vLLM's classes: it failed inside that
    class, in the part of the file that defines it."""
    from bot.core.history import load_history

    called = _CALLED_CLASS.search(frame.source or "")
    hist = load_history() if called is not None else None
    file = hist.file_of_class(called.group("cls")) if hist is not None and called is not None else None
    return atlas.part_of(file) if file else None


# a generic loader naming the model class it loads into (`There is no module or parameter named 'x' in Foo`)
_DRAFTER_CLASS = re.compile(r"Eagle|DFlash|MTP|Mtp|Medusa|Speculator|Draft")
_INTO_CLASS = re.compile(r"\b(?:in|[Mm]odel class) (?P<cls>[A-Z][A-Za-z0-9]+)\b")


def _drafters_loader(atlas: Atlas, p: ProblemLine, m: AtlasMatch) -> str | None:
    """vLLM's shared weight loader failing for a model class that is a drafter's: the drafter is the part at fault."""
    if m.site.part != "model-loading":
        return None
    hit = _INTO_CLASS.search(p.message)
    if hit is None:
        return None
    path = atlas.class_file(hit["cls"])
    if path is not None:
        return "drafter" if atlas.part_of(path) == "drafter" else None
    # a class no release the atlas reads has: its name, by the words vLLM names its drafters' files with
    return "drafter" if _DRAFTER_CLASS.search(hit["cls"]) else None


def _title(p: ProblemLine, part: str, m: AtlasMatch | None = None) -> str:
    where = PART_TITLES.get(part, part)
    if p.kind == "frame" and m is not None and not _WRAPPER_RE.search(m.site.template):
        how = "opens it" if (p.source or "").strip() else "is this function's only raise at that line in your release"
        return (f"{m.site.exc or 'An exception'} from {where}: {clip(m.site.template, 80)} (its exception line is cut; "
                f"the `raise` under {short_path(p.frame_file or '')}:{p.frame_line} {how})")
    if p.kind == "frame":
        return (f"A traceback ending in {where} ({short_path(p.frame_file or '')} in "
                f"{p.frame_function}); its exception line is not in the log")
    what = p.exception or (p.origin.level or "line").upper()
    return f"{what} from {where}: {clip(p.message, 90)}"


def _proposer_crash(st: State, part: str) -> bool:
    """A crash inside the proposer with k known to be more than 1: a smaller k skips the multi-step path."""
    return part in SPEC_PARTS and has_spec(st) and (st.ev.context.num_speculative_tokens or 0) > 1


# messages that report a failure elsewhere (a wrapper: "see root cause above", a process that did not start): true,
# and no cause
_WRAPPER_RE = re.compile(r"root cause|see (?:the )?(?:above|stack ?trace|log)|failed to start|initiali[sz]ation failed|"
                         r"Failed core proc|died unexpectedly|worker failed|background loop|has errored|"
                         r"exception in worker|engine core (?:proc|process)|encountered a fatal error|"
                         r"hit an exception", re.IGNORECASE)


def weight(p: ProblemLine, m: AtlasMatch | None) -> tuple[Severity, Confidence]:
    if p.kind == "frame":  # a traceback is something raised, whether or not its last line survived
        return "critical", "low"
    severity = _severity(p, m)
    if m is None or not m.exact:
        return severity, "low"
    if _WRAPPER_RE.search(m.site.template):
        return severity, "low"  # it says a failure happened; the line it points at says why
    if m.rivals:
        return severity, "medium"  # the same sentence is raised in another file as well: the words do not say which
    if m.site.file.startswith("csrc/") and _SHAPES_AGREE.search(m.site.condition or ""):
        # a kernel checking that the tensors it was handed agree in shape: sure where, not why — the code that built
        # them (vLLM's own, from the batch and the model's inputs) is where it went wrong
        return severity, "medium"
    return severity, "high" if m.site.condition else "medium"


_SHAPES_AGREE = re.compile(r"\.(?:size|dim|numel|sizes)\([^()]{0,8}\)\s{0,2}[=!]=\s{0,2}[\w>.-]{1,40}"
                           r"\.(?:size|dim|numel|sizes)\(")


# a message whose own words say its cause is printed elsewhere: it places where the failure surfaced, not why
_POINTS_ELSEWHERE = re.compile(r"\b(?:check|see) (?:the )?(?:logs?|stack ?trace|traceback|errors?)(?: above)? for "
                               r"(?:more |the )?(?:details|root cause|information)\b|"
                               r"\bsee (?:the )?(?:stack ?trace|root cause) (?:\()?above\b", re.IGNORECASE)


def _in_context(st: State, p: ProblemLine, m: AtlasMatch | None) -> tuple[Severity, Confidence, str | None]:
    """How bad and how sure, with what came around the line: and whether it reports an end another failure caused
    (`sigterm`: a shutdown's SIGTERM stopped it; `died`: a death reported after a failure found above)."""
    severity, confidence = _weighed(p, m)
    if severity == "info" and _ignored_then_failed(st, p, m):
        severity = "warning"  # what vLLM went on without, and then the same process failed: the likely start of it
    stopped = "sigterm" if _stopped_by_shutdown(st, p) else "died" if _died_after_failure(st, p) else None
    if m is not None and _POINTS_ELSEWHERE.search(m.site.template) and confidence != "low":
        confidence = "low"  # the message defers its cause to other lines ("check the logs for more details")
    if stopped:
        severity, confidence = "info", "low"
    elif severity == "critical" and m is not None and m.site.file.startswith(CLIENT_FILES):
        # vLLM's benchmark client failing on what the server answered: a symptom of the server's log, not the crash;
        # its refusal of its own arguments or dataset is the benchmark's failure (the command stops there), the
        # benchmark's to fix, said surely only as far as where it stopped
        reads = benchmark_reads_server(m.site.file, m.site.function, m.site.template)
        severity, confidence = ("warning", "medium") if reads else ("critical", "medium")
    return severity, confidence, stopped


def _severity(p: ProblemLine, m: AtlasMatch | None) -> Severity:
    level = (p.origin.level or "").upper()
    if p.kind == "loose" and _PY_WARNING.search(p.message):
        level = "WARNING"  # Python's warnings module printed it (`x.py:63: FutureWarning: …`): a warning, whoever's
    elif p.kind == "loose" and m is not None:  # no level printed: the site's own says how bad it is
        level = "ERROR" if m.site.kind == "raise" else (m.site.level or "").split("_")[0].upper()
    if p.kind == "exception" or (m is not None and m.site.kind == "raise" and level not in ("WARNING", "INFO")):
        return "critical"
    if level == "CRITICAL" and m is not None and m.site.package == "vllm":
        return "critical"  # vLLM logs at CRITICAL only what ends the engine (a fatal signal from its workers)
    if level in ("WARNING", "WARN", "INFO") and _DEPRECATION.search(p.message):
        # a deprecation notice: what to change before a later release removes it — the removal fails, not this
        return "info"
    if level in ("WARNING", "WARN") and m is not None and m.site.kind == "log" and _IGNORED.search(m.site.template):
        # vLLM went on without what it names ("fields … present in the request but ignored"): a note of what it
        # did, not a failure — whatever follows says whether that mattered
        return "info"
    if level in ("ERROR", "CRITICAL") or (level in ("WARNING", "WARN") and m is not None and m.exact
                                          and m.site.condition is not None and m.site.package == "vllm"):
        # a warning vLLM prints under a check of its own (a prompt over the limit, an unknown variable) says
        # something is off; a bare notice does not, nor another library's warning alone (transformers warns of a
        # config key it does not know, a sequence longer than its tokenizer's default) while vLLM goes on
        return "warning"
    return "info"


def _ignored_then_failed(st: State, p: ProblemLine, m: AtlasMatch | None) -> bool:
    """A warning that something was ignored, followed in the same process by an exception or an error."""
    from bot.core.triage.evidence import position

    if m is None or not _IGNORED.search(m.site.template) or (p.origin.level or "").upper() not in ("WARNING", "WARN"):
        return False
    at, parsed = position(p.origin), st.ev.parsed
    same = [q.origin for q in parsed.problems if q.kind == "exception" or (q.origin.level or "").upper() in
            ("ERROR", "CRITICAL")] + [e.origin for e in parsed.events]  # a failure the table knows: a crash
    return any(position(o) > at and o.proc == p.origin.proc and o.pid == p.origin.pid for o in same)


_IGNORED = re.compile(r"\b(?:(?:will be|are|is|were|was|but) ignored|ignoring)\b", re.IGNORECASE)
# Python's warnings module: `path.py:63: FutureWarning: message`
_PY_WARNING = re.compile(r"^\S{1,400}\.py:\d{1,7}: [A-Z]\w{0,60}Warning: ")
_DEPRECATION = re.compile(r"\b(?:is|are) deprecated\b|\bwill be removed\b|\b(?:Future|Deprecation)Warning\b")


def summary(m: AtlasMatch | None, inner: tuple[ProblemLine, Site | None] | None, part: str,
            version: str | None) -> str:
    if m is None:
        assert inner is not None
        return _frame_summary(inner, part)
    site = m.site
    kind = "raised" if site.kind == "raise" else f"logged at {site.level or 'some'} level"
    package = _PACKAGE_NAMES.get(site.package, site.package)
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


def _frame_summary(inner: tuple[ProblemLine, Site | None], part: str) -> str:
    frame, site = inner
    span = f" (in vLLM {site.first}–{site.last})" if site else ""
    return (f"No known failure matches this line, and its message is not one the atlas of vLLM's releases "
            f"holds; the traceback ended in {PART_TITLES.get(part, part)}, "
            f"{short_path(frame.frame_file or '')} in {frame.frame_function}{span}.")


def remedies(st: State, m: AtlasMatch | None, part: str,
             gpu: gpus.Gpu | None) -> tuple[list[str], list[str], list[Advice]]:
    spec = has_spec(st)
    out, knobs, advice = _site_remedies(m, spec, gpu) if m is not None else ([], [], [])
    if part in SPEC_PARTS and spec and st.ev.context.num_speculative_tokens:
        out.append("While it is open, serving without `--speculative-config` tells a drafter problem from a "
                   "target one.")
    return out, knobs, advice


def _site_remedies(m: AtlasMatch, spec: bool, gpu: gpus.Gpu | None) -> tuple[list[str], list[str], list[Advice]]:
    out: list[str] = []
    advice: list[Advice] = []
    upgrade = _upgrade(m)
    if upgrade is not None:
        out.append(upgrade[0])
        advice += upgrade[1]
    settings, knobs = _settings(m, spec)
    out += settings
    # a flag the message itself names that no config field maps (the API server's own: --tool-call-parser); a
    # library's message may name its own command's flags (`pip install --upgrade`): only vLLM's count
    from bot.core.atlas import load_atlas

    named = [f for f in dict.fromkeys(_FLAG_IN_TEXT.findall(m.site.template)) if f not in knobs
             and load_atlas().flag_span(f) is not None]
    if named:
        out.append("The message names the flag(s) to set at launch: " + ", ".join(f"`{f}`" for f in named)
                   + " (`vllm serve --help` lists them).")
        knobs += named
    capability = _capability(m, gpu)
    if capability is not None:
        out.append(capability)
    if m.site.package == "transformers" and _CHECKPOINT_BUILT.search(m.site.file):
        # transformers builds the processor and the tokenizer from the checkpoint's own files, settings and all
        out.append("transformers built this processor (or tokenizer) from the checkpoint's own files "
                   "(`processor_config.json`, `preprocessor_config.json`, `tokenizer_config.json`, the chat "
                   "template): compare them with the base model's — a re-saved checkpoint (quantized, fine-tuned) "
                   "can carry settings such as `truncation` or `max_length` that cut what vLLM sends — and use the "
                   "base model's files, or a transformers release this vLLM supports.")
        advice.append("checkpoint")
    out.append(f"Read the check at your release: {m.url}")
    return out, knobs, advice


# transformers' files that build a processor or tokenizer from a checkpoint's configuration files
_CHECKPOINT_BUILT = re.compile(r"/(?:processing_utils|tokenization_utils\w*|image_processing_\w+|"
                               r"feature_extraction_\w+|processing_\w+)\.py$")


def _upgrade(m: AtlasMatch) -> tuple[str, list[Advice]] | None:
    """What a later release that no longer prints the message (or guards it by another check) means for this one."""
    if caller_type_check(m.site) is not None:
        return None  # the caller passed the wrong object: a release that words the refusal otherwise fixes nothing
    if m.check_changed is not None and m.site.package == "vllm" and m.site.kind == "raise":
        first, condition = m.check_changed
        diff = f": {m.compare_url}" if m.compare_url else ""
        was = f"yours raises it when {m.condition_text}; " if m.condition_text else ""
        return (f"vLLM {first} rewrote this check ({was}{first} raises it when {condition}): a release from {first} "
                f"on may accept what yours refuses — upgrade, or read the diff{diff}", ["upgrade"])
    if not (m.gone_after and m.fixed_in):
        return None
    if m.site.package != "vllm":
        # a library's message reworded is not a fix, and its release follows vLLM's pin, not the user's choice
        return (f"{m.site.package} words this differently from {m.fixed_in} on (the last release that "
                f"prints it is {m.gone_after}): {m.compare_url or ''}".rstrip(": "), [])
    if m.knobs and m.site.kind == "raise":
        # a refusal about a setting: the atlas may have lost the check where it moved (a message built in a
        # list and joined), and the setting it names answers it on any release
        return (f"vLLM {m.fixed_in} no longer raises this message at this site (after {m.gone_after}): "
                "upgrade, or — if the check only moved — change the setting below; the diff tells which: "
                f"{m.compare_url or ''}".rstrip(": "), ["upgrade"])
    if m.site.kind == "log" and (m.site.level or "").upper() in ("WARNING", "WARN", "INFO"):
        # a warning about a condition (memory, load, a fallback) is not fixed by a release that words it otherwise
        return (f"vLLM {m.fixed_in} no longer prints this message at this site (after {m.gone_after}); the "
                f"condition it reports is what to change: {m.compare_url or ''}".rstrip(": "), [])
    return (f"Upgrade: vLLM {m.fixed_in} no longer prints this message (the code changed after "
            f"{m.gone_after}): {m.compare_url or ''}".rstrip(": "), ["upgrade"])


def _settings(m: AtlasMatch, spec: bool) -> tuple[list[str], list[str]]:
    """The settings the site's check reads, with their help, and their flags."""
    out: list[str] = []
    knobs: list[str] = []
    for knob in m.knobs:
        if not spec and knob.flag == "--speculative-config":
            continue
        name = f"`{knob.flag}`" + (f" (its `{knob.key}` key)" if knob.key else "")
        help_text = f": {clip(knob.help, 220)}" if knob.help else ""
        out.append(f"The setting this check reads is {name}{help_text}")
        if knob.flag not in knobs:
            knobs.append(knob.flag)
    return out, knobs


def _capability(m: AtlasMatch, gpu: gpus.Gpu | None) -> str | None:
    need = gpus.required_capability(m.site.condition, m.site.template)
    if need is None:
        return None
    have = (f"{gpu.name} is {gpu.generation}, compute capability {gpu.capability_text}" if gpu else
            "the log does not name the GPU (`nvidia-smi --query-gpu=name,compute_cap --format=csv`)")
    return f"This check needs compute capability ≥ {need[0]}.{need[1]}; {have} (NVIDIA's table: {gpus.SOURCE})."
