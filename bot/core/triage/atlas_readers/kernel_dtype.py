"""`"rms_norm_impl" not implemented for 'BFloat16'`: a kernel built without the model's floating-point type on this
device.

PyTorch's dispatch macros raise it (`AT_DISPATCH_*` in ATen/Dispatch.h: the kernel's name, then the scalar type no
case of the switch covers), and so do vLLM's own kernels, which dispatch through the same macros (`VLLM_DISPATCH_*`
in csrc/dispatch_utils.h). For the activation types the model runs in, the input at fault is the dtype the server
chose — `--dtype auto` takes the checkpoint's, most often bfloat16, which some devices and CPU builds have no kernels
for; a type the device has is the way round it while the build or the release that adds the kernel is found."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.atlas_readers.candidates import Candidate

_NO_KERNEL = re.compile(r"\"(?P<op>\w{1,120})\" not implemented for '(?P<dtype>\w{1,40})'")
# the model's activation types by the names PyTorch prints (c10's ScalarType names) and `--dtype`'s words for them;
# an index, boolean or 8-bit type is no choice of `--dtype` (a quantization or a KV-cache dtype, or a bug)
_MODEL_DTYPES = {"BFloat16": "bfloat16", "Half": "float16", "Float": "float32"}
SOURCES = ("https://github.com/pytorch/pytorch/blob/main/aten/src/ATen/Dispatch.h",
           "https://github.com/vllm-project/vllm/blob/main/csrc/dispatch_utils.h",
           "https://docs.vllm.ai/en/latest/configuration/engine_args.html")


def dtype_kernel(cand: Candidate) -> Finding | None:
    p = cand.line
    hit = _NO_KERNEL.search(p.message)
    if hit is None or hit["dtype"] not in _MODEL_DTYPES:
        return None
    op, dtype = hit["op"], _MODEL_DTYPES[hit["dtype"]]
    others = " or ".join(f"`--dtype {d}`" for d in ("float32", "float16", "bfloat16") if d != dtype)
    why = (f"The kernel `{op}` was built without {dtype} for the device it ran on (PyTorch's dispatch, which vLLM's "
           f"own kernels use too, found no case for the type). The model runs in {dtype}: with `--dtype auto` that "
           "is the checkpoint's type, which this device's build has no kernel for.")
    fix = [f"Serve in a type this device's kernels have: {others} (`float32` runs everywhere, at twice the memory "
           "of a 16-bit type).",
           "If the device should have the kernel (a GPU, a CPU with the instructions for it), the build lacks it: a "
           "vLLM release or build for this device that has it."]
    return Finding(id=f"kernel-dtype:{op}:{dtype}", title=f"No `{op}` kernel for {dtype} on this device",
                   severity="critical", confidence="medium", summary=why, evidence=[quoted(p)], remediation=fix,
                   sources=list(SOURCES), priority=40, part="platform", inputs=["--dtype"], knobs=["--dtype"])
