"""`AssertionError: 12 is not divisible by 8`: vLLM's own `ensure_divisibility` (vllm/distributed/utils.py), which
its parallel layers call through `divide()` to split a model's dimension — attention or KV heads, hidden,
intermediate or vocabulary sizes, a vision tower's heads — across the ranks of a parallel group. The second number is
most often the tensor-parallel size, the first the model's dimension: a size that divides it is the fix; where the
tensor-parallel size is the first number, there are more ranks than the model has KV heads."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

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
    if m <= 1 or n % m == 0 or (tp is not None and tp not in (n, m)):
        return None  # no failed split, or one of a size this server's tensor parallelism is not
    if tp == n:
        # `divide(tp_size, num_kv_heads)`: more ranks than the model has KV heads, and not a multiple of them
        fits = sorted({d for d in range(1, m + 1) if m % d == 0} | {m * k for k in (2, 3, 4)})
        title = f"The tensor-parallel size ({n}) is no multiple of the model's KV heads ({m})"
        summary = (f"With more ranks ({n}) than the model has KV heads ({m}), vLLM gives each KV head to several "
                   f"ranks and checks that the ranks split evenly: {n} is no multiple of {m}.")
        remedy = f"Use a tensor-parallel size that divides {m} or is a multiple of it ({', '.join(map(str, fits))})"
    else:
        fits = [d for d in range(1, m) if n % d == 0][-3:] or [1]
        title = f"A parallel size ({m}) does not divide a model dimension ({n})"
        summary = (f"vLLM splits a model's dimension across the ranks of a parallel group and checks that it divides: "
                   f"{n} does not split into {m} parts. {m} is "
                   + ("the tensor-parallel size this server runs with" if tp == m else
                      "most often the tensor-parallel size (elsewhere a count of the model's, such as a vision "
                      "tower's heads, divides another of its sizes)")
                   + f"; {n} is one of the model's sizes (heads, KV heads, hidden or vocabulary size).")
        remedy = f"Use a tensor-parallel size that divides {n} (of the sizes below {m}: {', '.join(map(str, fits))})"
    return Finding(
        id="parallel-size-does-not-divide", title=title, severity="critical",
        confidence="medium" if tp is not None else "low", summary=summary, evidence=[quoted(p)],
        remediation=[f"{remedy} — `--tensor-parallel-size`, with `--pipeline-parallel-size` to use the other GPUs; or "
                     "a model whose sizes the GPU count divides."],
        sources=[SOURCE], priority=40, part="parallel", inputs=["--tensor-parallel-size"],
        knobs=["--tensor-parallel-size", "--pipeline-parallel-size"], at=position(p.origin))
