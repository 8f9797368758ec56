"""A GPU memory access fault on ROCm: the HSA runtime's own words when a kernel touches memory it may not (the
ROCm counterpart of CUDA's illegal memory access). The process aborts; the kernel at fault is the one running,
and the log often names it just before — a kernel library's own lines (`[aiter] LoadKernel: …fmoe…`). vLLM turns
such a library on and off with its own variables (`VLLM_ROCM_USE_AITER`, one per operation beside it): turning
the library's operation off proves it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State

# ROCr's VMFaultHandler: "Memory access fault by GPU node-%u (Agent handle: %p) on address %p. Reason: %s."
_FAULT = re.compile(r"Memory access fault by GPU node-\d+ \(Agent handle: (?:0x)?[0-9a-fA-F]+\) on address "
                    r"(?:0x)?[0-9a-fA-F]+\. Reason: (?P<reason>[^\n]{0,80})")
# a library's own log line (`[aiter] LoadKernel: <kernel> hsaco: …`, `[aiter] import [module_x] …`)
_LIBRARY_LINE = re.compile(r"^\s*\[(?P<lib>[a-z][a-z0-9_]{2,20})\]\s+(?P<rest>.{0,300})")
_KERNEL = re.compile(r"LoadKernel:\s*(?P<kernel>\S{3,200})|import \[(?P<module>\w{3,80})\]")
_BEFORE = 12  # lines: the kernel loaded just before the fault is the one that ran
ROCR_SOURCE = "https://github.com/ROCm/ROCR-Runtime/blob/rocm-3.7.0/src/core/runtime/runtime.cpp"
HIP_DEBUG_DOC = "https://rocm.docs.amd.com/projects/HIP/en/latest/reference/env_variables.html"


def gpu_fault(st: State) -> None:
    lines = sorted([*st.ev.parsed.problems, *st.ev.parsed.loose], key=lambda q: position(q.origin))
    for k, p in enumerate(lines):
        m = _FAULT.search(p.origin.text or p.message)
        if m is None:
            continue
        lib, kernel = _last_kernel(lines[max(0, k - _BEFORE):k])
        st.findings.append(_finding(st, p, m["reason"].strip(" ."), lib, kernel))
        return


def _last_kernel(before: list[ProblemLine]) -> tuple[str | None, str | None]:
    for q in reversed(before):
        line = _LIBRARY_LINE.match(q.origin.text or q.message)
        if line is None:
            continue
        k = _KERNEL.search(line["rest"])
        return line["lib"], (k["kernel"] or k["module"]) if k else None
    return None, None


def _switches(st: State, lib: str, kernel: str | None) -> list[str]:
    """vLLM's variables that turn the library on (`VLLM_ROCM_USE_AITER`) and the operation the kernel's name says
    (`fmoe_…` → `VLLM_ROCM_USE_AITER_MOE`), in the user's release."""
    from bot.core.atlas import load_atlas  # only a fault beside a library's kernel needs vLLM's variables

    stem = f"VLLM_ROCM_USE_{lib.upper()}"
    names = [n for n in load_atlas().env_vars(st.ev.context.vllm_version) if n == stem or n.startswith(stem + "_")]
    words = set(re.split(r"[^a-z0-9]+", (kernel or "").lower()))
    ops = [n for n in names if n != stem and any(w and (w == n[len(stem) + 1:].lower() or
                                                        w.endswith(n[len(stem) + 1:].lower())) for w in words)]
    return ([stem] if stem in names else []) + ops[:1]


def _finding(st: State, p: ProblemLine, reason: str, lib: str | None, kernel: str | None) -> Finding:
    switches = _switches(st, lib, kernel) if lib else []
    ran = f"`{lib}`'s kernel `{kernel}`" if lib and kernel else (f"a `{lib}` kernel" if lib else "a GPU kernel")
    fix = [f"Prove it by turning that off: {', '.join(f'`{s}=0`' for s in reversed(switches))} (the operation's "
           f"own switch first, then the library's), and relaunch; if the fault goes, keep it off and report it "
           f"with the kernel's name and the shapes (a smaller `--max-num-batched-tokens` changes the shapes it "
           f"runs)."] if switches else []
    fix.append(f"`AMD_SERIALIZE_KERNEL=3` makes HIP report a fault at the launch that caused it ({HIP_DEBUG_DOC}); "
               "`--enforce-eager` takes CUDA/HIP graphs out of the picture.")
    return Finding(
        id="rocm-gpu-memory-fault", severity="critical", confidence="medium" if switches else "low",
        title=f"GPU memory access fault (ROCm) while {ran} ran" if lib else "GPU memory access fault (ROCm)",
        summary=(f"The HSA runtime stopped the process: a kernel read or wrote GPU memory it may not (reason: "
                 f"{reason or 'not given'}) — ROCm's counterpart of CUDA's illegal memory access. "
                 + (f"The last kernel the log names before it is {ran}." if lib else
                    "The log names no kernel before it.")),
        evidence=[quoted(p)], remediation=fix, sources=[ROCR_SOURCE, HIP_DEBUG_DOC], priority=30,
        owner=lib, inputs=list(switches), knobs=[*switches, "AMD_SERIALIZE_KERNEL", "--enforce-eager"],
        at=position(p.origin))
