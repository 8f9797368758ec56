"""Which process holds a row (a lock, a deployment's run, a rollout) and whether it is gone: this machine's boot and
PID namespace, a PID's start time, and the id a replica goes by."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def boot_id() -> str:
    """This machine's boot and PID namespace: a PID from another boot, another machine or another container
    (which shares the host's boot but not its PIDs) says nothing about the processes here."""
    boot = _kernel_boot()
    try:
        space = os.readlink("/proc/self/ns/pid")
    except OSError:
        return boot
    return f"{boot}/{space.removeprefix('pid:[').rstrip(']')}" if boot else ""


def _kernel_boot() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def this_boot(boot: str | None) -> bool:
    """Was `boot` recorded by a process whose PIDs this one sees? A row of a release before namespaces
    holds the kernel's boot alone."""
    if not boot:
        return False
    return boot == boot_id() or ("/" not in boot and boot == _kernel_boot())


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat from field 3 on (state, ppid, …): the command name (field 2) may hold spaces and parens."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def process_start(pid: int) -> int | None:
    """When PID started, in clock ticks since boot (/proc/PID/stat field 22): with the boot id, it names one
    process for good, where a PID alone is reused (a restarted container's bot is PID 1 again)."""
    fields = _stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def holder_gone(pid: int | None, boot: str | None, started: int | None = None) -> bool:
    """Is the process that took a lock gone? Only knowable for a lock taken in this boot of this machine.
    `started`: the holder's start time (process_start); a live process with that PID but another start time
    is another process that reused the PID, this one's included."""
    if pid is None or not this_boot(boot):
        return False  # an old lock without a holder, or one from elsewhere: only its age or --force breaks it
    if started is not None:
        now = process_start(pid)
        if now is None or now != started:
            return True  # gone, or its PID is someone else's now
    elif pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    fields = _stat(pid)  # a zombie holds nothing
    return fields is not None and len(fields) > 0 and fields[0] == "Z"


def replica_id() -> str:
    """This process among the bots on one store: machine, PID and the PID's start (a reused PID is another)."""
    me = os.getpid()
    return f"{socket.gethostname()}/{me}/{process_start(me) or 0}"
