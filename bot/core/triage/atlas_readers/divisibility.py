"""`AssertionError: 12 is not divisible by 8`: vLLM's own `ensure_divisibility` (vllm/distributed/utils.py), which
its parallel layers call through `divide()` to split a model's dimension — attention or KV heads, hidden,
intermediate or vocabulary sizes, a vision tower's heads — across the ranks of a parallel group. The second number is
the parallel size (the tensor-parallel size most often), the first the model's dimension: a size that divides it is
the fix."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Confidence, Finding

if TYPE_CHECKING:
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State

_NOT_DIVISIBLE = re.compile(r"^(?P<n>\d{1,9}) is not divisible by (?P<m>\d{1,6})$")
SOURCE = "https://github.com/vllm-project/vllm/blob/main/vllm/distributed/utils.py"


def not_divisible(st: State, p: ProblemLine, exc: str) -> Finding | None:
    hit = _NOT_DIVISIBLE.match(p.message.strip()) if exc == "AssertionError" else None
    if hit is None:
        return None
    n, m = int(hit["n"]), int(hit["m"])
    tp = st.ev.context.tensor_parallel_size
    sure: Confidence = "medium" if tp == m else "low"
    fits = [d for d in range(1, m) if n % d == 0 and m % d == 0][-3:] or [1]
    return Finding(
        id="parallel-size-does-not-divide", title=f"A parallel size ({m}) does not divide a model dimension ({n})",
        severity="critical", confidence=sure,
        summary=(f"vLLM splits a model's dimension across the ranks of a parallel group and checks that it divides: "
                 f"{n} does not split into {m} parts. {m} is the group's size"
                 + (" — the tensor-parallel size this server runs with" if tp == m else
                    " (the tensor-parallel size most often; the pipeline or expert group's otherwise)")
                 + f", {n} one of the model's sizes (its heads, KV heads, hidden or vocabulary size, a vision "
                   "tower's heads)."),
        evidence=[quoted(p)],
        remediation=[f"Use a parallel size that divides {n} (of the sizes below {m}: "
                     f"{', '.join(str(d) for d in fits)}) — `--tensor-parallel-size`, with `--pipeline-parallel-size` "
                     "to use the other GPUs; or a model whose sizes the GPU count divides."],
        sources=[SOURCE], priority=40, part="parallel", inputs=["--tensor-parallel-size"],
        knobs=["--tensor-parallel-size", "--pipeline-parallel-size"], at=position(p.origin))
