"""A Triton kernel launched with a configuration the GPU cannot hold (`OutOfResources: out of resource: shared
memory, Required: 65538, Hardware limit: 65536`): the kernel's block sizes and stages were chosen for GPUs with more
shared memory (or registers) per SM than this one. The GPU is the input; the kernel's owner fixes it (vLLM picks
block sizes per GPU in later releases), and the part that runs the kernel can be switched."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.parts import part_of, repo_path
from bot.core.triage.atlas_readers.candidates import traceback_frames
from bot.core.triage.atlas_readers.quoting import quoted, short_path
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# Triton's words (python/triton/runtime/errors.py, OutOfResources.__init__)
_OUT = re.compile(r"\bout of resource: (?P<what>[a-z][a-z ]{2,30}), Required: (?P<need>\d{1,9}), "
                  r"Hardware limit: (?P<limit>\d{1,9})")
SOURCE = "https://github.com/triton-lang/triton/blob/main/python/triton/runtime/errors.py"


def kernel_resources(st: State) -> None:
    line = next((p for p in [*st.ev.parsed.problems, *st.ev.parsed.loose]
                 if p.kind != "frame" and _OUT.search(p.message)), None)
    if line is None or any(f.id.startswith("kernel-out-of-resources") for f in st.findings):
        return
    hit = _OUT.search(line.message)
    assert hit is not None
    frames = traceback_frames(st.ev.parsed.problems, line)
    ours = [q for q in frames if (repo_path(q.frame_file or "") or "").startswith("vllm/")]
    kernel = frames[-1] if frames else None
    owner = owners.of_path(kernel.frame_file or "") if kernel is not None else None
    part = part_of(repo_path(ours[-1].frame_file or "") or "", ours[-1].frame_function) if ours else None
    where = f" in {short_path(kernel.frame_file or '')} ({kernel.frame_function})" if kernel is not None else ""
    what, need, limit = hit["what"], int(hit["need"]), int(hit["limit"])
    st.findings.append(Finding(
        id=f"kernel-out-of-resources:{what.replace(' ', '-')}", severity="critical", confidence="medium",
        title=f"A Triton kernel needs more {what} than this GPU has ({need} > {limit})",
        summary=(f"Triton refused to launch a kernel{where}: its configuration (block sizes, stages) needs {need} "
                 f"of {what} per SM and this GPU offers {limit}. The configuration was chosen for GPUs with more; "
                 "on this one it never runs."),
        evidence=[quoted(line)],
        remediation=["Upgrade: vLLM's kernels (and the kernel libraries') learn smaller configurations for GPUs like "
                     "this one in later releases — the release notes or the kernel's file history say when.",
                     "Meanwhile switch the part that runs the kernel (its backend setting: the attention backend, "
                     "the MoE backend, `--enforce-eager` where torch.compile made the kernel), or run on a GPU with "
                     f"more {what} per SM."],
        sources=[SOURCE], priority=40, part=part, inputs=["gpu"], host=["gpu"], advice=["upgrade"],
        owner=owner.name if owner is not None else None, at=position(line.origin),
        level=line.origin.level or "EXCEPTION"))
