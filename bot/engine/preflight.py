"""Named checks that read a `run` step's output: GPUs, port, vLLM version, drafter config.

Each returns whether the host passed, the message, and the facts it found (kept for later steps and
for the use case). They are what the brief's person tripped over, said plainly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.engine.hostvars import HostVars
from bot.engine.playbook import Facts, Gpu
from bot.remote.ssh import RunResult


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    message: str
    facts: Facts = field(default_factory=lambda: Facts())
    shown: list[str] | None = None  # the lines that matter more than the output's tail (doctor's failures)


KNOWN_LAYER_TYPES = {"sliding_attention", "full_attention"}


def check_gpus(r: RunResult, v: HostVars) -> CheckResult:
    text = r.out() + r.err()
    if "No devices were found" in text:
        return CheckResult(False, (
            "nvidia-smi: No devices were found. On a Proxmox host this usually means the GPUs are bound "
            "to vfio-pci: check `lspci -nnk -d 10de:` on the host and bind them to `nvidia`."))
    if "NVIDIA-SMI has failed" in text:
        return CheckResult(False, (
            "nvidia-smi cannot talk to the driver: the container's user-space driver must equal the "
            "host's kernel module version, and /dev/nvidia* must be bound into the container."))
    if r.exit_status != 0:
        return CheckResult(False, f"nvidia-smi failed (exit {r.exit_status}): {text.strip()[:300]}")
    gpus = _gpu_lines(r.out())
    need = int(v.get("tensor_parallel_size", 1))
    if len(gpus) < need:
        return CheckResult(False, f"{len(gpus)} GPU(s) visible, tensor parallel size needs {need}", {"gpus": gpus})
    min_free = int(v.get("min_free_gpu_mib", 0))
    short = [g for g in gpus[:need] if g["free_mib"] < min_free]
    if short:
        return CheckResult(False, "not enough free GPU memory: " + ", ".join(
            f"GPU {g['index']} has {g['free_mib']} MiB free of {g['total_mib']}" for g in short)
            + f" (need {min_free} MiB); a stale server may hold it", {"gpus": gpus})
    summary = ", ".join(f"GPU {g['index']} {g['name']} {g['free_mib']}/{g['total_mib']} MiB free" for g in gpus)
    return CheckResult(True, summary, {"gpus": gpus})


def _gpu_lines(out: str) -> list[Gpu]:
    gpus: list[Gpu] = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4 and parts[0].isdigit():
            try:
                gpus.append({"index": int(parts[0]), "name": parts[1], "total_mib": int(float(parts[2])),
                             "free_mib": int(float(parts[3]))})
            except ValueError:
                continue
    return gpus


def check_port_free(r: RunResult, v: HostVars) -> CheckResult:
    lines = [ln for ln in r.out().splitlines() if ln.strip()]
    if r.exit_status != 0:
        return CheckResult(False, f"cannot list listening sockets: {r.err().strip()[:200]}")
    if lines:
        holder = re.search(r'users:\(\("([^"]+)",pid=(\d+)', lines[0])
        who = f"{holder[1]} (PID {holder[2]})" if holder else lines[0].strip()
        return CheckResult(False, f"port {v.get('port')} is already in use by {who}; if that is an old server, "
                                  f"stop it by its PID (`specops stop --host {v.get('host_name')}`)")
    return CheckResult(True, f"port {v.get('port')} is free")


def check_vllm_version(r: RunResult, v: HostVars) -> CheckResult:
    m = re.search(r"(\d+\.\d+\.\d+[\w.+-]*)", r.out() + r.err())
    if r.exit_status != 0 or not m:
        return CheckResult(False, f"cannot read the vLLM version from `{v.get('vllm_bin')} --version`: "
                                  f"{(r.err() or r.out()).strip()[:200] or 'no output'}")
    found = m[1]
    expected = v.get("vllm_version_expected")
    note = f" (profile expects {expected})" if expected and not found.startswith(str(expected)) else ""
    return CheckResult(True, f"vLLM {found}{note}", {"vllm_version": found})


def check_drafter_config(r: RunResult, v: HostVars) -> CheckResult:
    if r.exit_status != 0:
        return CheckResult(False, f"cannot read the drafter's config.json: {r.err().strip()[:200]}")
    try:
        cfg = json.loads(r.out())
    except ValueError as exc:
        return CheckResult(False, f"the drafter's config.json is not valid JSON: {exc}")
    if not isinstance(cfg, dict):
        return CheckResult(False, "the drafter's config.json is not a JSON object")
    override = v.get("drafter_config_override")
    if isinstance(override, dict):
        cfg = {**cfg, **override}
    facts: Facts = {"drafter_config": cfg}
    problem = (_dflash_problem(cfg) if v.get("method") == "dflash" else None) or _layer_types_problem(cfg)
    if problem:
        return CheckResult(False, problem, facts)
    types = cfg.get("layer_types")
    mixed = isinstance(types, list) and len(set(types)) > 1
    dcfg = cfg.get("dflash_config")
    ids_text = f", target_layer_ids {dcfg.get('target_layer_ids')}" if isinstance(dcfg, dict) else ""
    return CheckResult(True, f"layer_types {'mixed sliding/full' if mixed else (types[0] if types else 'n/a')}"
                             f"{ids_text}", facts)


def _dflash_problem(cfg: dict[str, object]) -> str | None:
    """What vLLM's DFlash drafter needs of its config and this one lacks."""
    dcfg = cfg.get("dflash_config")
    ids = dcfg.get("target_layer_ids") if isinstance(dcfg, dict) else None
    if not (isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids)):
        return "the DFlash drafter config has no dflash_config.target_layer_ids"
    if not (isinstance(dcfg, dict) and "mask_token_id" in dcfg):
        return "the DFlash drafter config has no dflash_config.mask_token_id"
    return None


def _layer_types_problem(cfg: dict[str, object]) -> str | None:
    types = cfg.get("layer_types")
    if types is None:
        return None
    unknown = sorted({t for t in types if t not in KNOWN_LAYER_TYPES}) if isinstance(types, list) else [types]
    return f"the drafter's layer_types has unknown values: {unknown}" if unknown else None


def check_doctor(r: RunResult, v: HostVars) -> CheckResult:
    """The short form of `specops doctor` a deploy starts with: device nodes, driver match, nvidia-smi."""
    from bot.core.doctor_host import host_checks

    checks = host_checks(r.out(), host=str(v.get("host_name", "HOST")), port=v.get("port"),
                         tp=int(v.get("tensor_parallel_size") or 1), short=True)
    failed = [c for c in checks if c.status == "failed"]
    if failed:
        first = failed[0]
        seen = "; ".join(first.seen[:3])
        more = f" (and {len(failed) - 1} more: `specops doctor --host {v.get('host_name')}`)" if len(failed) > 1 else ""
        return CheckResult(False, f"{first.title}: failed — {seen}. Fix: {first.fix}{more}",
                           {"doctor": [c.id for c in failed]}, shown=[line for c in failed for line in c.seen])
    return CheckResult(True, "; ".join(f"{c.title}: {c.status}" for c in checks))


Check = Callable[[RunResult, HostVars], CheckResult]
CHECKS: dict[str, Check] = {
    "doctor": check_doctor,
    "gpus": check_gpus,
    "port_free": check_port_free,
    "vllm_version": check_vllm_version,
    "drafter_config": check_drafter_config,
}
