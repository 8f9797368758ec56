"""A fake `nvidia-smi` for the simulated host: 2x RTX A6000, or "No devices were found".

A file `nvidia-smi.no-devices` next to the host's control file switches the GPUs off (what a
host whose GPUs are bound to vfio-pci shows). A file `nvidia-smi.used-mib` there says what each GPU has in
use (default 4 MiB): each host of a simulated fleet has its own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

GPUS = [(0, "NVIDIA RTX A6000", 49140), (1, "NVIDIA RTX A6000", 49140)]


LSPCI = ("{bus}.0 VGA compatible controller [0300]: NVIDIA Corporation GA102GL [RTX A6000] [10de:2230] (rev a1)\n"
         "\tSubsystem: NVIDIA Corporation GA102GL [RTX A6000] [10de:1459]\n"
         "\tKernel driver in use: {driver}\n\tKernel modules: nvidiafb, nouveau, nvidia\n"
         "{bus}.1 Audio device [0403]: NVIDIA Corporation GA102 High Definition Audio Controller [10de:1aef] (rev a1)\n"
         "\tKernel driver in use: {audio}\n")


def lspci(state: Path) -> int:
    vfio = (state / "lspci.vfio").exists()
    for bus in ("01:00", "41:00"):
        print(LSPCI.format(bus=bus, driver="vfio-pci" if vfio else "nvidia",
                           audio="vfio-pci" if vfio else "snd_hda_intel"), end="")
    return 0


def main(argv: list[str]) -> int:
    state = Path(os.environ.get("SPECOPS_SIM_STATE", "."))
    if argv[:1] == ["--lspci"]:
        return lspci(state)
    if (state / "nvidia-smi.mismatch").exists():
        print("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.120")
        return 18
    if (state / "nvidia-smi.no-driver").exists():
        print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
              "latest NVIDIA driver is installed and running.")
        return 9
    if (state / "nvidia-smi.no-devices").exists():
        print("No devices were found")
        return 6
    if any(a.startswith("--query-compute-apps") for a in argv):
        apps = state / "nvidia-smi.apps"
        print(apps.read_text(), end="") if apps.exists() else None
        return 0
    used = int((state / "nvidia-smi.used-mib").read_text()) if (state / "nvidia-smi.used-mib").exists() else 4
    query = next((a.split("=", 1)[1] for a in argv if a.startswith("--query-gpu=")), None)
    if query is None:
        print("+-----------------------------------------------------------------------------+")
        print("| NVIDIA-SMI 550.120       Driver Version: 550.120       CUDA Version: 12.4     |")
        for idx, name, total in GPUS:
            print(f"|   {idx}  {name:<24} | {used:>6}MiB / {total}MiB |")
        return 0
    fields = [f.strip() for f in query.split(",")]
    for idx, name, total in GPUS:
        values = {"index": str(idx), "name": name, "memory.total": str(total), "memory.used": str(used),
                  "memory.free": str(total - used), "driver_version": "550.120",
                  "compute_cap": "8.6"}  # the RTX A6000's (GA102: NVIDIA's table of compute capabilities)
        print(", ".join(values.get(f, "[N/A]") for f in fields))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
