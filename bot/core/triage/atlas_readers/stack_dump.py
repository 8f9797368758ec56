"""A stack dump's reading (bot.core.dump_lines): a fatal error's dump is a crash where its running thread was; a
timeout's, or any dump beside an engine that stopped (core.triage.stall), is a hang there; otherwise it is a snapshot
of a live process — where a thread was, which alone proves nothing (a busy server is somewhere too).

A hang inside one of torch.distributed's collectives is the hang ProcessGroupNCCL's watchdog reports after its
timeout: the NCCL catalog's entry for it says which switches isolate it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from bot.core.catalogs import load_catalogs
from bot.core.parsed_log import ProblemLine
from bot.core.triage.findings import Finding
from bot.core.triage.stall import engine_stall

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

Reading = Literal["crash", "hang", "snapshot"]
HEAD: dict[Reading, str] = {"crash": "Crash in", "hang": "Stuck in", "snapshot": "Waiting in"}
WHAT: dict[Reading, str] = {
    "crash": "A fatal error's stack dump (Python's faulthandler: where the running thread was when the process died)",
    "hang": "A stack dump of a process that made no progress (where its running thread waited)",
    "snapshot": "A stack dump of a live process (where its running thread was when it was taken; the log shows no "
                "stall, so it proves nothing alone)",
}
# the catalog entry of a collective that does not finish: a rank waits for peers that never join
_COLLECTIVE_TIMEOUT = "Watchdog caught collective operation timeout"
# torch.distributed's collectives and point-to-point calls (not its rendezvous: a store the ranks cannot reach is the
# NCCL catalog's store entry, not a collective)
_COLLECTIVE = re.compile(r"^(?:all_reduce\w*|all_gather\w*|reduce_scatter\w*|broadcast\w*|all_to_all\w*|barrier|"
                         r"monitored_barrier|reduce|gather\w*|scatter\w*|send|recv|isend|irecv|batch_isend_irecv|wait)$")


def reading_of(st: State, frame: ProblemLine) -> Reading | None:
    """None for a traceback's frame."""
    if not frame.dump:
        return None
    if frame.dump == "fatal":
        return "crash"
    if frame.dump == "timeout" or engine_stall(st.ev.parsed.engine) is not None:
        return "hang"
    return "snapshot"


def stuck_in_collective(finding: Finding, innermost: ProblemLine, reading: Reading | None) -> None:
    """In place: a hang whose innermost frame is one of torch.distributed's collectives says what waits and how to
    isolate it."""
    if reading != "hang" or "torch/distributed/" not in (innermost.frame_file or "") \
            or not _COLLECTIVE.match(innermost.frame_function or ""):
        return
    hit = next(iter(load_catalogs().hits(_COLLECTIVE_TIMEOUT)), None)
    if hit is None or not hit.entry.isolate:
        return
    entry = hit.entry
    finding.summary += (f" The process waits in a collective (`{innermost.frame_function}`) the other ranks have "
                        f"not joined — the hang NCCL's watchdog reports after its timeout: {entry.meaning}")
    finding.remediation.insert(0, "To isolate it: " + "; ".join(entry.isolate) + ".")
    finding.knobs = list(dict.fromkeys([*finding.knobs, *entry.switches]))
    finding.sources = list(dict.fromkeys([*finding.sources, *entry.sources]))
