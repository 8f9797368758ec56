"""`doctor [HOST]`: is the GPU host ready — devices, driver versions, /dev/shm, the Proxmox side, stale
servers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.app.verbs.spec import Call, Exit, Verb, opt
from bot.errors import InputError

if TYPE_CHECKING:
    from bot.core.results.doctor import DoctorReport


@dataclass(frozen=True)
class Args:
    host: str | None = opt("--host", help="the host (inventory name) that runs vLLM", required=True)
    profile: str | None = opt("--profile", help="the profile to check for (default: the one deployed)")


def run(call: Call, args: Args) -> DoctorReport:
    from bot.app.doctor import doctor

    if args.host is None:
        raise InputError("`doctor` needs a host")
    return doctor(call.config, args.host, args.profile, hosts=call.graph.hosts, store=call.graph.existing_store())


def _exit(result: DoctorReport, _args: Args) -> Exit:
    return Exit(1 if result.status == "failed" else 0)


VERB: Verb[Args, DoctorReport] = Verb(
    name="doctor", summary="is the GPU host ready: devices, driver versions, /dev/shm, the Proxmox side, stale servers",
    chat=("host",), args=Args, run=run, exit=_exit, results=("bot.core.results.doctor.DoctorReport",),
    cli_help="Is the GPU host ready? Devices, driver versions, /dev/shm, disk, vLLM, the port, stale servers — "
             "and, when the inventory names it (hosts.H.proxmox), the Proxmox side: vfio-pci vs nvidia, the LXC "
             "config.",
)
