"""What the inputs a failing line names turn into: the flags and variables behind them (with a sentence each), the
devices a UUID names, and the package a missing module belongs to. Shared by the readers of a traceback
(frame_first) and of an exception's words alone (words_only)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.triage.atlas_readers.quoting import clip
from bot.core.triage.frames import Input

if TYPE_CHECKING:
    from bot.core.atlas import Atlas

# a GPU or MIG device named by its UUID (CUDA_VISIBLE_DEVICES takes indices or UUIDs: the CUDA Programming Guide's
# "CUDA Environment Variables"); code that parses the variable as integers fails on the UUID form
_DEVICE_UUID = re.compile(r"'(?:MIG-GPU-|MIG-|GPU-)[0-9a-fA-F]{8}-[0-9a-fA-F-]{20,}(?:/\d+/\d+)?'")
CUDA_ENV_DOC = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#cuda-environment-variables"
PLUGIN_ENV = "VLLM_PLUGINS"

def device_ids(message: str) -> list[Input]:
    if _DEVICE_UUID.search(message):
        return [Input("env", "CUDA_VISIBLE_DEVICES", "holds a GPU or MIG UUID where vLLM parses device indices")]
    return []


# vLLM's own short names for the parallel sizes its code divides by (`tp_size = get_tensor_model_parallel_world_size()`)
_SHORT = {"tp_size": "tensor_parallel_size", "tp_world_size": "tensor_parallel_size",
          "pp_size": "pipeline_parallel_size", "dp_size": "data_parallel_size"}


def settable(atlas: Atlas, inputs: list[Input], version: str | None) -> list[Input]:
    """The inputs, a divisor or a bare name an assertion reads kept as a setting only when a flag sets the field of
    its name (`tensor_parallel_size`): otherwise a local count that came out 0 is the code's own, and names nothing
    the user set, and a local an assertion compares is read as it is."""
    out: list[Input] = []
    for i in inputs:
        name = _SHORT.get(i.name, i.name)
        if i.kind not in ("divisor", "local"):
            out.append(i)
        elif atlas.knobs_for([f"?.{name}", f"self.{name}"], version):
            out.append(Input("config", name, i.detail))
        elif i.kind == "local":
            out.append(Input("attribute", i.name, i.detail))
    return out


def knobs_of(atlas: Atlas, inputs: list[Input], version: str | None,
              spec: bool) -> tuple[list[str], list[str]]:
    """The flags and variables behind the inputs, and a sentence per input."""
    knobs: list[str] = []
    lines: list[str] = []
    known_env = atlas.env_vars(version)
    for i in inputs:
        if i.kind == "env":
            knobs.append(i.name)
            help_text = known_env.get(i.name, "")
            lines.append(f"The failing line reads the environment variable `{i.name}` ({i.detail})"
                         + (f": {clip(help_text, 160)}" if help_text else "") + ".")
        elif i.kind == "config":
            found = atlas.knobs_for([f"?.{i.name}", f"self.{i.name}"], version)
            flag = next((k.flag for k in found if spec or k.flag != "--speculative-config"), None)
            if flag:
                knobs.append(flag)
            lines.append(f"The failing line reads the config field `{i.name}` ({i.detail})"
                         + (f", set by `{flag}`" if flag else ", from the model's (or drafter's) config.json") + ".")
        elif i.kind == "checkpoint":
            lines.append(f"The checkpoint tensor `{i.name}` has no place in the model vLLM built ({i.detail}).")
        elif i.kind == "argument":
            lines.append(f"The call passes `{i.name}`, which the callee does not take ({i.detail}): the caller and "
                         "the callee come from different releases.")
        elif i.kind == "module":
            lines.append(f"`{i.name}` is not in the installed package ({i.detail}).")
        elif i.kind in ("attribute", "list", "key", "shape"):
            lines.append(f"The failing line reads `{i.name}` ({i.detail}).")
    return list(dict.fromkeys(knobs)), list(dict.fromkeys(lines))  # an input the line reads twice: one sentence


def knob_lines(knobs: list[str]) -> list[str]:
    return [f"Check `{k}`: the failing line reads it." for k in knobs[:2]]


def missing_package(module: Input | None) -> tuple[str, str] | None:
    """A module of another package that is missing, or lacks a name it should have: that package's install."""
    if module is None or module.name == "vllm" or module.name.startswith("vllm."):
        return None  # vLLM's own modules (a plugin's `vllm_ascend` is another package)
    top = module.name.split(".", 1)[0]
    owner = owners.of_package(top)
    if owner.name in ("vllm", "python", "user-script"):
        return None
    # what to install is the package, named as pip names it (`lmcache`, `torch-npu`), also when its owner is a
    # plugin or has no name of its own
    dep = owner.name if owner.name in owners.LIBRARIES.values() and owner.name != "plugin" else \
        top.lower().replace("_", "-")
    if "." in module.name:
        return dep, (f"`{module.name}` is not in the installed `{top}`: another version of it than this vLLM "
                            f"was built against — install the version vLLM pins (`pip show {top} vllm`).")
    return dep, (f"The module `{top}` is not installed: install it (`pip install {top.replace('_', '-')}`, the "
                        "version this vLLM release pins), or turn off the feature that imports it.")
