"""A stack dump's reading: a live process stuck in a collective (torch.distributed, NCCL under it) is the hang that
ProcessGroupNCCL's watchdog reports after its timeout — the same switches isolate it (the NCCL catalog's entry)."""

from __future__ import annotations

import re

from bot.core.catalogs import load_catalogs
from bot.core.parsed_log import ProblemLine
from bot.core.triage.findings import Finding

# the catalog entry of a collective that does not finish: a rank waits for peers that never join
_COLLECTIVE_TIMEOUT = "Watchdog caught collective operation timeout"
_SWITCH = re.compile(r"\b([A-Z][A-Z0-9_]{3,}=\w+)|(--[a-z][a-z0-9-]+)")


def stuck_in_collective(finding: Finding, innermost: ProblemLine) -> None:
    """In place: a dump whose innermost frame is torch.distributed's says what waits and how to isolate it."""
    if not innermost.dump or "torch/distributed/" not in (innermost.frame_file or ""):
        return
    hit = next(iter(load_catalogs().hits(_COLLECTIVE_TIMEOUT)), None)
    if hit is None or not hit.entry.isolate:
        return
    entry = hit.entry
    finding.summary += (f" The process waits in a collective (`{innermost.frame_function}`) the other ranks have "
                        f"not joined — the hang NCCL's watchdog reports after its timeout: {entry.meaning}")
    finding.remediation.insert(0, "To isolate it: " + "; ".join(entry.isolate) + ".")
    switches = [m.group(1) or m.group(2) for item in entry.isolate for m in _SWITCH.finditer(item)]
    finding.knobs = list(dict.fromkeys([*finding.knobs, *switches]))
    finding.sources = list(dict.fromkeys([*finding.sources, *entry.sources]))
