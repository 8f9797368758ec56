"""A graph capture that ran out of what each captured graph holds (memory, an accelerator's streams): capture fewer.

vLLM captures one graph per batch size in its capture list (compilation_config's `cudagraph_capture_sizes`, given on
some releases as `--cuda-graph-sizes`); each holds memory of its own and, on some accelerators, streams from a finite
pool. A capture that fails for want of them at start-up is answered by a shorter list, or by capturing none.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.core.atlas import Atlas
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State
    from bot.core.triage.findings import Finding

# PyTorch's CUDA graph class (torch/cuda/graphs.py: CUDAGraph.capture_begin/capture_end) and an accelerator's copy of
# it (torch_npu/npu/graphs.py)
GRAPH_CAPTURE = re.compile(r"(?:^|/)torch(?:_npu)?/(?:cuda|npu)/graphs\.py$")
# a resource the runtime could not give (the CUDA runtime's and Ascend's words)
_SHORT_OF = re.compile(r"(?i)\bout of memory\b|\bresources? (?:are |is )?insufficient\b|\binsufficient resources?\b|"
                       r"\bresource alloc(?:ation)? fail|\balloc(?:ate)? \w+ \w+ fail")
_SIZES = "cudagraph_capture_sizes"
_FLAG = "--cuda-graph-sizes"


def capture_ran_short(st: State, f: Finding, frame: ProblemLine, p: ProblemLine, atlas: Atlas,
                      version: str | None) -> None:
    """In place: a failure raised in a graph class's capture, with a resource the runtime could not give, captures
    fewer sizes."""
    if GRAPH_CAPTURE.search((frame.frame_file or "").replace("\\", "/")) and short_of_resources(st, p):
        fewer_captures(f, atlas, version)


def short_of_resources(st: State, p: ProblemLine) -> bool:
    """The exception's message, or one of the next lines its process printed, says a resource ran out."""
    if _SHORT_OF.search(p.message):
        return True
    lines = sorted([*st.ev.parsed.problems, *st.ev.parsed.loose], key=lambda q: _at(q))
    after = [q for q in lines if _at(q) > _at(p)]
    # the same process's next lines; a log without process tags: only the few lines right below it
    after = [q for q in after if q.origin.pid == p.origin.pid][:20] if p.origin.pid is not None else \
        [q for q in after[:5] if q.origin.pid is None]
    return any(_SHORT_OF.search(q.origin.text or q.message) for q in after)


def _at(q: ProblemLine) -> int:
    from bot.core.triage.evidence import position

    return position(q.origin)


def fewer_captures(f: Finding, atlas: Atlas, version: str | None) -> None:
    """Add the shorter capture list to a capture that ran short: the config field, and the flag where the release
    has one."""
    flag = _FLAG in atlas.cli_flags(version)
    f.remediation.insert(1, "The capture ran out of resources (memory, or an accelerator's streams), and each captured "
                            "batch size holds its own: capture fewer sizes — `--compilation-config "
                            f"'{{\"{_SIZES}\": [1, 2, 4, 8, 16, 32]}}'`"
                            + (f" (or `{_FLAG} 1 2 4 8 16 32`)" if flag else "")
                            + " — or lower `--max-num-seqs`, which bounds the default list.")
    f.knobs = list(dict.fromkeys([*f.knobs, "--compilation-config", *([_FLAG] if flag else [])]))
