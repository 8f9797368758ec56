"""`doctor [HOST]`: is the GPU host ready — devices, driver versions, /dev/shm, the Proxmox side, stale
servers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.app.verbs.spec import Call, ChatArgs, Exit, Opt, Verb
from bot.errors import InputError

if TYPE_CHECKING:
    from bot.core.results.doctor import DoctorReport


def run(call: Call, args: ChatArgs) -> DoctorReport:
    from bot.app.doctor import doctor

    if args.host is None:
        raise InputError("`doctor` needs a host")
    return doctor(call.config, args.host, None, hosts=call.graph.hosts, store=call.graph.existing_store())


def cli(call: Call, o: dict[str, object]) -> tuple[DoctorReport, Exit]:
    from bot.app.doctor import doctor

    profile = o.get("profile")
    result = doctor(call.config, str(o["host"]), str(profile) if profile else None, hosts=call.graph.hosts,
                    store=call.graph.existing_store())
    return result, Exit(1 if result.status == "failed" else 0)


VERB = Verb(
    name="doctor", usage="doctor [HOST]",
    summary="is the GPU host ready: devices, driver versions, /dev/shm, the Proxmox side, stale servers",
    chat=("host",), run=run, result="DoctorReport",
    cli_help="Is the GPU host ready? Devices, driver versions, /dev/shm, disk, vLLM, the port, stale servers — "
             "and, when the inventory names it (hosts.H.proxmox), the Proxmox side: vfio-pci vs nvidia, the LXC "
             "config.",
    cli_options=(Opt("host", "--host", help="the host (inventory name) that runs vLLM", required=True),
                 Opt("profile", "--profile", help="the profile to check for (default: the one deployed)")),
    cli=cli,
)
