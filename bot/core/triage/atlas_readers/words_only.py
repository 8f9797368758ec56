"""An exception with no traceback: its words say what failed, not where — the input the message names (with the code
line printed above it, when the paste kept it), whose words they are (a module of vLLM's that is not there, a call
into vLLM's API it refused, a caller of another release), and what the message tells to set."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.history import History, load_history
from bot.core.parts import part_of_package
from bot.core.triage.atlas_readers.api_surface import API_FILES
from bot.core.triage.atlas_readers.attention_backend import fp8_kv_refused, reasons_alone
from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.extra_fields import extra_fields
from bot.core.triage.atlas_readers.host import has_spec
from bot.core.triage.atlas_readers.input_knobs import (
    CUDA_ENV_DOC,
    PLUGIN_ENV,
    device_ids,
    knobs_of,
    missing_package,
    settable,
)
from bot.core.triage.atlas_readers.newer_argument import newer_argument
from bot.core.triage.atlas_readers.package_version import needed_version
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.atlas_readers.releases import newer, one_release
from bot.core.triage.atlas_readers.told import told_flags
from bot.core.triage.atlas_readers.weight_loader import quantized_layout
from bot.core.triage.findings import Advice, Finding
from bot.core.triage.frames import Input, code_above, inputs_of

if TYPE_CHECKING:
    from bot.core.atlas import Atlas, AtlasMatch
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State


def words_only(st: State, atlas: Atlas, cand: Candidate, exc: str, version: str | None) -> Finding | None:
    p = cand.line
    inputs = device_ids(p.message) + settable(atlas, inputs_of(exc, p.message, code_above(st.ev.parsed.loose, p)),
                                               version)
    whose = _whose_words(st, atlas, cand, exc, inputs, version)
    if whose is not None or not inputs:
        return whose
    module = next((i for i in inputs if i.kind == "module"), None)
    klass = next((i for i in inputs if i.kind == "class"), None)
    if klass is not None:
        return _abstract_class(atlas, cand, exc, klass)
    knobs, lines = knobs_of(atlas, inputs, version, has_spec(st))
    knobs = list(knobs)
    host = ["device-visibility"] if any(i.name == "CUDA_VISIBLE_DEVICES" for i in inputs) else []
    remediation = list(lines)
    advice: list[Advice] = []
    sources: list[str] = [CUDA_ENV_DOC] if host else []
    missing = missing_package(module)
    if missing is not None:
        remediation.insert(0, missing[1])
        if module is not None and owners.of_package(module.name.split(".", 1)[0]).name == "plugin":
            advice.append("disable-plugin")  # a plugin's own module: its release made for this vLLM, or without it
    deps: list[str] = [missing[0]] if missing is not None else []
    layout = _what_inputs_say(inputs, remediation, advice, knobs, sources, deps)
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
        part=_part_named(bool(host), layout is not None, advice, deps, module.name if missing is not None and module
                         is not None else None),
        # the flags a config field it read is given with are inputs too, as the frames' finding says
        inputs=[i.tag for i in inputs] + [k for k in knobs if k.startswith("--") and any(
            i.kind == "config" for i in inputs)],
        knobs=knobs, host=host, advice=advice, deps=deps,
        owner=owners.of_package(module.name.split(".", 1)[0]).name if missing is not None and module is not None
        else None)


def _part_named(host: bool, layout: bool, advice: list[Advice], deps: list[str], missing: str | None) -> str | None:
    """The part the named inputs point at: the devices, a quantized layout, a checkpoint, a tokenizer's code, the
    part a missing package serves."""
    if host:
        return "platform"
    if layout:
        return "quantization"
    if "checkpoint" in advice:
        return "model-loading"
    if missing is not None:
        return part_of_package(missing)
    return "tokenizer" if "transformers" in deps else None


def _what_inputs_say(inputs: list[Input], remediation: list[str], advice: list[Advice], knobs: list[str],
                     sources: list[str], deps: list[str]) -> tuple[str, list[str], list[str]] | None:
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
        tokenizer = next((i for i in inputs if i.kind == "argument" and _TOKENIZER_METHOD.match(i.detail)), None)
        if tokenizer is not None:
            # a tokenizer's own method (a checkpoint's tokenizer code, or an older transformers class) refusing a
            # keyword the installed transformers passes it: the two were written for different transformers releases
            remediation.append(f"{tokenizer.detail.split(' does not')[0]} is a tokenizer's own code (the "
                               f"checkpoint's, under trust_remote_code), and its caller (transformers, or the code "
                               f"calling it) passes `{tokenizer.name}`, which that code predates: install the "
                               "transformers release the tokenizer was written for, or a revision of the checkpoint "
                               "whose tokenizer code takes it.")
            deps.append("transformers")
            return layout
        remediation.append("The caller passes an argument what it calls does not take in the installed versions (a "
                           "keyword renamed or removed between releases): change the call in the calling code, or "
                           "install the versions it was written for.")
        advice.append("fix-script")
    return layout


# a tokenizer class's own method named as the callee (`ChatGLMTokenizer._pad()` does not take it)
# (transformers' own base classes and vLLM's wrappers of them are not a checkpoint's code: their callers are newer)
_TOKENIZER_METHOD = re.compile(r"^`(?!PreTrained|Cached|AnyTokeni[sz]er\b|MistralTokeni[sz]er\b)\w{1,80}"
                               r"Tokeni[sz]er(?:Fast)?\.\w{1,80}\(\)` does not take it$")


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
    if call is not None:
        return _caller_passes(cand, exc, call, inputs[0], version)
    inner = _internal_call(atlas, exc, cand.line.message) if inputs and not cand.frames else None
    if inner is None:
        return None
    # the class name alone (`Worker`, `Scheduler`) may be another program's: vLLM must show in the log as well
    seen = version is not None or any(c.kind in ("version", "logo_version", "args", "start")
                                      for c in st.ev.parsed.clues) or any(
        "vllm" in (q.origin.text or "").lower() for q in st.ev.parsed.problems[:50])
    return _internal_caller(cand, exc, inner, inputs[0], version, seen)


def _internal_call(atlas: Atlas, exc: str, message: str) -> tuple[str, str] | None:
    """`Worker.reload_weights() got an unexpected keyword argument 'x'`: a method of a vLLM class outside its public
    API (a worker's, an engine core's), and the class's file."""
    hit = _API_CALL.match(message) if exc == "TypeError" else None
    path = atlas.class_file(hit["cls"]) if hit is not None and hit["cls"] and hit["fn"] else None
    return (f"{hit['cls']}.{hit['fn']}", path) if hit is not None and path is not None else None


