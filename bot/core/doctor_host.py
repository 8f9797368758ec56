"""The doctor's checks inside the container or host that runs vLLM: one function a check, each judging
the parsed probe output (HostFacts) against what the profile asks for (HostInputs)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.core.doctor_facts import KB, Check, HostFacts, Status, by_status


@dataclass(frozen=True)
class HostInputs:
    """What the checks are held to besides the probe output: the profile's and the records' side."""

    host: str
    port: int | None
    tp: int
    expected_version: str | None
    recorded_pid: int | None  # the server specops started there, as recorded


HostCheck = Callable[[HostFacts, HostInputs], Check | Sequence[Check] | None]


def _ver(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


def _gpu_nodes(f: HostFacts) -> bool:
    return any(re.fullmatch(r"nvidia\d+", d) for d in f.devs) and "nvidiactl" in f.devs


def devices_present(f: HostFacts, _: HostInputs) -> Check:
    if _gpu_nodes(f):
        return Check("devices", "/dev/nvidia* present", "ok", f.dev_lines, None, KB["devices"])
    missing = [n for n in ("nvidia0", "nvidiactl", "nvidia-uvm") if n not in f.devs]
    return Check("devices", "/dev/nvidia* present", "failed", f.dev_lines or ["(no /dev/nvidia* at all)"],
                 f"the GPU device nodes are not in this container/host (missing: {', '.join(missing)}). In "
                 "an LXC container on Proxmox, add to /etc/pve/lxc/CTID.conf on the Proxmox host: "
                 "`lxc.cgroup2.devices.allow: c 195:* rwm`, `lxc.cgroup2.devices.allow: c 508:* rwm` (the "
                 "nvidia-uvm major: `ls -l /dev/nvidia-uvm` on the host) and one `lxc.mount.entry: "
                 "/dev/nvidiaN dev/nvidiaN none bind,optional,create=file` per device (nvidia0…, "
                 "nvidiactl, nvidia-uvm, nvidia-uvm-tools), then `pct reboot CTID`", KB["devices"])


def uvm_present(f: HostFacts, _: HostInputs) -> Check | None:
    # said only when the GPU nodes themselves are there: without them the devices check has said it all
    if not _gpu_nodes(f) or "nvidia-uvm" in f.devs:
        return None
    return Check("uvm", "/dev/nvidia-uvm present", "failed", f.dev_lines,
                 "CUDA needs /dev/nvidia-uvm: on the host run `nvidia-modprobe -u -c=0` (or load "
                 "nvidia_uvm at boot), then bind it into the container and restart it", KB["uvm"])


def _driver_mismatch(f: HostFacts) -> bool:
    # the versions can disagree where nvidia-smi does not say so (or there is no nvidia-smi to say it)
    said = "Driver/library version mismatch" in "\n".join(f.smi)
    return said or bool(f.module and f.libs and f.module not in f.libs)


def driver_match(f: HostFacts, _: HostInputs) -> Check:
    module, libs = f.module, f.libs
    if _driver_mismatch(f):
        seen = [f"kernel module: {module or '(none loaded)'}", f"libnvidia-ml: {', '.join(libs) or '(none)'}",
                *[ln for ln in f.smi if "mismatch" in ln.lower()]]
        return Check("driver-match", "user-space driver = kernel module", "failed", seen,
                     f"the container's user-space driver ({', '.join(libs) or '?'}) is not the kernel module "
                     f"({module or '?'}). Install exactly the host's version in the container without its "
                     f"kernel module: `./NVIDIA-Linux-x86_64-{module or 'VERSION'}.run --no-kernel-module` (or "
                     f"the distribution's `nvidia-utils`/`libnvidia-compute` at {module or 'that version'}); "
                     "after a driver upgrade on the host itself, reboot it", KB["driver-match"])
    if module and libs:
        return Check("driver-match", "user-space driver = kernel module", "ok",
                     [f"kernel module: {module}", f"libnvidia-ml: {', '.join(libs)}"], None, KB["driver-match"])
    return Check("driver-match", "user-space driver = kernel module", "skipped",
                 [f"kernel module: {module or '(not loaded)'}", f"libnvidia-ml: {', '.join(libs) or '(none)'}"],
                 None, KB["driver-match"])


def nvidia_smi(f: HostFacts, i: HostInputs) -> Check:
    rows, tp = f.smi_rows, i.tp
    if rows and f.exit_line == "exit=0":
        return Check("nvidia-smi", "nvidia-smi lists the GPUs", "ok" if len(rows) >= tp else "failed", rows,
                     None if len(rows) >= tp else f"{len(rows)} GPU(s) visible, tensor parallel size {tp} needs {tp}",
                     KB["nvidia-smi"])
    smi_text = "\n".join(f.smi)
    fix = ("no GPU answers: on a Proxmox host check `lspci -nnk -d 10de:` — `Kernel driver in use: vfio-pci` "
           "means the GPUs are reserved for VM passthrough (see the Proxmox checks); otherwise load the "
           "driver (`modprobe nvidia`) and bind /dev/nvidia* into the container")
    if "No devices were found" not in smi_text and "mismatch" in smi_text.lower():
        fix = "fix the driver mismatch above first"
    return Check("nvidia-smi", "nvidia-smi lists the GPUs", "failed", f.smi or ["(no output)"], fix, KB["nvidia-smi"])


def cuda_compat(f: HostFacts, _: HostInputs) -> Check | None:
    if not (f.compat and f.module):
        return None
    older = [c for c in f.compat if _ver(c) < _ver(f.module)]
    if older and "compat" in f.ld_path:
        return Check("cuda-compat", "no CUDA compat library shadowing the driver", "failed", f.compat_lines,
                     f"the image's CUDA forward-compat libcuda ({older[0]}) is older than the driver "
                     f"({f.module}) and is on LD_LIBRARY_PATH: drop `/usr/local/cuda/compat` from "
                     "LD_LIBRARY_PATH (or remove the cuda-compat package) so the driver's own libcuda "
                     "is used", KB["cuda-compat"])
    return Check("cuda-compat", "no CUDA compat library shadowing the driver", "ok", f.compat_lines, None,
                 KB["cuda-compat"])


def shm_size(f: HostFacts, i: HostInputs) -> Check:
    need_kib = 1024 * 1024 if i.tp > 1 else 256 * 1024  # NCCL segments for TP > 1; 64 MB is Docker's default
    if f.shm_kib is None:
        return Check("shm", "/dev/shm large enough", "skipped", f.shm_lines or ["(no /dev/shm)"], None, KB["shm"])
    if f.shm_kib < need_kib:
        return Check("shm", "/dev/shm large enough", "failed" if i.tp > 1 else "warn", f.shm_lines,
                     f"/dev/shm is {f.shm_kib // 1024} MiB; NCCL with tensor parallel size {i.tp} needs more "
                     "(give it ≥ 1 GiB): Docker `--shm-size 8g` or `--ipc=host`; LXC: `lxc.mount.entry: tmpfs "
                     "dev/shm tmpfs rw,nosuid,nodev,create=dir,size=8G 0 0` in the container's config", KB["shm"])
    return Check("shm", "/dev/shm large enough", "ok", f.shm_lines, None, KB["shm"])


def free_disk(f: HostFacts, _: HostInputs) -> list[Check]:
    """One check per path the profile names (the model, the drafter, the workdir): `PATH` + its `df -Pk` row."""
    out: list[Check] = []
    for line in f.disk:
        parts = line.split()
        if len(parts) >= 5 and parts[4].isdigit():
            free_gib = int(parts[4]) / (1024 * 1024)
            status: Status = "ok" if free_gib >= 20 else "warn"
            out.append(Check("disk", f"free disk for {parts[0]}", status, [line],
                             None if status == "ok" else f"only {free_gib:.1f} GiB free where {parts[0]} lives: "
                             "vLLM's compile and CUDA-graph caches and downloads need room"))
    return out


def vllm_install(f: HostFacts, i: HostInputs) -> Check:
    vl, version, expected = f.vllm, f.vllm_version, i.expected_version
    if any(ln.startswith("missing=") for ln in vl):
        return Check("vllm", "the vLLM install", "failed", vl, "no executable at the profile's vllm.bin: "
                     "install vLLM in that venv, or point `vllm.bin` at it")
    if expected and version and not version.startswith(expected):
        return Check("vllm", "the vLLM install", "warn", vl, f"the venv has vLLM {version}, the profile says "
                     f"{expected}: update `vllm.version` or the venv")
    return Check("vllm", "the vLLM install", "ok" if version or vl else "skipped", vl)


def hf_token(f: HostFacts, _: HostInputs) -> Check:
    token = f.token
    return Check("hf-token", "a Hugging Face token for gated models", "ok" if token in ("env", "file") else "warn",
                 [f"token: {'present (' + token + ', not shown)' if token != 'none' else 'none'}"],
                 None if token != "none" else "gated models (and the hub's rate limits) need HF_TOKEN in the "
                 "profile's env or `huggingface-cli login` on the host; a local model path needs none")


def port_free(f: HostFacts, i: HostInputs) -> Check:
    port = i.port
    if not f.port_lines:
        return Check("port", f"port {port} free", "ok", [f"nothing listens on {port}"])
    holder = re.search(r'users:\(\("([^"]+)",pid=(\d+)', f.port_lines[0])
    pid = int(holder[2]) if holder else None
    # the server specops recorded is no stranger: a redeploy replaces it
    ours = i.recorded_pid is not None and pid == i.recorded_pid
    return Check("port", f"port {port} free", "warn" if ours else "failed", f.port_lines,
                 None if ours else f"port {port} is held by {holder[1] if holder else 'another process'}"
                 + (f" (PID {pid})" if pid else "") + ": stop it, or deploy on another port")


def no_stale_server(f: HostFacts, i: HostInputs) -> Check:
    stale = [ln for ln in f.apps if i.recorded_pid is None or not ln.startswith(f"{i.recorded_pid},")]
    if not stale:
        return Check("stale-server", "no stale server on the GPUs", "ok", f.apps or ["no compute processes"])
    pids = [ln.split(",")[0].strip() for ln in stale]
    return Check("stale-server", "no stale server on the GPUs", "failed", stale,
                 f"GPU memory is held by process(es) {', '.join(pids)} that specops did not start (or no "
                 f"longer records): stop them (`kill {' '.join(pids)}`, then `kill -9` after a grace), or "
                 f"`specops stop --host {i.host}` if it was one of ours")


# the order the checks are made in is the order a status's checks are listed in
SHORT: tuple[HostCheck, ...] = (devices_present, uvm_present, driver_match, nvidia_smi)  # what a deploy starts with
FULL: tuple[HostCheck, ...] = (*SHORT, cuda_compat, shm_size, free_disk, vllm_install, hf_token, port_free,
                               no_stale_server)


def run_checks(table: Sequence[HostCheck], facts: HostFacts, inputs: HostInputs) -> list[Check]:
    out: list[Check] = []
    for check in table:
        found = check(facts, inputs)
        out += [found] if isinstance(found, Check) else (found or [])
    return by_status(out)


def host_checks(text: str, *, host: str = "HOST", port: int | None = None, tp: int = 1,
                expected_version: str | None = None, recorded_pid: int | None = None,
                short: bool = False) -> list[Check]:
    """The checks inside the container or host that runs vLLM. `short`: the ones a deploy starts with."""
    inputs = HostInputs(host=host, port=port, tp=tp, expected_version=expected_version, recorded_pid=recorded_pid)
    return run_checks(SHORT if short else FULL, HostFacts.parse(text), inputs)
