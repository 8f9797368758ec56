"""Is the GPU host ready for vLLM? The checks of `specops doctor`, from what two fixed probes print.

The probes are POSIX sh scripts run over SSH with their inputs as positional arguments (never in the
script's text): one inside the container or host that runs vLLM, one on the Proxmox host when the
inventory names it. Each prints `==== SECTION` blocks of raw facts; this module reads them and
judges, so the judgement is a function of text and the same in every front end. `SPECOPS_SYSROOT`
(empty on a real host) lets the simulated host answer from its own files.

Every check says what it saw (the exact lines) and the fix (the command to run, the lines to add),
and names the knowledge-base entry whose sources back it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal

Status = Literal["ok", "warn", "failed", "skipped"]
STATUS_RANK: dict[str, int] = {"failed": 0, "warn": 1, "ok": 2, "skipped": 3}



def probe(name: str) -> str:
    """The text of a probe script (package data: bot/core/probes/doctor-host.sh, doctor-proxmox.sh)."""
    return (resources.files("bot.core") / "probes" / f"doctor-{name}.sh").read_text(encoding="utf-8")


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


def _kib(text: str) -> int | None:
    m = re.match(r"^(\d+)([kmgKMG]?)$", text)
    if not m:
        return None
    return int(m[1]) * {"": 1, "k": 1, "m": 1024, "g": 1024 * 1024}[m[2].lower()] // (1024 if not m[2] else 1)


def host_checks(text: str, *, host: str = "HOST", port: int | None = None, tp: int = 1,
                expected_version: str | None = None, recorded_pid: int | None = None,
                short: bool = False) -> list[Check]:
    """The checks inside the container or host that runs vLLM. `short`: the ones a deploy starts with."""
    s = sections(text)
    out: list[Check] = []
    devs = devices(s.get("devices", []))
    dev_lines = s.get("devices", [])
    gpus = [d for d in devs if re.fullmatch(r"nvidia\d+", d)]
    if not gpus or "nvidiactl" not in devs:
        missing = [n for n in ("nvidia0", "nvidiactl", "nvidia-uvm") if n not in devs]
        out.append(Check("devices", "/dev/nvidia* present", "failed", dev_lines or ["(no /dev/nvidia* at all)"],
                         f"the GPU device nodes are not in this container/host (missing: {', '.join(missing)}). In "
                         "an LXC container on Proxmox, add to /etc/pve/lxc/CTID.conf on the Proxmox host: "
                         "`lxc.cgroup2.devices.allow: c 195:* rwm`, `lxc.cgroup2.devices.allow: c 508:* rwm` (the "
                         "nvidia-uvm major: `ls -l /dev/nvidia-uvm` on the host) and one `lxc.mount.entry: "
                         "/dev/nvidiaN dev/nvidiaN none bind,optional,create=file` per device (nvidia0…, "
                         "nvidiactl, nvidia-uvm, nvidia-uvm-tools), then `pct reboot CTID`", KB["devices"]))
    else:
        out.append(Check("devices", "/dev/nvidia* present", "ok", dev_lines, None, KB["devices"]))
        if "nvidia-uvm" not in devs:
            out.append(Check("uvm", "/dev/nvidia-uvm present", "failed", dev_lines,
                             "CUDA needs /dev/nvidia-uvm: on the host run `nvidia-modprobe -u -c=0` (or load "
                             "nvidia_uvm at boot), then bind it into the container and restart it", KB["uvm"]))
    smi = s.get("nvidia-smi", [])
    smi_text = "\n".join(smi)
    exit_line = next((ln for ln in reversed(smi) if ln.startswith("exit=")), "exit=?")
    module = module_version(s.get("kernel-module", []))
    libs = [m[1] for ln in s.get("libnvidia-ml", []) if (m := _LIB_RE.search(ln.strip()))]
    smi_rows = [ln for ln in smi if not ln.startswith("exit=") and ln.count(",") >= 3]
    if "Driver/library version mismatch" in smi_text or (module and libs and module not in libs):
        seen = [f"kernel module: {module or '(none loaded)'}", f"libnvidia-ml: {', '.join(libs) or '(none)'}",
                *[ln for ln in smi if "mismatch" in ln.lower()]]
        out.append(Check("driver-match", "user-space driver = kernel module", "failed", seen,
                         f"the container's user-space driver ({', '.join(libs) or '?'}) is not the kernel module "
                         f"({module or '?'}). Install exactly the host's version in the container without its "
                         f"kernel module: `./NVIDIA-Linux-x86_64-{module or 'VERSION'}.run --no-kernel-module` (or "
                         f"the distribution's `nvidia-utils`/`libnvidia-compute` at {module or 'that version'}); "
                         "after a driver upgrade on the host itself, reboot it", KB["driver-match"]))
    elif module and libs:
        out.append(Check("driver-match", "user-space driver = kernel module", "ok",
                         [f"kernel module: {module}", f"libnvidia-ml: {', '.join(libs)}"], None, KB["driver-match"]))
    else:
        out.append(Check("driver-match", "user-space driver = kernel module", "skipped",
                         [f"kernel module: {module or '(not loaded)'}", f"libnvidia-ml: {', '.join(libs) or '(none)'}"],
                         None, KB["driver-match"]))
    if smi_rows and exit_line == "exit=0":
        out.append(Check("nvidia-smi", "nvidia-smi lists the GPUs", "ok" if len(smi_rows) >= tp else "failed",
                         smi_rows, None if len(smi_rows) >= tp else
                         f"{len(smi_rows)} GPU(s) visible, tensor parallel size {tp} needs {tp}", KB["nvidia-smi"]))
    else:
        fix = ("no GPU answers: on a Proxmox host check `lspci -nnk -d 10de:` — `Kernel driver in use: vfio-pci` "
               "means the GPUs are reserved for VM passthrough (see the Proxmox checks); otherwise load the "
               "driver (`modprobe nvidia`) and bind /dev/nvidia* into the container")
        if "No devices were found" not in smi_text and "mismatch" in smi_text.lower():
            fix = "fix the driver mismatch above first"
        out.append(Check("nvidia-smi", "nvidia-smi lists the GPUs", "failed", smi or ["(no output)"], fix,
                         KB["nvidia-smi"]))
    if short:
        return _sorted(out)
    compat = [m for ln in s.get("cuda-compat", []) if (m := _COMPAT_RE.search(ln.strip()))]
    ld = next((ln for ln in s.get("cuda-compat", []) if ln.startswith("LD_LIBRARY_PATH=")), "LD_LIBRARY_PATH=")
    if compat and module:
        newer = [c for c in compat if _ver(c[1]) < _ver(module)]
        on_path = "compat" in ld
        seen = [ln for ln in s.get("cuda-compat", []) if ln.strip()]
        if newer and on_path:
            out.append(Check("cuda-compat", "no CUDA compat library shadowing the driver", "failed", seen,
                             f"the image's CUDA forward-compat libcuda ({newer[0][1]}) is older than the driver "
                             f"({module}) and is on LD_LIBRARY_PATH: drop `/usr/local/cuda/compat` from "
                             "LD_LIBRARY_PATH (or remove the cuda-compat package) so the driver's own libcuda "
                             "is used", KB["cuda-compat"]))
        else:
            out.append(Check("cuda-compat", "no CUDA compat library shadowing the driver", "ok", seen, None,
                             KB["cuda-compat"]))
    shm_lines = s.get("shm", [])
    shm_kib = _shm_kib(shm_lines)
    need_kib = 1024 * 1024 if tp > 1 else 256 * 1024  # NCCL segments for TP > 1; 64 MB is Docker's default
    if shm_kib is None:
        out.append(Check("shm", "/dev/shm large enough", "skipped", shm_lines or ["(no /dev/shm)"], None, KB["shm"]))
    elif shm_kib < need_kib:
        out.append(Check("shm", "/dev/shm large enough", "failed" if tp > 1 else "warn", shm_lines,
                         f"/dev/shm is {shm_kib // 1024} MiB; NCCL with tensor parallel size {tp} needs more "
                         "(give it ≥ 1 GiB): Docker `--shm-size 8g` or `--ipc=host`; LXC: `lxc.mount.entry: tmpfs "
                         "dev/shm tmpfs rw,nosuid,nodev,create=dir,size=8G 0 0` in the container's config",
                         KB["shm"]))
    else:
        out.append(Check("shm", "/dev/shm large enough", "ok", shm_lines, None, KB["shm"]))
    for line in s.get("disk", []):
        parts = line.split()
        if len(parts) >= 5 and parts[4].isdigit():
            free_gib = int(parts[4]) / (1024 * 1024)
            status: Status = "ok" if free_gib >= 20 else "warn"
            out.append(Check("disk", f"free disk for {parts[0]}", status, [line],
                             None if status == "ok" else f"only {free_gib:.1f} GiB free where {parts[0]} lives: "
                             "vLLM's compile and CUDA-graph caches and downloads need room"))
    vl = s.get("vllm", [])
    version = next((ln.split("=", 1)[1] for ln in vl if ln.startswith("version=")), "")
    if any(ln.startswith("missing=") for ln in vl):
        out.append(Check("vllm", "the vLLM install", "failed", vl, "no executable at the profile's vllm.bin: "
                         "install vLLM in that venv, or point `vllm.bin` at it"))
    elif expected_version and version and not version.startswith(expected_version):
        out.append(Check("vllm", "the vLLM install", "warn", vl, f"the venv has vLLM {version}, the profile says "
                         f"{expected_version}: update `vllm.version` or the venv"))
    else:
        out.append(Check("vllm", "the vLLM install", "ok" if version or vl else "skipped", vl))
    token = (s.get("hf-token") or ["none"])[0]
    out.append(Check("hf-token", "a Hugging Face token for gated models", "ok" if token in ("env", "file") else "warn",
                     [f"token: {'present (' + token + ', not shown)' if token != 'none' else 'none'}"],
                     None if token != "none" else "gated models (and the hub's rate limits) need HF_TOKEN in the "
                     "profile's env or `huggingface-cli login` on the host; a local model path needs none"))
    port_lines = s.get("port", [])
    apps = [ln for ln in s.get("compute-apps", []) if re.match(r"^\d+\s*,", ln.strip())]
    if port_lines:
        holder = re.search(r'users:\(\("([^"]+)",pid=(\d+)', port_lines[0])
        pid = int(holder[2]) if holder else None
        ours = recorded_pid is not None and pid == recorded_pid
        out.append(Check("port", f"port {port} free", "warn" if ours else "failed", port_lines,
                         None if ours else f"port {port} is held by {holder[1] if holder else 'another process'}"
                         + (f" (PID {pid})" if pid else "") + ": stop it, or deploy on another port"))
    else:
        out.append(Check("port", f"port {port} free", "ok", [f"nothing listens on {port}"]))
    stale = [ln for ln in apps if recorded_pid is None or not ln.startswith(f"{recorded_pid},")]
    if stale:
        pids = [ln.split(",")[0].strip() for ln in stale]
        out.append(Check("stale-server", "no stale server on the GPUs", "failed", stale,
                         f"GPU memory is held by process(es) {', '.join(pids)} that specops did not start (or no "
                         f"longer records): stop them (`kill {' '.join(pids)}`, then `kill -9` after a grace), or "
                         f"`specops stop --host {host}` if it was one of ours"))
    else:
        out.append(Check("stale-server", "no stale server on the GPUs", "ok", apps or ["no compute processes"]))
    return _sorted(out)


def _ver(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


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


def proxmox_checks(text: str, *, ctid: int, container_module: str | None, pve: str = "the Proxmox host") -> list[Check]:
    """The checks on the Proxmox host: the GPUs' driver, the container's device entries, the driver versions."""
    s = sections(text)
    out: list[Check] = []
    lspci = s.get("lspci", [])
    gpus = _pci_gpus(lspci)  # (bus address, driver in use) of each VGA/3D function; audio functions follow them
    bad = [(bus, drv) for bus, drv in gpus if drv != "nvidia"]
    if not gpus:
        out.append(Check("pve-gpu-driver", "the GPUs bound to nvidia on the Proxmox host", "failed",
                         lspci or ["(lspci shows no NVIDIA device)"], "no NVIDIA GPU on the PCI bus of "
                         f"{pve}: check the slot, or this is not the host with the GPUs", KB["pve-gpu-driver"]))
    elif bad:
        drivers = sorted({drv or "no driver" for _, drv in bad})
        rebind = "; ".join(f"echo 0000:{bus} > /sys/bus/pci/drivers/{drv}/unbind; echo 0000:{bus} > "
                           "/sys/bus/pci/drivers/nvidia/bind" for bus, drv in bad if drv)
        out.append(Check("pve-gpu-driver", "the GPUs bound to nvidia on the Proxmox host", "failed", lspci,
                         f"the GPUs use {', '.join(drivers)}, not nvidia: they are reserved for VM passthrough. To "
                         "give them to the LXC container for good: remove their ids from `options vfio-pci ids=10de:…`"
                         " in /etc/modprobe.d/*.conf and any `blacklist nvidia` line, `update-initramfs -u -k all`, "
                         f"reboot {pve}. Right now (until the next boot): `modprobe nvidia; {rebind}`, then "
                         "`nvidia-smi` on the host", KB["pve-gpu-driver"]))
    else:
        out.append(Check("pve-gpu-driver", "the GPUs bound to nvidia on the Proxmox host", "ok", lspci, None,
                         KB["pve-gpu-driver"]))
    conf = s.get("lxc-conf", [])
    devs = devices(s.get("devices", []))
    majors = sorted({d[0] for d in devs.values() if d is not None}) or [195]
    allowed = [ln for ln in conf if ln.startswith("lxc.cgroup2.devices.allow")]
    mounts = [ln for ln in conf if ln.startswith("lxc.mount.entry") and "/dev/nvidia" in ln]
    if conf and "No such file" in conf[0]:
        out.append(Check("pve-lxc-devices", f"container {ctid} gets the GPU devices", "failed", conf,
                         f"no /etc/pve/lxc/{ctid}.conf on {pve}: check `ctid` in the inventory", KB["pve-lxc-devices"]))
    else:
        missing_allow = [m for m in majors if not any(re.search(rf"\bc {m}:(\*|\d+) r?w?m?", a) for a in allowed)]
        expected = set(devs) | {f"nvidia{i}" for i in range(len(gpus))} | {"nvidiactl", "nvidia-uvm"}
        missing_mount = [d for d in sorted(expected) if not any(f"/dev/{d} " in m for m in mounts)]
        if missing_allow or missing_mount:
            lines = [f"lxc.cgroup2.devices.allow: c {m}:* rwm" for m in missing_allow] + [
                f"lxc.mount.entry: /dev/{d} dev/{d} none bind,optional,create=file" for d in missing_mount]
            out.append(Check("pve-lxc-devices", f"container {ctid} gets the GPU devices", "failed",
                             allowed + mounts or ["(no device lines in the container's config)"],
                             f"add to /etc/pve/lxc/{ctid}.conf on {pve}, then `pct reboot {ctid}`:\n"
                             + "\n".join(lines),
                             KB["pve-lxc-devices"]))
        else:
            out.append(Check("pve-lxc-devices", f"container {ctid} gets the GPU devices", "ok", allowed + mounts,
                             None, KB["pve-lxc-devices"]))
    host_module = module_version(s.get("kernel-module", []))
    if host_module and container_module and host_module != container_module:
        out.append(Check("pve-driver-match", "the container's driver = the Proxmox host's", "failed",
                         [f"{pve}: kernel module {host_module}", f"container: {container_module}"],
                         f"install user-space driver {host_module} in the container (`--no-kernel-module`)",
                         KB["pve-driver-match"]))
    else:
        out.append(Check("pve-driver-match", "the container's driver = the Proxmox host's",
                         "ok" if host_module and container_module else "skipped",
                         [f"{pve}: kernel module {host_module or '(not loaded)'}",
                          f"container: {container_module or '(unknown)'}"], None, KB["pve-driver-match"]))
    return _sorted(out)


_PCI_RE = re.compile(r"^([0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s+(.*)$", re.IGNORECASE)


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


def _sorted(checks: list[Check]) -> list[Check]:
    return sorted(checks, key=lambda c: STATUS_RANK[c.status])


def container_driver(text: str) -> str | None:
    """The container's user-space driver version, from the host probe (libnvidia-ml, else nvidia-smi)."""
    s = sections(text)
    libs = [m[1] for ln in s.get("libnvidia-ml", []) if (m := _LIB_RE.search(ln.strip()))]
    if libs:
        return libs[0]
    for ln in s.get("nvidia-smi", []):
        parts = [p.strip() for p in ln.split(",")]
        if len(parts) >= 3 and re.fullmatch(r"\d+\.\d+(\.\d+)?", parts[2]):
            return parts[2]
    return None
