"""A traceback cut before its exception line (a paste that stops inside it), whose frames are those of a failure the
knowledge base knows: the entry's `frames` say which (Python's multiprocessing re-importing the main script under
spawn; a forked worker's first CUDA call). The words that would have named it are missing, so the finding is the
entry's at the signature's confidence (never high), and says that it rests on the frames."""

from __future__ import annotations

from bot.core.kb import Entry, FrameSignature
from bot.core.parsed_log import LogEvent, ProblemLine
from bot.core.triage.detectors.common import spec_decoding
from bot.core.triage.detectors.log_lines import entry_finding
from bot.core.triage.detectors.state import Found, State
from bot.core.triage.evidence import position


def _cut_tracebacks(problems: list[ProblemLine]) -> list[list[ProblemLine]]:
    """The frames of each traceback with no exception line of its own, outermost first."""
    frames: dict[int, list[ProblemLine]] = {}
    ended: set[int] = set()
    for p in problems:
        if p.traceback_id is None:
            continue
        if p.kind == "frame" and p.frame_file:
            frames.setdefault(p.traceback_id, []).append(p)
        elif p.kind == "exception":
            ended.add(p.traceback_id)
    return [f for tb, f in frames.items() if tb not in ended]


def _signature(entry: Entry, frames: list[ProblemLine]) -> FrameSignature | None:
    pairs = [(f.frame_file or "", f.frame_function or "") for f in frames]
    return next((s for s in entry.frames if s.matches(pairs)), None)


def frame_signature_findings(st: State) -> Found:
    out = Found()
    said = {e.kind for e in st.ev.events}  # an entry its words already matched needs no frames
    framed = [e for e in st.base.entries if e.frames and e.id not in said]
    if not framed:
        return out
    spec_unsure = spec_decoding(st.ev) != "on"
    for frames in _cut_tracebacks(list(st.ev.parsed.problems)):
        for entry in framed:
            sig = _signature(entry, frames)
            if sig is None or any(f.id == entry.id for f in out.findings):
                continue
            last = frames[-1]
            f = entry_finding(st, entry, [LogEvent(entry.id, last.origin)], spec_unsure)
            f.confidence = sig.confidence
            f.title = f"{entry.title} (told by its frames: the exception line is cut)"
            f.evidence = [f"the traceback ends in {last.frame_file} in `{last.frame_function}` (line "
                          f"{last.frame_line}) with no exception line after it", *f.evidence[1:]]
            f.at = position(last.origin)
            out.findings.append(f)
    return out
