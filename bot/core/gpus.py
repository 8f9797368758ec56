"""NVIDIA GPUs by name: generation and compute capability, for the checks vLLM makes on them.

A refusal such as "Bfloat16 is only supported on GPUs with compute capability of at least 8.0" says
what it needs, not what the host has; the report puts the two side by side. The numbers are NVIDIA's
own table (SOURCE); a name not in it is left alone rather than guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SOURCE = "https://developer.nvidia.com/cuda-gpus"


@dataclass(frozen=True)
class Gpu:
    name: str
    generation: str
    capability: tuple[int, int]

    @property
    def capability_text(self) -> str:
        return f"{self.capability[0]}.{self.capability[1]}"


# (pattern over the name as nvidia-smi, torch or a person writes it, generation, compute capability);
# the first that matches wins, so the specific names come before the families.
_TABLE: tuple[tuple[str, str, tuple[int, int]], ...] = (
    (r"\bgb10\b|dgx\s*spark", "Blackwell", (12, 1)),
    (r"\bgb?200\b|\bb200\b|\bb100\b", "Blackwell", (10, 0)),
    (r"rtx\s*pro\s*6000\s*blackwell|rtx\s*50[5-9]0|\brtx\s*5090\b", "Blackwell", (12, 0)),
    (r"\bgh200\b|\bh200\b|\bh100\b|\bh800\b|\bh20\b", "Hopper", (9, 0)),
    (r"\bl40s?\b|\bl4\b|\brtx\s*40[5-9]0\b|rtx\s*(?:a?6000|5000|4500|4000)\s*ada|\brtx\s*6000\s*ada", "Ada Lovelace",
     (8, 9)),
    (r"\ba100\b|\ba800\b|\ba30\b", "Ampere", (8, 0)),
    (r"\ba10g?\b|\ba40\b|\ba16\b|\ba2\b|rtx\s*a[2-6]000\b|\brtx\s*30[5-9]0\b", "Ampere", (8, 6)),
    (r"jetson\s*orin|\bagx\s*orin\b", "Ampere", (8, 7)),
    (r"\bt4\b|\brtx\s*20[6-8]0\b|quadro\s*rtx|titan\s*rtx|gtx\s*16[5-6]0", "Turing", (7, 5)),
    (r"\bv100\b|titan\s*v\b", "Volta", (7, 0)),
    (r"\bp100\b", "Pascal", (6, 0)),
    (r"\bp40\b|\bp4\b|gtx\s*10[5-8]0|titan\s*xp\b", "Pascal", (6, 1)),
    (r"\bk80\b", "Kepler", (3, 7)),
)
_COMPILED = tuple((re.compile(p, re.IGNORECASE), g, c) for p, g, c in _TABLE)
# a GPU named in a log or a thread: "NVIDIA GeForce RTX 2080 Ti", "Tesla V100-SXM2-32GB", "NVIDIA A100-SXM4-80GB"
_NAME_RE = re.compile(
    r"(?:NVIDIA\s+|Tesla\s+|GeForce\s+|Quadro\s+)*(?:GeForce\s+)?(?:RTX\s*(?:PRO\s*)?\w+(?:\s*(?:Ti|Ada|Blackwell))?|"
    r"GTX\s*\d{3,4}(?:\s*Ti)?|TITAN\s*\w+|[ABHLPTVK]\d{1,3}[A-Z]?(?=[-\s,)]|$)|GB?\d{2,3}|GH200|DGX\s+Spark|"
    r"Jetson\s+\w+)",
    re.IGNORECASE)


# compute capability major.minor -> generation, from the same table
_GENERATIONS: tuple[tuple[tuple[int, int], str], ...] = (
    ((12, 0), "Blackwell"), ((10, 0), "Blackwell"), ((9, 0), "Hopper"), ((8, 9), "Ada Lovelace"),
    ((8, 0), "Ampere"), ((7, 5), "Turing"), ((7, 0), "Volta"), ((6, 0), "Pascal"), ((5, 0), "Maxwell"),
    ((3, 0), "Kepler"))


def generation_of(capability: tuple[int, int]) -> str | None:
    """The generation a compute capability belongs to (5.2 is Maxwell, 7.5 Turing)."""
    return next((g for floor, g in _GENERATIONS if capability >= floor), None)


def lookup(name: str) -> Gpu | None:
    for rx, generation, capability in _COMPILED:
        if rx.search(name):
            return Gpu(name.strip(), generation, capability)
    return None


def find_in(text: str) -> Gpu | None:
    """The first NVIDIA GPU a text names that the table knows."""
    for m in _NAME_RE.finditer(text):
        gpu = lookup(m.group(0))
        if gpu is not None:
            return gpu
    return None


_CAPABILITY_RES = (
    re.compile(r"(?:has_device_capability|is_device_capability(?:_family)?)\(\s*(\d{2,3})\s*\)"),
    re.compile(r"capability\(\)\s*[<>=!]+\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)"),
    re.compile(r"compute capability (?:of )?(?:at least |>= ?|≥ ?)?(\d+)\.(\d+)", re.IGNORECASE),
    # PyTorch's check before Inductor compiles with Triton: "Triton only supports devices of CUDA Capability >= 7.0"
    re.compile(r"\bCUDA capability (?:>= ?|≥ ?|of at least |at least )(\d+)\.(\d+)", re.IGNORECASE),
    # vLLM's kernel selection: "MarlinLinearKernel requires capability 80, current compute capability is 75"
    re.compile(r"\brequires (?:minimum )?capability (\d{2,3})\b"),
    # Triton's and kernels' own words: "not supported on CUDA arch < 89", "only supports sm120"
    re.compile(r"\b(?:CUDA )?arch(?:itecture)? (?:<|>=|below|less than) ?(?:sm_?)?(\d{2,3})\b", re.IGNORECASE),
    re.compile(r"\bonly supports? sm_?(\d{2,3})\b", re.IGNORECASE),
)
# Triton's FP8 E4M3 ("fp8e4nv") needs compute capability 8.9: its own check says "fp8e4nv data type is not supported
# on CUDA arch < 89" (https://github.com/triton-lang/triton/blob/v3.1.0/python/triton/language/semantic.py); the
# other wording ("not supported in this architecture") does not
_FP8E4NV = re.compile(r"\bfp8e4nv\b.{0,40}not supported", re.IGNORECASE)


def required_capability(*texts: str | None) -> tuple[int, int] | None:
    """The compute capability a condition or a message asks for: `has_device_capability(80)` -> (8, 0)."""
    for text in texts:
        if not text:
            continue
        if _FP8E4NV.search(text):
            return (8, 9)
        for rx in _CAPABILITY_RES:
            m = rx.search(text)
            if m is None:
                continue
            if m.lastindex == 1:
                value = int(m[1])
                return (value // 10, value % 10)
            return (int(m[1]), int(m[2]))
    return None
