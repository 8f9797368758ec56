"""`__init__() got an unexpected keyword argument 'limit_mm_per_prompt'` from a program that builds vLLM's engine
arguments (a fine-tuning framework, a serving wrapper): the argument is one of vLLM's own, which the releases read
show arriving after the installed one — the caller was written for a newer vLLM.

Only an argument of vLLM's engine configuration (a field of one of its config classes, two words or more, not in the
oldest release read), only for a call the message does not place in another class, and only when the user's release
is known to be older than the first that has it: common names (`model`, `seed`) belong to every library."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from bot.core import owners
from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.atlas_readers.releases import newer
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas

_UNEXPECTED = re.compile(r"^(?:(?P<cls>\w{1,60})\.)?__init__\(\) got an unexpected keyword argument "
                         r"'(?P<arg>[a-z]+(?:_[a-z0-9]+)+)'")
# the classes a program builds vLLM's engine with: a class the message names must be one of them (a processor's or a
# library's class with an argument of the same name is not vLLM's)
_ENGINE_CLASSES = frozenset({"EngineArgs", "AsyncEngineArgs", "LLM", "LLMEngine", "AsyncLLMEngine", "AsyncLLM"})
# vLLM's engine configuration: an argument is an engine argument when one of these has it as a field (a front-end flag
# such as `api_server_count` is not)
_CONFIGS = ("ModelConfig", "CacheConfig", "ParallelConfig", "SchedulerConfig", "LoadConfig", "LoRAConfig",
            "MultiModalConfig", "DeviceConfig", "SpeculativeConfig", "DecodingConfig", "StructuredOutputsConfig",
            "ObservabilityConfig", "KVTransferConfig", "CompilationConfig", "AttentionConfig")


def newer_argument(atlas: Atlas, cand: Candidate, exc: str, version: str | None) -> Finding | None:
    """An engine argument of a newer vLLM (the caller was written for one), or of an older one (vLLM removed it and
    the caller still passes it): the caller's age, named by its frame when the traceback shows one outside vLLM."""
    hit = _UNEXPECTED.match(cand.line.message.strip()) if exc == "TypeError" else None
    if hit is None or not version or (hit["cls"] and hit["cls"] not in _ENGINE_CLASSES):
        return None
    caller = _caller(cand)
    if cand.frames and caller is None:
        return None  # vLLM's own code passes it: files of two versions, the frame reader's to say
    arg = hit["arg"]
    flag = "--" + arg.replace("_", "-")
    spans = sorted((s for s in (atlas.field_span(c, arg) for c in _CONFIGS) if s is not None), key=lambda s: _v(s[0]))
    rels = atlas.package_releases.get("vllm", ("",))
    if not spans:
        return None
    who = f"`{caller.package}`" if caller is not None and caller.name != "user-script" else "the program"
    deps = [caller.package] if caller is not None and caller.name != "user-script" else []
    owner = caller.name if caller is not None and caller.name in ("user-script", "plugin") else "other"
    first, last = spans[0][0], max((s[1] for s in spans), key=_v)
    if first != rels[0] and newer(first, version):
        kind, took, age, advice, named = "newer", f"from {first} on", "a newer", "upgrade", flag
        title = f"passes vLLM's `{arg}`, which vLLM {version} does not have yet"
        remedy = (f"Upgrade vLLM to {first} or later (the release {who} was written for: its requirements name it), "
                  f"or install {who}'s release made for vLLM {version}.")
    elif last != rels[-1] and _v(version) > _v(last):
        kind, took, age, advice, named = "removed", f"{first}–{last}", "an older", "pin", arg
        title = f"passes `{arg}`, an engine argument vLLM took up to {last}"
        remedy = (f"Install {who}'s release made for vLLM {version} (its release notes or requirements name the vLLM "
                  f"it supports), or pin vLLM to {last} or older, the last release read that takes `{arg}`.")
    else:
        return None
    return Finding(id=f"{kind}-argument:{arg}", title=f"{who[0].upper()}{who[1:]} {title}", severity="critical",
                   confidence="medium", evidence=[quoted(cand.line)], remediation=[remedy], priority=38,
                   summary=(f"{exc}: the code that builds vLLM's engine arguments ({who}) passes `{arg}` (`{flag}`), "
                            f"an engine argument of vLLM {took} among the releases read; vLLM {version}, the one "
                            f"installed, does not take it. It was written for {age} vLLM."),
                   part="entrypoint", owner=owner, inputs=[named], deps=deps, advice=[advice])


def _v(release: str) -> Version:
    try:
        return Version(release)
    except InvalidVersion:
        return Version("0")


# owners whose frames are no caller of vLLM's engine arguments: vLLM itself and Python's own machinery
_NOT_CALLERS = ("vllm", "python")


def _caller(cand: Candidate) -> owners.Owner | None:
    """The code outside vLLM that called into it: the first frame outward of the innermost run of vLLM's frames."""
    inside = False
    for frame in reversed(cand.frames):
        owner = owners.of_path(frame.frame_file or "")
        if owner is None:
            continue
        if owner.name == "vllm":
            inside = True
        elif inside and owner.name not in _NOT_CALLERS:
            return owner
    return None
