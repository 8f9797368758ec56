"""A Unix socket whose path is longer than the kernel allows (`sockaddr_un.sun_path`: 107 characters on Linux):
pyzmq's `ipc path "…" is longer than 107 characters`, Python's `AF_UNIX path too long`. vLLM (its ZMQ IPC under
`VLLM_RPC_BASE_PATH`, the temp dir by default) and the libraries beside it (KV connectors, Ray) build such paths in
the temp dir: a long TMPDIR — a cluster's scratch path, a job's working directory — is what makes them too long."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.triage.atlas_readers.candidates import traceback_frames
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

_TOO_LONG = re.compile(r"\bipc path \"(?P<path>[^\"\n]{1,1000})\" is longer than (?P<max>\d{2,4}) characters|"
                       r"\bAF_UNIX path too long\b")
SOURCES = ("https://github.com/zeromq/pyzmq/blob/main/zmq/backend/cython/_zmq.py",
           "https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/envs.py",
           "https://man7.org/linux/man-pages/man7/unix.7.html")


def socket_path(st: State) -> None:
    line = next((p for p in [*st.ev.parsed.problems, *st.ev.parsed.loose]
                 if p.kind != "frame" and _TOO_LONG.search(p.origin.text or p.message)), None)
    if line is None or any(f.id == "unix-socket-path-too-long" for f in st.findings):
        return
    hit = _TOO_LONG.search(line.origin.text or line.message)
    assert hit is not None
    path, limit = hit["path"], hit["max"] or "107"
    where = (f"`{clip(path, 120)}` is {len(path)} characters, over the {limit} a Unix socket's path may hold"
             if path else f"a Unix socket's path is over the {limit} characters the kernel allows")
    frames = traceback_frames(st.ev.parsed.problems, line)
    owner = owners.of_path(frames[-1].frame_file or "") if frames else None
    st.findings.append(Finding(
        id="unix-socket-path-too-long", severity="critical", confidence="medium",
        title="A Unix socket's path is too long for the kernel (the temp dir's path is the usual cause)",
        summary=(f"{where}. Sockets of vLLM's processes (ZMQ IPC) and of libraries beside it are made under the "
                 "temp dir (TMPDIR; vLLM's own under VLLM_RPC_BASE_PATH, which defaults to it): a long directory "
                 "leaves too little room for the socket's generated name."),
        evidence=[quoted(line)],
        remediation=["Point TMPDIR (and VLLM_RPC_BASE_PATH, where vLLM's own sockets are the ones refused) at a "
                     "short directory, e.g. `export TMPDIR=/tmp/v` before starting vLLM; the socket's name then fits.",
                     "If the path was built by a library (a KV connector, Ray), a release of it that shortens its "
                     "socket names also ends it."],
        sources=list(SOURCES), priority=30, part=None, inputs=["TMPDIR"], knobs=["TMPDIR", "VLLM_RPC_BASE_PATH"],
        host=[], owner=owner.name if owner is not None else None, at=position(line.origin),
        level=line.origin.level or "EXCEPTION"))
