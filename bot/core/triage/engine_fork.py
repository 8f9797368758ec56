"""A child vLLM forked that met CUDA already initialised, on a release that checks for that before it forks.

From the release that added `_maybe_force_spawn` on, vLLM asks whether CUDA is initialised before it starts its
engine core or workers and, when it is, switches the start method to spawn (the `We must use the spawn …` warning).
A script that touched CUDA before creating the engine is caught there. A fork that still met CUDA in vLLM's own child
means CUDA was initialised after that check, on vLLM's own way to the fork (an import or a device query of the release,
or a plugin it loaded): the release's bug, not the script's.
"""

from __future__ import annotations

import re

from bot.core.parsed_log import LogEvent, Origin
from bot.core.triage.context import parse_version
from bot.core.triage.detectors.state import State

_ENTRY = "cuda-reinit-in-forked-worker"
_DAEMONIC = "daemonic-process-children"
_CHECK = "_maybe_force_spawn"
# vLLM's own children: the V1 engine core and the multiprocessing executor's workers (their log prefixes and the files
# that log their start-up failures)
_VLLM_CHILD = re.compile(r"^(?:EngineCore|VllmWorker|Worker_TP|Worker_PP|Worker\b)")
_CHILD_FILES = frozenset({"core.py", "multiproc_executor.py"})
_DOC = "https://docs.vllm.ai/en/latest/design/multiprocessing/"


def started_in_vllms_daemon(st: State) -> None:
    """A process refused inside a daemonic one, printed by vLLM's own worker: the daemonic process is vLLM's child,
    so the code that tried is what runs inside it (a connector, a plugin), not the program around the engine."""
    finding = next((f for f in st.findings if f.id == _DAEMONIC), None)
    if finding is None:
        return
    events = [e for e in st.ev.events if e.kind == _DAEMONIC]
    # whose process started it: vLLM's own (a worker, the API server), a server (no script of the user's around the
    # engine), or a package's code just above multiprocessing's frames
    served = any(c.kind in ("args", "start", "command") for c in st.ev.parsed.clues)
    if not (any(_VLLM_CHILD.match(e.origin.proc or "") or (e.origin.proc or "").startswith("APIServer")
                for e in events) or served or _started_by_a_package(st, events)):
        if _caller(st, events) is None:
            finding.confidence = "medium"  # the assertion alone: no frame shows whose code started the process
        return
    finding.owner = None
    finding.confidence = "medium"
    finding.advice = [a for a in finding.advice if a != "fix-script"]
    finding.remediation = sorted(finding.remediation, key=lambda r: "VllmWorkerProcess" not in r)


def _caller(st: State, events: list[LogEvent]) -> str | None:
    """The file of the frame that called multiprocessing's `start` (None: the traceback shows none)."""
    from bot.core.triage.evidence import position

    at = min(position(e.origin) for e in events)
    frames = [q for q in st.ev.parsed.problems if q.kind == "frame" and position(q.origin) < at]
    return next((q.frame_file or "" for q in reversed(frames) if "multiprocessing/" not in (q.frame_file or "")),
                None)


def _started_by_a_package(st: State, events: list[LogEvent]) -> bool:
    """The frame that called multiprocessing's `start` lies in an installed package (not the user's script)."""
    caller = _caller(st, events)
    return caller is not None and re.search(r"(?:site|dist)-packages/", caller) is not None


def fork_after_check(st: State) -> None:
    """Point a CUDA re-initialisation in vLLM's own forked child at the release, where the release checks first."""
    finding = next((f for f in st.findings if f.id == _ENTRY and f.severity == "critical"), None)
    if finding is None:
        return
    origins = [e.origin for e in st.ev.events if e.kind == _ENTRY]
    # (torch_npu's NPU is not what vLLM's check asks about)
    if not any("CUDA" in o.text for o in origins) or not any(
            _VLLM_CHILD.match(o.proc or "") or (o.source_file or "") in _CHILD_FILES for o in origins):
        return
    from bot.core.atlas import load_atlas

    span = load_atlas().function_span(_CHECK)
    if span is None:
        return
    first, _last, before = span
    version, since = st.ev.context.version, parse_version(first)
    if version is not None and since is not None and version < since:
        return
    if version is None and st.ev.context.vllm_version:
        return  # a release named that no version reads (`main`, `0.7.x`): which side of the check is not known
    release = (f"this release ({st.ev.context.vllm_version}) checks" if version is not None else
               f"releases from {first} on check" + (f" ({before} does not)" if before else ""))
    finding.owner = "vllm"
    # (no release given: the engine core's own lines say a release of the V1 engine, most of which check)
    finding.confidence = "medium" if version is not None else "low"
    finding.advice = [a for a in finding.advice if a != "fix-script"]
    if "upgrade" not in finding.advice:
        finding.advice.append("upgrade")
    finding.summary = (f"{finding.summary} The child that failed is vLLM's own ({_where(origins)}), and {release} "
                       f"whether CUDA is initialised before they fork (`{_CHECK}`), switching to spawn when it is: "
                       "CUDA was initialised after that check, on vLLM's way to the fork — an import or a device "
                       "query of the release's own (or of a plugin it loaded), not your script.").strip()
    finding.remediation = [
        *(r for r in finding.remediation if "__main__" not in r),
        "Upgrade to a later release (the code that touched CUDA before the fork is the release's), and report it "
        "with the release and the command if the latest does the same.",
        # (torch forgets CUDA in a forked child: a program that touched CUDA, forked itself and built the engine in
        # the child passes vLLM's check and meets this in the engine's own fork)
        "One case is the program's: it touched CUDA, then forked itself and built the engine in that child — start "
        "that child with spawn too.",
    ]
    finding.sources = list(dict.fromkeys([*finding.sources, _DOC]))


def _where(origins: list[Origin]) -> str:
    o = next(o for o in origins if _VLLM_CHILD.match(o.proc or "") or (o.source_file or "") in _CHILD_FILES)
    return f"`{o.proc}`" if o.proc else f"logged by `{o.source_file}`"
