"""`__init__() got an unexpected keyword argument 'limit_mm_per_prompt'` from a program that builds vLLM's engine
arguments (a fine-tuning framework, a serving wrapper): the argument is one of vLLM's own, which the releases read
show arriving after the installed one — the caller was written for a newer vLLM.

Only an argument with a name of vLLM's own (two words or more, a flag of some releases and not of the oldest read), and
only when the user's release is known to be older than the first that has it: common names (`model`, `seed`) belong to
every library."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.atlas_readers.releases import newer
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas

_UNEXPECTED = re.compile(r"^(?:\w{1,60}\.)?__init__\(\) got an unexpected keyword argument "
                         r"'(?P<arg>[a-z]+(?:_[a-z0-9]+)+)'")


def newer_argument(atlas: Atlas, cand: Candidate, exc: str, version: str | None) -> Finding | None:
    hit = _UNEXPECTED.match(cand.line.message.strip()) if exc == "TypeError" else None
    if hit is None or not version:
        return None
    arg = hit["arg"]
    flag = "--" + arg.replace("_", "-")
    span = atlas.flag_span(flag)
    oldest = atlas.package_releases.get("vllm", ("",))[0]
    if span is None or span[0] == oldest or not newer(span[0], version):
        return None
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
