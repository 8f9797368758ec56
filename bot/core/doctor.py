"""Is the GPU host ready for vLLM? The checks of `specops doctor`, from what two fixed probes print.

The probes are POSIX sh scripts run over SSH with their inputs as positional arguments (never in the
script's text): one inside the container or host that runs vLLM, one on the Proxmox host when the
inventory names it. Each prints `==== SECTION` blocks of raw facts; the doctor reads them once
(doctor_facts.py) and judges them one check a function (doctor_host.py, doctor_proxmox.py), so the
judgement is a function of text and the same in every front end. `SPECOPS_SYSROOT` (empty on a real
host) lets the simulated host answer from its own files.

Every check says what it saw (the exact lines) and the fix (the command to run, the lines to add),
and names the knowledge-base entry whose sources back it.
"""

from __future__ import annotations

import re
from importlib import resources

from bot.core.doctor_facts import HostFacts

__all__ = ["container_driver", "probe"]


def probe(name: str) -> str:
    """The text of a probe script (package data: bot/core/probes/doctor-host.sh, doctor-proxmox.sh)."""
    return (resources.files("bot.core") / "probes" / f"doctor-{name}.sh").read_text(encoding="utf-8")


def container_driver(text: str) -> str | None:
    """The container's user-space driver version, from the host probe (libnvidia-ml, else nvidia-smi)."""
    facts = HostFacts.parse(text)
    if facts.libs:
        return facts.libs[0]
    for ln in facts.smi:
        parts = [p.strip() for p in ln.split(",")]
        if len(parts) >= 3 and re.fullmatch(r"\d+\.\d+(\.\d+)?", parts[2]):
            return parts[2]
    return None