def _internal_caller(cand: Candidate, exc: str, call: tuple[str, str], arg: Input, version: str | None,
                     vllm_seen: bool) -> Finding:
    """Code outside vLLM (an RL trainer syncing weights through `collective_rpc`, a serving framework) calling a
    method of vLLM's internals with an argument this release's method does not take: written for another release."""
    from bot.core.atlas import load_atlas
    from bot.core.triage.below import stale_release

    name, path = call
    stale = stale_release(version)
    return Finding(
        id=f"internal-call:{name}", title=f"Code outside vLLM calls vLLM's `{name}()` with `{arg.name}`, which this "
                                          "release's method does not take",
        severity="critical", confidence="medium" if stale and vllm_seen else "low",
        summary=(f"{exc}: `{name}()` is vLLM's own ({path}), not its public API; what calls it with `{arg.name}` "
                 "(a training framework driving vLLM's workers, a serving framework) was written for another vLLM "
                 "release" + (f" — vLLM {version} is far behind the newest, so most likely a newer one." if stale
                              else ".")),
        evidence=[quoted(cand.line)],
        remediation=[*([stale] if stale else []),
                     "Install the vLLM release the calling framework was made for (its requirements name it), or "
                     "the framework's release made for this vLLM."],
        priority=38, part=load_atlas().part_of(path), owner="other", inputs=[arg.name],
        advice=["upgrade"] if stale else [])


def aged_caller(atlas: Atlas, cand: Candidate, exc: str, version: str | None) -> Finding | None:
    """A caller outside vLLM passing an engine argument of another release: the caller's age, whatever frame of
    vLLM's raised it."""
    return newer_argument(atlas, cand, exc, version) if cand.line.kind == "exception" else None


def unframed(st: State, atlas: Atlas, cand: Candidate, m: AtlasMatch | None, exc: str,
             version: str | None) -> Finding | None:
    """A line with no traceback whose own words say whose it is or what to give: the interpreter's sentence quoted
    without its class (a refused call into vLLM's API is still a TypeError, a name a package lacks an ImportError),
    or a refusal no vLLM site words that names the setting it needs."""
    p = cand.line
    if p.kind == "loose" and _IMPORT_WORDS.match(p.message.strip()):
        return words_only(st, atlas, cand, "ImportError", version)
    if p.kind == "loose" and _NO_MODULE_WORDS.match(p.message.strip()):
        return words_only(st, atlas, cand, "ModuleNotFoundError", version)
    if p.kind == "loose" and (said := _quoted_call(atlas, cand, p.message.strip(), version)) is not None:
        return said
    if p.kind == "loose" and m is None and (said := reasons_alone(st, atlas, p, version)) is not None:
        return said
    if p.kind in ("loose", "exception") and exc != "TypeError":
        # another exception quoting the TypeError it caught (`gradio.exceptions.Error: "…:\nLLM.generate() got an
        # unexpected keyword argument 'x'"`): the refused call is the cause
        inner = _QUOTED_SENTENCE.search(p.message)
        said = _quoted_call(atlas, cand, inner["said"], version) if inner is not None else None
        if said is not None or p.kind == "loose":
            return said
    newer = newer_argument(atlas, cand, exc, version) if p.kind == "exception" else None
    if newer is not None:
        return newer  # Python's words, whatever site of vLLM's shares them
    if p.kind == "exception" and m is None:
        return (_told_setting(atlas, cand, exc, version) or _told_variable(cand, exc) or needed_version(cand, exc)
                or fp8_kv_refused(atlas, p, version) or extra_fields(st, p, exc))
    if p.kind == "level" and m is None and (p.origin.level or "").upper() in ("ERROR", "CRITICAL"):
        told = _told_variable(cand, "A logged error")
        if told is not None and _plugins_logger(p):
            # vLLM's log prefix on a file no vLLM release has: a plugin logging through vLLM's logger
            told.owner, told.advice = "plugin", ["disable-plugin"]
            told.sources = [owners.PLUGIN_DOC]
        return told
    return None


