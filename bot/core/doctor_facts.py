"""What the doctor's probes printed, read once into typed facts; and the `Check` each judgement of them
is. The judgements are in doctor_host.py and doctor_proxmox.py; bot/core/doctor.py is the front door."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["ok", "warn", "failed", "skipped"]
STATUS_RANK: dict[str, int] = {"failed": 0, "warn": 1, "ok": 2, "skipped": 3}

KB = {  # the knowledge-base entry behind each check (its sources are the threads)
    "devices": "nvidia-smi-no-devices", "nvidia-smi": "nvidia-kernel-driver-not-loaded",
    "driver-match": "nvml-driver-library-mismatch", "cuda-compat": "cuda-compat-shadows-driver-803",
    "shm": "nccl-dev-shm-too-small", "uvm": "nvidia-uvm-device-missing",
    "pve-gpu-driver": "nvidia-smi-no-devices", "pve-lxc-devices": "nvidia-hook-libnvidia-ml-missing",
    "pve-driver-match": "nvml-driver-library-mismatch",
}


@dataclass
class Check:
    id: str
    title: str
    status: Status
    seen: list[str] = field(default_factory=list)
    fix: str | None = None
    kb: str | None = None

    def as_json(self) -> dict[str, object]:
        return {"id": self.id, "title": self.title, "status": self.status, "seen": self.seen, "fix": self.fix,
                "kb": self.kb}


def by_status(checks: list[Check]) -> list[Check]:
    """Failed first, skipped last; a stable sort, so checks of one status keep the order they were made in."""
    return sorted(checks, key=lambda c: STATUS_RANK[c.status])


def sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in text.splitlines():
        m = re.match(r"^==== (\S+)\s*$", raw)
        if m:
            current = None if m[1] == "end" else out.setdefault(m[1], [])
            continue
        if current is not None and raw.strip():
            current.append(raw.rstrip())
    return out


_MODULE_RE = re.compile(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)")
_LIB_RE = re.compile(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$")
_COMPAT_RE = re.compile(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$")
# `ls -ln`: a character device shows "MAJOR, MINOR" where a file shows its size (a simulated host's files)
_DEV_RE = re.compile(r"^[cb-]\S*\s+\d+\s+\d+\s+\d+\s+(?:(\d+),\s*(\d+)|\d+)\s.*\s(\S*/dev/(nvidia[\w-]*))$")
_PCI_RE = re.compile(r"^([0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s+(.*)$", re.IGNORECASE)


def module_version(lines: list[str]) -> str | None:
    for line in lines:
        m = _MODULE_RE.search(line)
        if m:
            return m[1]
    return None


def devices(lines: list[str]) -> dict[str, tuple[int, int] | None]:
    """/dev/nvidia* as `ls -ln` shows them: name -> (major, minor), None when it is not a device node."""
    found: dict[str, tuple[int, int] | None] = {}
    for line in lines:
        m = _DEV_RE.match(line.strip())
        if m:
            found[m[4]] = (int(m[1]), int(m[2])) if m[1] else None
    return found


def nvml_libraries(lines: list[str]) -> list[str]:
    """The versions of the libnvidia-ml.so.X.Y[.Z] files listed (the unversioned .so.1 link is not one)."""
    return [m[1] for ln in lines if (m := _LIB_RE.search(ln.strip()))]


def _kib(text: str) -> int | None:
    m = re.match(r"^(\d+)([kmgKMG]?)$", text)
    if not m:
        return None
    return int(m[1]) * {"": 1, "k": 1, "m": 1024, "g": 1024 * 1024}[m[2].lower()] // (1024 if not m[2] else 1)


def _shm_kib(lines: list[str]) -> int | None:
    for line in lines:
        m = re.search(r"\bsize=(\d+[kmgKMG]?)", line)
        if m and " /dev/shm " in f" {line} ":
            return _kib(m[1])
    for line in lines:  # df -Pk: FS 1024-blocks Used Available Capacity Mounted
        parts = line.split()
        if len(parts) >= 6 and parts[1].isdigit():
            return int(parts[1])
    return None


def _pci_gpus(lines: list[str]) -> list[tuple[str, str | None]]:
    """`lspci -nnk -d 10de:` -> (bus address, kernel driver in use) of each VGA/3D controller."""
    out: list[tuple[str, str | None]] = []
    current: list[Any] | None = None
    for line in lines:
        m = _PCI_RE.match(line.strip()) if not line.startswith(("\t", " ")) else None
        if m:
            current = [m[1], None] if re.search(r"VGA compatible|3D controller", m[2]) else None
            if current is not None:
                out.append((current[0], None))
            continue
        if current is not None and "Kernel driver in use:" in line:
            out[-1] = (current[0], line.split(":", 1)[1].strip())
    return out


@dataclass(frozen=True)
class HostFacts:
    """The host probe's output (bot/core/probes/doctor-host.sh), each section as the checks read it."""

    dev_lines: list[str]
    devs: dict[str, tuple[int, int] | None]
    smi: list[str]  # nvidia-smi's lines, its `exit=N` line last
    exit_line: str
    smi_rows: list[str]  # one CSV row per GPU nvidia-smi answered for
    apps: list[str]  # `PID, name, MiB` of each process holding GPU memory
    module: str | None  # the loaded kernel module's version
    libs: list[str]  # the user-space driver's versions (libnvidia-ml)
    compat_lines: list[str]
    compat: list[str]  # the versions of the CUDA forward-compat libcuda files found
    ld_path: str  # the `LD_LIBRARY_PATH=` line
    shm_lines: list[str]
    shm_kib: int | None
    disk: list[str]
    vllm: list[str]
    vllm_version: str
    token: str  # where a Hugging Face token is: env, file or none
    port_lines: list[str]

    @classmethod
    def parse(cls, text: str) -> HostFacts:
        s = sections(text)
        smi = s.get("nvidia-smi", [])
        vllm = s.get("vllm", [])
        compat_lines = s.get("cuda-compat", [])
        return cls(
            dev_lines=s.get("devices", []), devs=devices(s.get("devices", [])), smi=smi,
            exit_line=next((ln for ln in reversed(smi) if ln.startswith("exit=")), "exit=?"),
            smi_rows=[ln for ln in smi if not ln.startswith("exit=") and ln.count(",") >= 3],
            apps=[ln for ln in s.get("compute-apps", []) if re.match(r"^\d+\s*,", ln.strip())],
            module=module_version(s.get("kernel-module", [])), libs=nvml_libraries(s.get("libnvidia-ml", [])),
            compat_lines=compat_lines,
            compat=[m[1] for ln in compat_lines if (m := _COMPAT_RE.search(ln.strip()))],
            ld_path=next((ln for ln in compat_lines if ln.startswith("LD_LIBRARY_PATH=")), "LD_LIBRARY_PATH="),
            shm_lines=s.get("shm", []), shm_kib=_shm_kib(s.get("shm", [])), disk=s.get("disk", []), vllm=vllm,
            vllm_version=next((ln.split("=", 1)[1] for ln in vllm if ln.startswith("version=")), ""),
            token=(s.get("hf-token") or ["none"])[0], port_lines=s.get("port", []))


@dataclass(frozen=True)
class PveFacts:
    """The Proxmox probe's output (bot/core/probes/doctor-proxmox.sh), each section as the checks read it."""

    lspci: list[str]
    gpus: list[tuple[str, str | None]]  # (bus address, driver in use) of each VGA/3D function
    conf: list[str]  # /etc/pve/lxc/CTID.conf, or cat's complaint that there is none
    devs: dict[str, tuple[int, int] | None]
    module: str | None  # the host's loaded kernel module's version

    @classmethod
    def parse(cls, text: str) -> PveFacts:
        s = sections(text)
        return cls(lspci=s.get("lspci", []), gpus=_pci_gpus(s.get("lspci", [])), conf=s.get("lxc-conf", []),
                   devs=devices(s.get("devices", [])), module=module_version(s.get("kernel-module", [])))
