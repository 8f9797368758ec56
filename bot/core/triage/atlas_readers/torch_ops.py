"""A custom operator looked up and not found: `'_OpNamespace' 'NS' object has no attribute 'OP'`.

PyTorch's `torch.ops.NS.OP` raises this when no loaded library registered OP in namespace NS (torch/_ops.py,
`_OpNamespace.__getattr__`). The namespace says whose compiled extension it is: vLLM's own (`csrc/`'s
`TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, …)` and its `CONCAT` sub-libraries, the MoE and ROCm extensions,
its FlashAttention builds, the Python-registered `torch.ops.vllm`) or another package's — an out-of-tree platform
plugin registers its own (vllm-ascend: `CONCAT(_C, _ascend)`). Either that extension did not load (it was built
for another torch or platform, or nothing imported it before the call) or it is another build than the Python
code calling it: the words place the failure in that extension's install, whatever frame printed them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.triage.atlas_readers.host import gpu_of
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.findings import Advice, Finding

if TYPE_CHECKING:
    from bot.core.triage.atlas_readers.candidates import Candidate
    from bot.core.triage.detectors.state import State

_UNREGISTERED = re.compile(r"'_OpNamespace' '(?P<ns>\w{1,80})' object has no attribute '(?P<op>\w{1,120})'")
# vLLM's own namespaces: csrc/torch_bindings.cpp (`_C` and its `_cache_ops`, `_cuda_utils`, `_custom_ar`
# sub-libraries), csrc/cpu/torch_bindings.cpp (`_cpu`), csrc/moe/ (`_moe_C`), csrc/rocm/ (`_rocm_C`), the
# vllm-flash-attn and FlashMLA builds, and `torch.ops.vllm` registered from Python (vllm/utils/torch_utils.py)
_VLLM_NAMESPACE = re.compile(r"^(?:_C(?:_cache_ops|_cuda_utils|_custom_ar|_cpu)?|_moe_C|_rocm_C|_vllm_fa\d_C|"
                             r"_flashmla(?:_extension)?_C|vllm)$")
# vLLM's own warning when its compiled module does not import (vllm/_custom_ops.py)
_VLLM_IMPORT_FAILED = re.compile(r"Failed to import from vllm\.\w+ with (?P<why>.{1,400})")
# the loader missing a C++ function over torch tensors (Itanium mangling: `_Z<len><name>` then `RN2at6Tensor`, an
# `at::Tensor&` parameter), in Linux's words or macOS dyld's
_OWN_KERNEL = re.compile(r"(?:undefined symbol: |symbol not found in flat namespace ')_{1,2}Z(?P<len>\d{1,3})"
                         r"(?P<name>[A-Za-z_]\w{0,120}?)(?:R|K|P)*N2at6Tensor")
SOURCES = ("https://github.com/pytorch/pytorch/blob/main/torch/_ops.py",
           "https://github.com/vllm-project/vllm/blob/main/csrc/torch_bindings.cpp",
           "https://github.com/vllm-project/vllm/blob/main/vllm/_custom_ops.py")
PLUGIN_SOURCES = ("https://github.com/pytorch/pytorch/blob/main/torch/_ops.py",
                  "https://github.com/vllm-project/vllm-ascend/blob/main/csrc/torch_binding.cpp", owners.PLUGIN_DOC)


def unregistered_op(st: State, cand: Candidate) -> Finding | None:
    """The finding for an operator no loaded library registered, or None when the line is not that."""
    m = _UNREGISTERED.search(cand.line.message)
    if m is None:
        return None
    ns, op = m.group("ns"), m.group("op")
    if _VLLM_NAMESPACE.match(ns):
        return _vllm_op(st, cand, ns, op)
    return _foreign_op(cand, ns, op)


def _vllm_op(st: State, cand: Candidate, ns: str, op: str) -> Finding:
    why = next((w.group("why") for p in st.ev.parsed.problems
                if (w := _VLLM_IMPORT_FAILED.search(p.message)) is not None), None)
    version = st.ev.context.vllm_version
    summary = (f"`torch.ops.{ns}.{op}` is not registered: the compiled extension of vLLM that defines it is not "
               "loaded, or is another build than the Python code calling it (a wheel for another platform or "
               "torch, a source checkout whose kernels were not rebuilt after an update).")
    remediation = [f"Reinstall vLLM as one build for this platform and torch (`pip install --force-reinstall "
                   f"vllm=={version or 'X'}`, or rebuild the source tree: `pip install -e .`), then check "
                   "`python -c 'import vllm._C'` imports without error."]
    advice: list[Advice] = []
    if why is not None:
        summary += f" Earlier the log says vLLM's compiled module failed to import: {why}"
        own = _OWN_KERNEL.search(why)
        if own is not None:
            # vLLM's module names one of vLLM's own kernels (a function over torch tensors) it was built without: the
            # build of this tree left out the file that defines it, and rebuilding the same way leaves it out again
            name = own["name"][:int(own["len"])]
            remediation.insert(0, f"vLLM's compiled module refers to `{name}`, one of vLLM's own kernels (it takes "
                                  "torch tensors), that the build did not compile in: the build configuration left "
                                  "the file that defines it out — for this platform, or for the GPU architectures "
                                  "built (`TORCH_CUDA_ARCH_LIST` without this GPU's). Rebuilding it the same way "
                                  "changes nothing: build for this GPU's architecture, or a release or commit whose "
                                  "build compiles it here (a later one with the fix; or the one before the change "
                                  "that broke it), or install a prebuilt package for this platform.")
            advice = ["upgrade", "pin"]
    gpu = gpu_of(st)
    if ns == "_C" and gpu is None:
        remediation.append("On a CPU-only or non-CUDA host, install the vLLM build for that platform: the CUDA "
                           "wheel's kernels are not there.")
    return Finding(
        id=f"unregistered-op:{ns}", title=f"vLLM's compiled operator `{ns}.{op}` is not registered",
        severity="critical", confidence="medium", summary=summary, evidence=[quoted(cand.line)],
        remediation=remediation, sources=list(SOURCES), priority=40, part="platform", owner="vllm",
        inputs=[f"torch.ops.{ns}.{op}"], deps=["vllm"], advice=advice)


def _foreign_op(cand: Candidate, ns: str, op: str) -> Finding:
    plugin = next((o for f in cand.frames if (o := owners.of_path(f.frame_file or "")) is not None
                   and o.name == "plugin"), None)
    who = f"the vLLM plugin `{plugin.package}`" if plugin is not None else \
        "a package outside vLLM (an out-of-tree platform plugin registers its own, e.g. vllm-ascend's `_C_ascend`)"
    remediation = [f"Install the build of {who} made for this vLLM and torch, and check that its compiled "
                   f"extension imports before the call (`torch.ops.{ns}` lists what it registered); or run without "
                   "the plugin (`VLLM_PLUGINS=` empty) to confirm."]
    return Finding(
        id=f"unregistered-op:{ns}", title=f"The operator `{ns}.{op}` is not registered: the extension of {who} "
                                          "is not loaded",
        severity="critical", confidence="medium" if plugin is not None else "low",
        summary=(f"`torch.ops.{ns}.{op}` is not registered. The namespace `{ns}` is none of vLLM's: it belongs to "
                 f"{who}. Its compiled extension did not load (built for another torch, or nothing imported it "
                 "before this call), or lacks this operator."),
        evidence=[quoted(cand.line)], remediation=remediation, sources=list(PLUGIN_SOURCES), priority=40,
        part="platform", owner="plugin", inputs=[f"torch.ops.{ns}.{op}"], advice=["disable-plugin"],
        deps=[plugin.package.replace("_", "-")] if plugin is not None else [])
