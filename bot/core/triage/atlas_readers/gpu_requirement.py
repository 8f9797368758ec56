"""A message that names the GPU generation or compute capability it needs, with the host's GPU beside it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import gpus
from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.location import site_ref
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.atlas_readers.told import told_in
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.atlas import AtlasMatch

_GENERATION_RE = re.compile(r"\b(Kepler|Maxwell|Pascal|Volta|Turing|Ampere|Ada|Hopper|Blackwell)\b[^.]{0,40}?"
                            r"\b(?:or newer|or later|and newer|and later|or above|required|only)\b", re.IGNORECASE)
_ARCH_RE = re.compile(r"not supported (?:on|in|by|for) (?:this|the current|your) (?:gpu |cuda )?"
                      r"(?:architecture|gpu|device|hardware)", re.IGNORECASE)
_CURRENT_CAP_RE = re.compile(r"[Cc]urrent (?:compute\s+)?capability(?: is)?:?\s*(\d{1,2}?)(\d)\b")
_MIN_CAP_RE = re.compile(r"[Mm]in(?:imum)? capability:?\s*(\d{1,2}?)(\d)\b")
# the first part whose words the message uses; else the platform check
_PART_WORDS = (("attention", r"attention|flash|xformers|backend"),
               ("quantization", r"quantiz|awq|gptq|fp8|marlin|int4|int8|w4a16|nvfp4"))
_KNOB_WORDS = (("--dtype", r"bfloat16|bf16|dtype"), ("--quantization", r"quantiz|awq|gptq|marlin|fp8"),
               ("--kv-cache-dtype", r"kv.cache|\bfp8"))


def min_capability(text: str) -> tuple[int, int] | None:
    m = _MIN_CAP_RE.search(text)
    return (int(m[1]), int(m[2])) if m else None


def gpu_requirement(p: ProblemLine, gpu: gpus.Gpu | None, version: str | None = None) -> Finding | None:
    """From vLLM or from a kernel library the atlas does not read: the report puts the host's GPU beside it; an
    attention kernel's requirement also offers the attention backend's switch on this release."""
    if p.kind not in ("exception", "level", "loose"):
        return None
    text = p.message
    gen = _GENERATION_RE.search(text)
    cap = gpus.required_capability(text) or min_capability(text)
    if gen is None and cap is None and _ARCH_RE.search(text) is None:
        return _device_refused(p, gpu)
    need = _need(cap, gen)
    low = text.lower()
    current = _CURRENT_CAP_RE.search(text)
    have = _have(current, gpu)
    part = next((part for part, rx in _PART_WORDS if re.search(rx, low)), "platform")
    newer = gpu is not None and cap is not None and gpu.capability > cap and re.search(r"only supports?", low)
    title = (f"This kernel is built for another GPU than {gpu.name if gpu else 'this one'}: {clip(text, 90)}"
             if newer else f"The GPU is too old for this setting: {clip(text, 90)}")
    remediation, knobs = _remediation(need, have, low), _knobs(low)
    if part == "attention":
        from bot.core import switches

        sw = switches.by_id("attention-backend")
        offer = sw.offer(version) if sw is not None else None
        if offer is not None:
            remediation, knobs = [offer[0], *remediation], [*knobs, offer[1]]
    return Finding(id="gpu-too-old", title=title,
                   severity="critical" if p.kind in ("exception", "loose") or (p.origin.level or "") == "ERROR"
                   else "warning", confidence="medium" if gpu or current else "low",
                   summary=f"The message asks for {need}." + (f" {have}." if gpu else ""),
                   evidence=[quoted(p)], remediation=remediation,
                   priority=45, part=part, knobs=knobs, sources=[gpus.SOURCE], inputs=["gpu"], host=["gpu"],
                   advice=["checkpoint"] if part == "quantization" else [])


# a kernel naming the device it refuses by its SM number (`… kernel does not support current device sm_120`): the
# build has no code for this GPU — older than it needs, or newer than the kernels it ships
# (vLLM's CUTLASS entry points say it as `No compiled cutlass_scaled_mm for a compute capability less than CUDA device
# capability: 121`)
_DEVICE_SM_RE = re.compile(r"(?:does not|doesn't|not) support(?:ed)?(?: on| for| by)? (?:(?:the )?(?:current |this )?"
                           r"(?:device|gpu|arch(?:itecture)?)\W{0,3})?(?:sm_?|SM\s?)(?P<sm>\d{2,3})\b|"
                           r"\bno compiled \w+ for\b[^:\n]{0,80}\bdevice capability:? ?(?P<sm2>\d{2,3})\b",
                           re.IGNORECASE)


def _device_refused(p: ProblemLine, gpu: gpus.Gpu | None) -> Finding | None:
    m = _DEVICE_SM_RE.search(p.message)
    if m is None:
        return None
    sm = m["sm"] or m["sm2"]
    cc = f"{sm[:-1]}.{sm[-1]}"
    # a refusal that names its own way out ("Use FP8 quantization instead"): that, not a later release, is the fix
    said, said_advice, said_knobs = told_in(p.message, spec=False)
    return Finding(
        id="gpu-not-in-kernel-build", title=f"This kernel has no code for the GPU (sm_{sm}): {clip(p.message, 90)}",
        severity="critical" if p.kind in ("exception", "loose") or (p.origin.level or "") == "ERROR" else "warning",
        confidence="medium",
        summary=(f"The kernel refuses the device it ran on, compute capability {cc}"
                 + (f" ({gpu.name})" if gpu else "") + ": the installed build has no code for it."),
        evidence=[quoted(p)], sources=[gpus.SOURCE], priority=45, part="platform", inputs=["gpu"], host=["gpu"],
        advice=said_advice or ["upgrade"], knobs=said_knobs,
        remediation=[*said, "Kernels learn new GPUs in later releases (and their libraries: FlashInfer, CUTLASS "
                     f"builds): read the newest vLLM release notes for sm_{sm} and upgrade; meanwhile choose another "
                     "backend for the failing part (its backend setting) or run on a GPU the build covers."])


def capability_refusal(p: ProblemLine, m: AtlasMatch, gpu: gpus.Gpu | None) -> Finding | None:
    """A capability refusal matched exactly to a site is about the GPU whichever file raises it: say so, with the
    site beside it."""
    need = gpu_requirement(p, gpu)
    if need is None or not (gpus.required_capability(p.message) or min_capability(p.message)
                            or _DEVICE_SM_RE.search(p.message)):
        return None
    need.site = site_ref(m)
    need.sources = [m.url, gpus.SOURCE]
    need.knobs += [k.flag for k in m.knobs if k.flag not in need.knobs]
    if m.gone_after and m.fixed_in and m.site.package == "vllm":
        # the check (or the kernel guard) is gone from later releases: they run this GPU another way
        need.remediation.insert(0, f"vLLM {m.fixed_in} no longer has this check (the last release with it is "
                                   f"{m.gone_after}): upgrade — {m.compare_url or ''}".rstrip(" —"))
        need.advice = list(dict.fromkeys([*need.advice, "upgrade"]))
    need.remediation.append(f"Read the check at your release: {m.url}")
    need.confidence = "high" if m.site.condition else "medium"  # vLLM's own check, matched exactly
    return need


def _need(cap: tuple[int, int] | None, gen: re.Match[str] | None) -> str:
    if cap:
        return f"compute capability ≥ {cap[0]}.{cap[1]}"
    if gen:
        return f"an {gen[1].capitalize()} GPU or newer"
    return "of an architecture this setting supports (the message does not say which)"


def _have(current: re.Match[str] | None, gpu: gpus.Gpu | None) -> str:
    if current:  # the message's own reading of the device it ran on beats a name from the context
        cc = (int(current[1]), int(current[2]))
        era = gpus.generation_of(cc)
        have = f"the GPU vLLM ran on reports compute capability {cc[0]}.{cc[1]}" + (f" ({era})" if era else "")
        if gpu and gpu.capability != cc:
            have += f", not {gpu.name}'s {gpu.capability_text}: check which GPU `CUDA_VISIBLE_DEVICES` selects"
        return have
    if gpu:
        return f"{gpu.name} is {gpu.generation}, compute capability {gpu.capability_text}"
    return "the log does not name the GPU: `nvidia-smi --query-gpu=name,compute_cap --format=csv` tells"


def _remediation(need: str, have: str, low: str) -> list[str]:
    remediation = [f"The GPU must be {need}; {have} (NVIDIA's table: {gpus.SOURCE}).",
                   "On an older GPU: a dtype, quantization or attention backend this generation supports "
                   "(`--dtype half` for bf16 models, another `--quantization`, another attention backend), or a "
                   "newer GPU."]
    if re.search(r"\bfp8", low) and re.search(r"fp8e5\b|e5m2", low):
        # the message lists what this GPU has: E5M2 is a KV-cache format of vLLM's own (`fp8_e5m2`)
        remediation.insert(1, "The message names the FP8 formats this GPU supports, E5M2 among them: if the FP8 is "
                              "the KV cache's, `--kv-cache-dtype fp8_e5m2` selects that format (`auto` keeps the "
                              "model's dtype); an FP8 checkpoint needs another `--quantization` or a newer GPU.")
    return remediation


def _knobs(low: str) -> list[str]:
    knobs = [k for k, rx in _KNOB_WORDS if re.search(rx, low)]
    if re.search(r"\bfp8", low) and "--dtype" in knobs and not re.search(r"bfloat16|bf16", low):
        knobs.remove("--dtype")  # "fp8 dtypes" names the FP8 formats, not the model's --dtype
    return knobs
