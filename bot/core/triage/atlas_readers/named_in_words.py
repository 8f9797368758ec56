"""What a failure's own words name beyond its site: another package and the version it needs, support that is
not there yet, a checkpoint and a loader that disagree.

- "Numba needs NumPy 2.2 or less", "requires transformers>=4.56", "not supported by xgrammar": the package named
  is the one whose installed version to change;
- "X does not support LoRA yet", "architectures [...] are not supported for now": support a later release may have;
- a failure while vLLM loads a model's weights (its loader, a weight's shape or name): the checkpoint's layout and
  this release's loader disagree — a later loader, or a checkpoint in a layout this one knows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.triage.remedy import CLIENT_FILES

if TYPE_CHECKING:
    from bot.core.triage.findings import Advice, Finding

# a package and a version it needs, or a refusal in a library's name
_NEEDS = re.compile(r"\b(?P<who>[A-Za-z][\w-]{1,30})\s+(?:needs|requires|require|is incompatible with|is not "
                    r"compatible with)\s+(?P<pkg>[A-Za-z][\w-]{1,30})\s*(?:[<>=!~]=?\s*|version\s+|v)?\d",
                    re.IGNORECASE)
_PIN = re.compile(r"\b(?P<pkg>[A-Za-z][\w-]{1,30})\s*(?:[<>=!~]=|>|<)\s*\d+\.\d+")
_BY_LIBRARY = re.compile(r"\bnot supported (?:by|in|with) (?:the )?(?P<pkg>[A-Za-z][\w-]{1,30})\b", re.IGNORECASE)
_YET = re.compile(r"\bnot (?:yet )?supported (?:yet|for now)\b|\bdoes not (?:yet )?support\b[^.]{0,60}\byet\b|"
                  r"\bnot (?:yet )?implemented\b[^.]{0,40}\byet\b|\bare not supported for now\b", re.IGNORECASE)
# what to install, in the message's own words ("Please install vllm[audio] for audio support"), and a library
# named as too old ("your version of Transformers is out of date")
_INSTALL = re.compile(r"\b(?:please |to )?(?:pip )?install (?:the )?`?"
                      r"(?P<pkg>[A-Za-z][\w.-]{1,40}(?:\[[\w,-]{1,40}\])?)(?![\w.+\[-])`?", re.IGNORECASE)
_NOT_PACKAGES = frozenset({"it", "them", "this", "that", "the", "a", "an", "one", "from", "with", "via", "and", "or",
                           "package", "packages", "dependencies", "requirements", "version", "latest", "newer"})
_TOO_OLD = re.compile(r"\b(?:your |the installed )?(?:version of |installed )(?P<pkg>[A-Za-z][\w-]{1,30}) "
                      r"(?:is|may be) (?:out of date|outdated|too old)\b", re.IGNORECASE)
# vLLM's extras for multimodal inputs (setup.py's `audio` and `video` extras_require)
_MULTIMODAL_EXTRA = re.compile(r"^vllm\[(?:audio|video)\]$", re.IGNORECASE)
_LOADING = re.compile(r"load_weights|weight_loader|_load_\w+|load_model|default_weight_loader|track_weights_loading")
_KNOWN = {name.lower(): name for name in owners.LIBRARIES} | {"numpy": "numpy", "mlx-lm": "mlx-lm",
                                                              "mlx_lm": "mlx-lm", "vllm": "vllm"}


# a vLLM feature a refusal names in words ("Model X does not support LoRA, but LoRA is enabled"), the part of vLLM it
# is and the flag that turns it on (vLLM's engine arguments)
_FEATURES: tuple[tuple[re.Pattern[str], str, str | None], ...] = tuple(
    (re.compile(rf"\b{words}\b", re.IGNORECASE), part, flag) for words, part, flag in (
        (r"LoRA", "lora", "--enable-lora"),
        (r"prefix[ _-]caching", "kv-cache", "--enable-prefix-caching"),
        (r"chunked[ _-]prefill", "scheduler", "--enable-chunked-prefill"),
        (r"speculative decoding", "drafter", "--speculative-config"),
        (r"pipeline[ _-]parallel(?:ism)?", "parallel", "--pipeline-parallel-size"),
        (r"expert[ _-]parallel(?:ism)?", "parallel", "--enable-expert-parallel"),
        (r"CUDA ?graphs?", "compilation", "--enforce-eager"),
        (r"multi-?modal(?: inputs?)?|image inputs?", "multimodal", None),
        # a quantization method, or quantization itself (`does not support BitsAndBytes quantization yet`)
        (r"(?:BitsAndBytes|bitsandbytes|AWQ|GPTQ|GGUF|FP8|compressed[ _-]tensors)(?: quantization)?|quantization",
         "quantization", "--quantization"),
    ))
# the words of a refusal of a feature: "does not support X", "X is not supported", "X is enabled"
_REFUSES = re.compile(r"\b(?:does not|doesn't|do not|don't|cannot|can't|not) (?:yet )?(?:support|be used with)|"
                      r"\bnot (?:yet )?supported\b|\bis enabled\b|\bis incompatible\b", re.IGNORECASE)


# transformers' Auto classes naming a class the installed transformers does not define and no remote code provided
# (`Tokenizer class BaiChuanTokenizer does not exist or is not currently imported.`): the checkpoint's own code
_NOT_IMPORTED = re.compile(r"\bclass (?P<cls>[A-Z]\w{1,80}) does not exist or is not currently imported\b")

# words that say which part of vLLM a message is about, when the file that printed it is one every part passes
# through (the engine's input checks, a worker): an image item against the encoder cache is multimodal
_CONCERNS = ((re.compile(r"\bencoder cache\b|\b(?:image|video|audio) (?:item|token|placeholder|input)s?\b|"
                         r"`(?:image|video|audio)` token|\bmulti-?modal\b", re.IGNORECASE), "multimodal"),
             # the processor's instruction sets (AVX-512, AMX, avx_ne_convert): the device the backend runs on
             (re.compile(r"\binstruction sets?\b|\bavx(?:512)?(?:_?\w+)?\b|\bamx\b", re.IGNORECASE), "platform"))
# a weight file that does not read back: truncated or corrupt (safetensors' and torch.load's own words)
_CORRUPT_WEIGHTS = re.compile(r"SafetensorError|Error while deserializing header|MetadataIncompleteBuffer|"
                              r"HeaderTooLarge|PytorchStreamReader failed|invalid load key", re.IGNORECASE)
# a kernel given a tensor on another device than its own (PyTorch's and Triton's words)
_DEVICES_APART = re.compile(r"(?i)Expected all tensors to be on the same device|cannot be accessed from Triton "
                            r"\(cpu tensor\?\)")
# too little shared memory for what the process maps there (a container's default /dev/shm is 64 MB)
_SHM_SHORT = re.compile(r"(?i)(?:insufficient|not enough|no) (?:space|room|memory)[^.\n]{0,40}/dev/shm|"
                        r"/dev/shm[^.\n]{0,60}(?:insufficient|not enough|no space|full|too small)")
GENERIC_PARTS = frozenset({"engine", "worker", "entrypoint", "other", "transformers"})


@dataclass
class Named:
    """What a message's words name: parts, packages, host changes, settings and the advice they call for."""

    deps: list[str] = field(default_factory=list)
    part: str | None = None
    feature: tuple[str, str | None] | None = None  # the feature a refusal names: its part and its flag
    concern: str | None = None  # the part the words are about
    host: list[str] = field(default_factory=list)  # host or container changes the words point at
    knobs: list[str] = field(default_factory=list)  # settings the words point at
    inputs: list[str] = field(default_factory=list)  # inputs the words name as at fault
    first: list[str] = field(default_factory=list)  # what the message itself says to do: before the site's advice
    advice: list[Advice] = field(default_factory=list)
    remediation: list[str] = field(default_factory=list)


