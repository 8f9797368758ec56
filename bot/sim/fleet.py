"""Several simulated A6000 hosts at once (`specops sim --hosts 3`): `a6000`, `a6000-b`, `a6000-c`, …, each a
`SimHost` with its own root, SSH server and host key, state (what its fake vLLM and nvidia-smi read) and GPU
facts, and in the config its own vLLM port (a per-host override: they all listen on loopback).

The profiles are built once, from the first host: its model and vLLM paths are absolute paths on this machine,
so every simulated host finds them; what a host's fake vLLM does comes from its SSH session's environment
(SPECOPS_SIM_STATE, SPECOPS_SIM_CONTROL), never from the paths. The config's group `a6000s` holds them all.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

from bot.config import Config, ProxmoxRef
from bot.sim.host import SimHost
from bot.sim.ports import free_ports

MAX_HOSTS = 8
GROUP = "a6000s"
FIRST = "a6000"
GPU_USED_STEP_MIB = 512  # host i's GPUs report 4 + 512*i MiB in use (the first: the default 4 MiB)


def host_names(n: int) -> list[str]:
    """`a6000`, `a6000-b`, `a6000-c`, … (n of them)."""
    return [FIRST, *(f"{FIRST}-{letter}" for letter in string.ascii_lowercase[1:n])]


def proxmox_name(host: str) -> str:
    """The Proxmox host under a simulated host: `pve` for `a6000`, `pve-b` for `a6000-b`."""
    return "pve" + host.removeprefix(FIRST)


class SimFleet:
    def __init__(self, n: int, *, root: Path | None = None, **simhost_kwargs: Any) -> None:
        """n simulated hosts (1 to MAX_HOSTS), each in a temporary root of its own (or `root/<name>`)."""
        if not 1 <= n <= MAX_HOSTS:
            raise ValueError(f"a simulated fleet has 1 to {MAX_HOSTS} hosts, not {n}")
        self.hosts: list[SimHost] = []
        try:
            for i, name in enumerate(host_names(n)):
                used = None if i == 0 else 4 + GPU_USED_STEP_MIB * i
                self.hosts.append(SimHost(None if root is None else root / name, name=name, gpu_used_mib=used,
                                          **simhost_kwargs))
        except BaseException:
            self.cleanup()
            raise
        # each host's vLLM port: fixed here, so every config() of this fleet agrees
        self.vllm_ports: dict[str, int] = dict(zip(self.names, free_ports(n), strict=True))

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def host(self, name: str) -> SimHost:
        return next(h for h in self.hosts if h.name == name)

    @property
    def roots(self) -> list[Path]:
        return [h.root for h in self.hosts]

    def start(self) -> SimFleet:
        try:
            for h in self.hosts:
                h.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def config_dict(self, *, doctor: bool = False) -> dict[str, Any]:
        """The config as a document: every host with `overrides: {port: …}`, the profiles (the first host's,
        on the first host's port), the group. `doctor`: each host's Proxmox side too (`pve`, `pve-b`, …: the
        same simulated machine, its container CTID), as `SimHost.doctor_config` for one host."""
        first = self.hosts[0]
        hosts: dict[str, Any] = {}
        for h in self.hosts:
            entry = h.host_config().model_dump(mode="json", exclude_none=True)
            entry["overrides"] = {"port": self.vllm_ports[h.name]}
            if doctor:
                pve = proxmox_name(h.name)
                entry["proxmox"] = ProxmoxRef(host=pve, ctid=h.CTID).model_dump(mode="json")
            hosts[h.name] = entry
        if doctor:
            for h in self.hosts:
                hosts[proxmox_name(h.name)] = h.host_config().model_dump(mode="json", exclude_none=True)
        profiles = {name: p.model_dump(mode="json", exclude_none=True)
                    for name, p in first.profiles(self.vllm_ports[first.name]).items()}
        return {"hosts": hosts, "profiles": profiles, "groups": {GROUP: self.names},
                "settings": {"state": str(first.root / "specops.db")}}

    def config(self, *, doctor: bool = False) -> Config:
        return Config.model_validate(self.config_dict(doctor=doctor))

    def cleanup(self) -> None:
        """Every host's fake vLLM stopped by its recorded PID, then the SSH servers, then the temporary roots."""
        for h in self.hosts:
            h.stop_server()
        for h in reversed(self.hosts):  # the first host's root (the profiles' paths) goes last
            h.cleanup()  # a temporary root is removed; `root/<name>` stays, as SimHost's own root does

    def __enter__(self) -> SimFleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