# where a wrapper's message starts the sentence it quotes: after an escaped or real line break, or a colon
_QUOTED_SENTENCE = re.compile(r"(?:\\n|\n|: )(?P<said>[A-Za-z_][\w.]{1,120}\(\) [^\n\"]{10,300})")


def _quoted_call(atlas: Atlas, cand: Candidate, sentence: str, version: str | None) -> Finding | None:
    call = _api_call(atlas, "TypeError", sentence)
    args = inputs_of("TypeError", sentence, "") if call is not None else []
    return _caller_passes(cand, "TypeError", call, args[0], version) if call is not None and args else None


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
                     r"(?P<why>(?:to|if|in order to) [^.;]{3,160})|"
                     # the way named after what it does (`Set Flashinfer backend by export VLLM_ATTENTION_BACKEND=X`)
                     r"\b[Ss]et (?P<what>[\w -]{3,60}?) by (?:export(?:ing)?|setting) `?(?P<name2>[A-Z][A-Z0-9]*_"
                     r"[A-Z0-9_]{2,60})=(?P<value2>[\w.:-]{1,40})`?")


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
    if hit is None:
        return None
    name, value = hit["name"] or hit["name2"], (hit["value"] or hit["value2"]).rstrip(".:")  # not the sentence's stop
    why = " ".join((hit["why"] or f"to set {hit['what']}").split())
    if _HINT_ONLY.search(name) or _MORE_TO_SEE.search(why):
        return None  # a way to see more (a debug or trace switch), not the way out
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


# Python's ImportError sentence for a name a module lacks, quoted without its class
_IMPORT_WORDS = re.compile(r"cannot import name '\w+' from '[\w.]+'")
# and its ModuleNotFoundError sentence, alone on a line (an issue's title, a paste)
_NO_MODULE_WORDS = re.compile(r"No module named '[\w.]+'$")


# a call into vLLM's Python API (`LLM.generate()`, `SamplingParams()`) refused for its arguments
_API_CALL = re.compile(r"^(?:(?P<cls>[A-Z]\w{1,60})(?:\.(?P<fn>\w{1,60}))?|(?P<func>[a-z_]\w{2,80}))\(\) "
                       r"(?:got an unexpected keyword argument|missing \d+ required (?:positional|keyword-only) "
                       r"argument|takes \d+ positional argument)")


def _api_call(atlas: Atlas, exc: str, message: str) -> str | None:
    """`Class.method` when the message refuses a call of a class vLLM offers its callers (the offline `LLM`, the
    engines, the parameters), by the file the atlas knows the class from."""
    hit = _API_CALL.match(message) if exc == "TypeError" else None
    if hit is not None and hit["func"]:
        # a module-level function of vLLM's serving or offline API (`resolve_chat_template_content_format`) that an
        # application calls: vLLM's own callers pass what their release takes
        hist = load_history()
        files = hist.files_of_function(hit["func"]) if hist is not None else []
        return hit["func"] if any(f.startswith(API_FILES) for f in files) else None
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
        priority=38, part="entrypoint", owner="user-script", inputs=[arg.name], advice=["fix-script", "pin"])


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


def _releases_having(hist: History, dotted: str) -> list[str]:
    """The releases read that have a module `vllm.x.y` — or, for `vllm.x.Class` (`cannot import name 'Class' from
    'vllm.x'`), whose module defines that class."""
    if "." not in dotted:
        return []
    path = "vllm/" + dotted.split(".", 1)[1].replace(".", "/")
    rels = hist.module_releases(path + ".py") or hist.module_releases(path + "/__init__.py")
    parent, _, name = path.rpartition("/")
    if not rels and name[:1].isupper():
        rels = hist.class_releases(parent + ".py", name) or hist.class_releases(parent + "/__init__.py", name)
    return rels


def _missing_vllm_module(st: State, cand: Candidate, exc: str, module: Input,
                         version: str | None) -> Finding | None:
    """`No module named 'vllm.x.y'`: code written for another vLLM release imports a module this one does not
    have — a plugin, a KV connector or the user's program, since vLLM's own modules import what they ship."""
    if _VLLM_EXTENSION.match(module.name):
        return _missing_vllm_extension(cand, exc, module, version)
    if any(_SELF_IMPORT.search(q.message) for q in st.ev.parsed.problems):
        return _source_tree_shadows(cand, exc, module)
    hist = load_history()
    rels = _releases_having(hist, module.name) if hist is not None else []
    first = rels[0] if rels else None
    version = one_release(version)  # a range (`>=0.25.0`) names no one release
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