def packages_named(text: str) -> list[str]:
    """Packages a message names with a version it needs, or as the one that refuses."""
    out: list[str] = []
    for rx in (_NEEDS, _PIN, _BY_LIBRARY):
        for m in rx.finditer(text[:2000]):
            pkg = _KNOWN.get(m.group("pkg").lower().replace("_", "-")) or _KNOWN.get(m.group("pkg").lower())
            if pkg and pkg != "vllm":
                out.append(owners.of_package(pkg).name if pkg in owners.LIBRARIES else pkg)
    return list(dict.fromkeys(out))


# a package the message says must be installed ("Ensure OpenTelemetry packages are installed")
# ("… packages" with the rest cut off says it too)
_ENSURE_INSTALLED = re.compile(r"\b[Ee]nsure (?:that )?(?:the )?`?(?P<pkg>[A-Za-z][\w.-]{1,40})`? "
                               r"packages?\b(?: (?:is|are) installed\b)?")


def installs_named(text: str) -> list[str]:
    """Packages a message tells its reader to install."""
    out = [m.group("pkg").rstrip(".") for m in _INSTALL.finditer(text[:2000])
           if m.group("pkg").lower() not in _NOT_PACKAGES]
    out += [m.group("pkg").lower() for m in _ENSURE_INSTALLED.finditer(text[:2000])
            if m.group("pkg").lower() not in _NOT_PACKAGES]
    return list(dict.fromkeys(out))


