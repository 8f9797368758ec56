"""`Unexpected keyword argument 'best_of'`: msgspec's words (its `Struct` constructor, in C) for a field the class does
not have. vLLM's request parameters are msgspec structs (`SamplingParams`, `PoolingParams`): a program or a serving
framework that builds them with a field another release had — or has only since a later one — is refused with this
line and no frame of vLLM's. The releases whose checks of those classes name the field (the atlas) say which side
the caller was written for. Python's own wording (`f() got an unexpected keyword argument 'x'`) names the function
and is read elsewhere."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from packaging.version import Version

from bot.core import owners
from bot.core.triage.atlas_readers.candidates import traceback_frames
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.atlas_readers.releases import newer, one_release
from bot.core.triage.atlas_readers.same_line import step_back
from bot.core.triage.evidence import position
from bot.core.triage.findings import Advice, Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State

_MSGSPEC = re.compile(r"(?<!got an )\bUnexpected keyword argument '(?P<kw>[a-z_][a-z0-9_]{1,60})'")
# vLLM's request parameters built as msgspec structs
STRUCT_FILES = ("vllm/sampling_params.py", "vllm/pooling_params.py")
SOURCES = ("https://github.com/jcrist/msgspec/blob/main/msgspec/_core.c",
           "https://github.com/vllm-project/vllm/blob/main/vllm/sampling_params.py")


def struct_keyword(st: State) -> None:
    if any(f.id.startswith("struct-keyword:") for f in st.findings):
        return
    for line in [*st.ev.parsed.problems, *st.ev.parsed.loose]:
        hit = _MSGSPEC.search(line.origin.text or line.message) if line.kind != "frame" else None
        if hit is None:
            continue
        frames = traceback_frames(st.ev.parsed.problems, line)
        inner = owners.of_path(frames[-1].frame_file or "") if frames else None
        if inner is not None and inner.name not in ("vllm", "user-script", "other", "plugin"):
            continue  # raised in another library's code: its own struct
        from bot.core.atlas import load_atlas  # the atlas loads only when a line needs it

        _claim(st, line, hit["kw"], load_atlas())
        return


def _claim(st: State, line: ProblemLine, kw: str, atlas: Atlas) -> None:
    word = re.compile(rf"(?<![\w]){re.escape(kw)}(?![\w])")  # `logprobs`, not `prompt_logprobs`
    spans = [(s.first, s.last) for f in STRUCT_FILES for s in atlas.sites("vllm", file=f)
             if word.search(s.condition or "") or word.search(s.template)]
    version = one_release(st.ev.context.vllm_version)  # `0.22.x` says no side of a change
    newest = atlas.releases[-1] if atlas.releases else None
    first = min((a for a, _ in spans), key=Version, default=None)
    last = max((b for _, b in spans), key=Version, default=None)
    advice: list[Advice] = ["fix-script"]
    if first and last and version and newer(first, version):
        when = (f" vLLM's checks of its parameters name `{kw}` from {first} on; this vLLM {version} predates them: "
                "the caller was written for a newer vLLM.")
        move = f"upgrade vLLM to a release that has `{kw}` ({first} at the latest)"
        advice.append("upgrade")
    elif first and last and ((version and newer(version, last)) or (not version and newest and newer(newest, last))):
        when = f" vLLM's checks of its parameters name `{kw}` in {first}–{last}: later releases removed it."
        move = f"pin vLLM to {last}, the last release read with `{kw}`"
        advice.append("pin")
    else:
        when, move = "", "run the vLLM release it was written for"
    at = position(line.origin)
    # another library's site with the same few words (transformers' processors) is not it
    step_back(st, at, lambda f: f.site is not None and f.site.package != "vllm")
    st.findings.append(Finding(
        id=f"struct-keyword:{kw}", title=f"`{kw}` was passed to a vLLM parameter class this release does not give it",
        severity="critical", confidence="medium" if when else "low",
        summary=("msgspec refused a keyword its struct does not have — the words vLLM's request parameters "
                 f"(`SamplingParams`, `PoolingParams`) are refused with when a caller builds them with `{kw}`." + when),
        evidence=[quoted(line)],
        remediation=[f"Change the code that builds the parameters (your program, or the serving framework that "
                     f"calls vLLM — its release made for this vLLM) not to pass `{kw}`, or {move}."],
        sources=list(SOURCES), priority=38, part="entrypoint", owner="other", inputs=[kw], advice=advice, at=at,
        level=line.origin.level or "EXCEPTION"))
