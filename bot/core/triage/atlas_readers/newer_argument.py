"""`__init__() got an unexpected keyword argument 'limit_mm_per_prompt'` from a program that builds vLLM's engine
arguments (a fine-tuning framework, a serving wrapper): the argument is one of vLLM's own, which the releases read
show arriving after the installed one — the caller was written for a newer vLLM.

Only an argument of vLLM's engine configuration (a field of one of its config classes, two words or more, not in the
oldest release read), only for a call the message does not place in another class, and only when the user's release
is known to be older than the first that has it: common names (`model`, `seed`) belong to every library."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

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
    hit = _UNEXPECTED.match(cand.line.message.strip()) if exc == "TypeError" else None
    if hit is None or not version or (hit["cls"] and hit["cls"] not in _ENGINE_CLASSES):
        return None
    arg = hit["arg"]
    flag = "--" + arg.replace("_", "-")
    spans = sorted((s for s in (atlas.field_span(c, arg) for c in _CONFIGS) if s is not None),
                   key=lambda s: [int(x) for x in s[0].split(".")[:3] if x.isdigit()])
    oldest = atlas.package_releases.get("vllm", ("",))[0]
    if not spans or spans[0][0] == oldest or not newer(spans[0][0], version):
        return None
    span = spans[0]
    return Finding(
        id=f"newer-argument:{arg}", title=f"The program passes vLLM's `{arg}`, which vLLM {version} does not have yet",
        severity="critical", confidence="medium",
        summary=(f"{exc}: the code that builds vLLM's engine arguments passes `{arg}` (`{flag}`), an engine argument "
                 f"of vLLM from {span[0]} on among the releases read; vLLM {version}, the one installed, does not take "
                 "it. The program was written for a newer vLLM."),
        evidence=[quoted(cand.line)],
        remediation=[f"Upgrade vLLM to {span[0]} or later (the release the program was written for: its "
                     f"requirements name it), or install the program's release made for vLLM {version}."],
        priority=38, part="entrypoint", owner="other", inputs=[flag], advice=["upgrade"])