def library_too_old(text: str) -> str | None:
    """The library a message calls out of date (its owner's name when it is one the report knows), or None."""
    m = _TOO_OLD.search(text[:2000])
    if m is None:
        return None
    pkg = m.group("pkg").lower()
    return owners.of_package(pkg).name if pkg in owners.LIBRARIES else pkg


def library_doubted(text: str) -> str | None:
    """A library whose version a message asks its reader to check (`make sure your triton version is compatible`),
    when the report knows that library: too old or too new, the message does not say."""
    m = _VERSION_DOUBTED.search(text[:2000])
    pkg = m.group("pkg").lower() if m is not None else ""
    return owners.of_package(pkg).name if pkg in owners.LIBRARIES else None


# a message asking its reader to check a library's version (`Please make sure your triton version is compatible`)
_VERSION_DOUBTED = re.compile(r"\b(?:make sure|check|ensure|verify)(?: that)? (?:your |the )?(?:installed )?"
                              r"(?P<pkg>[A-Za-z][\w-]{1,30}) version (?:is|matches)\b", re.IGNORECASE)


def named_in_words(message: str, function: str | None, part: str | None, model_refused: bool = False,
                   trusted: bool = False) -> Named:
    """What the message (and where it failed) says to change, beyond the settings its site reads. With
    `model_refused` (the check refused the `--model` value itself) no weight was read: no loader's layout to blame;
    `trusted`: the server already runs the checkpoint's own code (`--trust-remote-code`)."""
    out = Named()
    for pkg in packages_named(message):
        out.deps.append(pkg)
        out.remediation.append(f"The message names `{pkg}` and the version it needs: install the `{pkg}` version it "
                               "asks for (`pip show " + pkg + "`).")
    for pkg in installs_named(message):
        out.deps.append(pkg)
        out.first.append(f"The message says what to install: `pip install '{pkg}'` (the version this vLLM "
                         "release pins), in the environment — or image — the server runs in.")
        if _MULTIMODAL_EXTRA.match(pkg):
            out.part = "multimodal"
    old = library_too_old(message)
    if old is not None:
        out.deps.append(old)
        out.first.append(f"The message says the installed `{old}` may be too old for what it read: "
                         f"upgrade `{old}` to the version the model (or this vLLM release) asks for, "
                         "before suspecting the checkpoint.")
    doubted = library_doubted(message) if old is None else None
    if doubted is not None:
        out.deps.append(doubted)
        out.first.append(f"The message asks to check the installed `{doubted}`: compare it with the version this "
                         f"vLLM and its torch expect (`pip show {doubted} torch vllm`) and install that one — "
                         "newer or older, the message does not say.")
    out.concern = next((part for rx, part in _CONCERNS if rx.search(message[:2000])), None)
    if (named := _NOT_IMPORTED.search(message[:2000])) is not None:
        out.deps.append("transformers")
        if not trusted:
            out.knobs.append("--trust-remote-code")
        out.first.append(f"The installed transformers does not define `{named['cls']}`, which the checkpoint's config "
                         "names: install a transformers release that defines it"
                         + ("" if trusted else "; if the checkpoint ships the class in its own code, serve it with "
                                               "`--trust-remote-code` (after reading that code)")
                         + "; or, where the config names the class under a spelling no release has, correct its "
                           "`tokenizer_class`.")
    if _SHM_SHORT.search(message[:2000]):
        out.host.append("shm")
    if _CORRUPT_WEIGHTS.search(message[:2000]):
        out.inputs.append("checkpoint")
        out.advice.append("checkpoint")
        out.first.append("A weight file does not read back whole: truncated or corrupt (a download or copy that "
                         "stopped, a disk that filled). Download the model again — compare the files' sizes with the "
                         "Hub's — before suspecting anything else.")
    if _DEVICES_APART.search(message[:2000]):
        out.host.append("device-visibility")
        out.knobs.append("CUDA_VISIBLE_DEVICES")
        out.advice.append("upgrade")
        out.first.append("Tensors of one operation sit on two devices (a CPU tensor, or another GPU's): vLLM "
                         "expects the GPU it runs on to be the process's first. Select GPUs with "
                         "`CUDA_VISIBLE_DEVICES`, not with a device index (`device='cuda:1'`, `--device cuda:1`); with "
                         "the defaults, it is a defect of the release — upgrade.")
    if _REFUSES.search(message[:2000]):
        out.feature = next(((part, flag) for rx, part, flag in _FEATURES if rx.search(message[:2000])), None)
    if _YET.search(message):
        out.advice.append("upgrade")
        out.remediation.append("The message says it is not supported yet: a later vLLM release may support it — "
                               "read the newest release's notes, and upgrade if it does.")
    if not model_refused and (part == "model-loading" or (function and _LOADING.search(function))):
        out.advice += ["upgrade", "checkpoint"]
        out.remediation.append("vLLM failed loading the weights: the checkpoint's layout and this release's loader "
                               "for the architecture disagree — a later release's loader may read it (loaders learn "
                               "new layouts), or use a checkpoint in a layout this release loads.")
    return out


