"""The doctor's checks on the Proxmox host under the container: one function a check, each judging the
parsed probe output (PveFacts) against the container it serves (PveInputs)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from bot.core.doctor_facts import KB, Check, PveFacts, by_status


@dataclass(frozen=True)
class PveInputs:
    ctid: int
    container_module: str | None  # the container's user-space driver, as the host probe read it
    pve: str


PveCheck = Callable[[PveFacts, PveInputs], Check]


def gpu_driver(f: PveFacts, i: PveInputs) -> Check:
    bad = [(bus, drv) for bus, drv in f.gpus if drv != "nvidia"]
    if not f.gpus:
        return Check("pve-gpu-driver", "the GPUs bound to nvidia on the Proxmox host", "failed",
                     f.lspci or ["(lspci shows no NVIDIA device)"], "no NVIDIA GPU on the PCI bus of "
                     f"{i.pve}: check the slot, or this is not the host with the GPUs", KB["pve-gpu-driver"])
    if not bad:
        return Check("pve-gpu-driver", "the GPUs bound to nvidia on the Proxmox host", "ok", f.lspci, None,
                     KB["pve-gpu-driver"])
    drivers = sorted({drv or "no driver" for _, drv in bad})
    # a function bound to no driver has none to unbind it from
    rebind = "; ".join(f"echo 0000:{bus} > /sys/bus/pci/drivers/{drv}/unbind; echo 0000:{bus} > "
                       "/sys/bus/pci/drivers/nvidia/bind" for bus, drv in bad if drv)
    return Check("pve-gpu-driver", "the GPUs bound to nvidia on the Proxmox host", "failed", f.lspci,
                 f"the GPUs use {', '.join(drivers)}, not nvidia: they are reserved for VM passthrough. To "
                 "give them to the LXC container for good: remove their ids from `options vfio-pci ids=10de:…`"
                 " in /etc/modprobe.d/*.conf and any `blacklist nvidia` line, `update-initramfs -u -k all`, "
                 f"reboot {i.pve}. Right now (until the next boot): `modprobe nvidia; {rebind}`, then "
                 "`nvidia-smi` on the host", KB["pve-gpu-driver"])


def _missing_allows(f: PveFacts, allowed: list[str]) -> list[str]:
    # 195 is the nvidia major everywhere; the others (nvidia-uvm's) are only known from the host's nodes
    majors = sorted({d[0] for d in f.devs.values() if d is not None}) or [195]
    return [f"lxc.cgroup2.devices.allow: c {m}:* rwm" for m in majors
            if not any(re.search(rf"\bc {m}:(\*|\d+) r?w?m?", a) for a in allowed)]


def _missing_mounts(f: PveFacts, mounts: list[str]) -> list[str]:
    expected = set(f.devs) | {f"nvidia{n}" for n in range(len(f.gpus))} | {"nvidiactl", "nvidia-uvm"}
    return [f"lxc.mount.entry: /dev/{d} dev/{d} none bind,optional,create=file" for d in sorted(expected)
            if not any(f"/dev/{d} " in m for m in mounts)]


def lxc_devices(f: PveFacts, i: PveInputs) -> Check:
    ctid, pve = i.ctid, i.pve
    if f.conf and "No such file" in f.conf[0]:
        return Check("pve-lxc-devices", f"container {ctid} gets the GPU devices", "failed", f.conf,
                     f"no /etc/pve/lxc/{ctid}.conf on {pve}: check `ctid` in the inventory", KB["pve-lxc-devices"])
    allowed = [ln for ln in f.conf if ln.startswith("lxc.cgroup2.devices.allow")]
    mounts = [ln for ln in f.conf if ln.startswith("lxc.mount.entry") and "/dev/nvidia" in ln]
    present, needed = allowed + mounts, _missing_allows(f, allowed) + _missing_mounts(f, mounts)
    if not needed:
        return Check("pve-lxc-devices", f"container {ctid} gets the GPU devices", "ok", present, None,
                     KB["pve-lxc-devices"])
    return Check("pve-lxc-devices", f"container {ctid} gets the GPU devices", "failed",
                 present or ["(no device lines in the container's config)"],
                 f"add to /etc/pve/lxc/{ctid}.conf on {pve}, then `pct reboot {ctid}`:\n" + "\n".join(needed),
                 KB["pve-lxc-devices"])


def driver_match(f: PveFacts, i: PveInputs) -> Check:
    host_module, container_module = f.module, i.container_module
    if host_module and container_module and host_module != container_module:
        return Check("pve-driver-match", "the container's driver = the Proxmox host's", "failed",
                     [f"{i.pve}: kernel module {host_module}", f"container: {container_module}"],
                     f"install user-space driver {host_module} in the container (`--no-kernel-module`)",
                     KB["pve-driver-match"])
    return Check("pve-driver-match", "the container's driver = the Proxmox host's",
                 "ok" if host_module and container_module else "skipped",
                 [f"{i.pve}: kernel module {host_module or '(not loaded)'}",
                  f"container: {container_module or '(unknown)'}"], None, KB["pve-driver-match"])


CHECKS: tuple[PveCheck, ...] = (gpu_driver, lxc_devices, driver_match)  # in this order within each status


def proxmox_checks(text: str, *, ctid: int, container_module: str | None, pve: str = "the Proxmox host") -> list[Check]:
    """The checks on the Proxmox host: the GPUs' driver, the container's device entries, the driver versions."""
    facts, inputs = PveFacts.parse(text), PveInputs(ctid=ctid, container_module=container_module, pve=pve)
    return by_status([check(facts, inputs) for check in CHECKS])
