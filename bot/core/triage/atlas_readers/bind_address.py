"""An address a process could not bind: the operating system's own words (EADDRNOTAVAIL "Cannot assign requested
address": the address is not one of this host's; EADDRINUSE "Address already in use": another process holds the
port) beside a frame of a vLLM component that listens — the component's host or port variable is what it was given.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.parts import part_of, repo_path
from bot.core.triage.atlas_readers.env_vars import component_vars
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State

_NOT_MINE = re.compile(r"Cannot assign requested address|\bEADDRNOTAVAIL\b")
_IN_USE = re.compile(r"Address already in use|\bEADDRINUSE\b")
_THREAD = re.compile(r"Exception in thread (?P<name>[A-Za-z][\w-]{2,60})")
_NEAR = 30  # problem lines: the exception and the traceback that shows which component listened sit together
ERRNO_DOC = "https://man7.org/linux/man-pages/man2/bind.2.html"


def _lines_apart(a: ProblemLine, b: ProblemLine) -> int:
    """Lines between two lines: by their numbers (a file read gives byte offsets as positions, a paste line numbers)."""
    if a.origin.line_no is not None and b.origin.line_no is not None:
        return abs(a.origin.line_no - b.origin.line_no)
    return abs(position(a.origin) - position(b.origin))


def bind_address(st: State) -> None:
    """The listener's host (or port) variables, when a bind was refused beside one of vLLM's frames."""
    lines = [*st.ev.parsed.problems]
    for k, p in enumerate(lines):
        if p.kind != "exception" or not (_NOT_MINE.search(p.message) or _IN_USE.search(p.message)):
            continue
        from bot.core.atlas import load_atlas  # only a refused bind needs the atlas's variables

        atlas = load_atlas()
        taken = bool(_IN_USE.search(p.message))
        near = lines[max(0, k - _NEAR):k + _NEAR]
        for frame in [q for q in near if q.kind == "frame" and (q.frame_file or "")]:
            path = repo_path(frame.frame_file or "")
            if not path or not path.startswith("vllm/"):
                continue
            names = _address_vars(atlas, path, taken, st.ev.context.vllm_version)
            if names:
                st.findings.append(_finding(p, frame, path, names, taken))
                return
        # no frame shown: the thread Python names as the one that raised (`Exception in thread
        # nixl_handshake_listener`) is named for its component
        for q in st.ev.parsed.loose:
            thread = _THREAD.search(q.message)
            if thread is None or _lines_apart(p, q) > _NEAR:
                continue
            names = _address_vars(atlas, thread["name"] + ".py", taken, st.ev.context.vllm_version)
            if names:
                st.findings.append(_finding(p, q, f"thread {thread['name']}", names, taken))
                return


def _address_vars(atlas: Atlas, path: str, taken: bool, version: str | None) -> list[str]:
    """The component's variables (`nixl_connector.py` -> `VLLM_NIXL_*`) that give it a host (or, for a port in use,
    a port)."""
    want = ("_PORT",) if taken else ("_HOST", "_IP", "_ADDR", "_ADDRESS")
    return [n for n in component_vars(atlas, path, version) if n.endswith(want)]


def _finding(p: ProblemLine, frame: ProblemLine, path: str, names: list[str], taken: bool) -> Finding:
    listed = ", ".join(f"`{n}`" for n in names)
    what = ("another process on this host already holds the port" if taken else
            "the address is not one of this host's own (a host given to a process on another node)")
    return Finding(
        id=f"bind-address:{path.rsplit('/', 1)[-1].replace(' ', '-')}", severity="critical", confidence="medium",
        title=f"{path.rsplit('/', 1)[-1]} could not bind its address: {p.message[:100]}",
        summary=(f"The operating system refused the bind: {what}. The listener is vLLM's `{path}`"
                 + (f" (`{frame.frame_function}`)" if frame.frame_function else "")
                 + f", which takes its address from {listed}."),
        evidence=[quoted(p), quoted(frame)],
        remediation=[(f"Give each process its own port in {listed} (or stop the process holding it: `ss -ltnp`)."
                      if taken else
                      f"Set {listed} on each node to that node's own address (not copied from another node's "
                      "environment), or unset it so the default applies; `ip -brief addr` lists this host's.")
                     + f" ({ERRNO_DOC})"],
        sources=[ERRNO_DOC], priority=30, part=part_of(path, frame.frame_function) if "/" in path else None,
        inputs=list(names),
        knobs=list(names), at=position(p.origin))