def apply_named(f: Finding, named: Named) -> None:
    if named.part is not None and f.part in (None, "other"):
        f.part = named.part
    f.host = list(dict.fromkeys([*f.host, *named.host]))
    f.knobs = list(dict.fromkeys([*f.knobs, *named.knobs]))
    f.inputs = list(dict.fromkeys([*f.inputs, *named.inputs]))
    # (`vllm bench`'s own checks speak of what its backends and datasets take: the benchmark's words, no part of the
    # server's)
    benchmark = f.site is not None and f.site.package == "vllm" and f.site.file.startswith(CLIENT_FILES)
    if named.concern is not None and (f.part is None or f.part in GENERIC_PARTS) and not benchmark:
        f.part = named.concern
    if named.concern == "platform":
        f.inputs = list(dict.fromkeys([*f.inputs, "gpu"]))  # the device lacks what the code needs
    if named.feature is not None and not benchmark:
        # the feature refused is the part at fault, whichever file holds the check; its flag is the input
        f.part, flag = named.feature
        if flag is not None:
            f.inputs = list(dict.fromkeys([*f.inputs, flag]))
            f.knobs = list(dict.fromkeys([*f.knobs, flag]))
    f.deps = list(dict.fromkeys([*f.deps, *named.deps]))
    f.advice = list(dict.fromkeys([*f.advice, *named.advice]))
    f.remediation = list(dict.fromkeys([*named.first, *f.remediation, *named.remediation]))
