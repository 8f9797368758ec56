"""Named checks that read a `run` step's output: GPUs, port, vLLM version, drafter config.

Each returns (ok, message, facts). They are what the brief's person tripped over, said plainly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from bot.remote.ssh import RunResult

CheckResult = tuple[bool, str, dict[str, Any]]
KNOWN_LAYER_TYPES = {"sliding_attention", "full_attention"}


def check_gpus(r: RunResult, v: dict[str, Any]) -> CheckResult:
    text = r.out() + r.err()
    if "No devices were found" in text:
        return False, ("nvidia-smi: No devices were found. On a Proxmox host this usually means the GPUs are bound "
                       "to vfio-pci: check `lspci -nnk -d 10de:` on the host and bind them to `nvidia`."), {}
    if "NVIDIA-SMI has failed" in text:
        return False, ("nvidia-smi cannot talk to the driver: the container's user-space driver must equal the "
                       "host's kernel module version, and /dev/nvidia* must be bound into the container."), {}
    if r.exit_status != 0:
        return False, f"nvidia-smi failed (exit {r.exit_status}): {text.strip()[:300]}", {}
    gpus: list[dict[str, Any]] = []
    for line in r.out().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4 and parts[0].isdigit():
            try:
                gpus.append({"index": int(parts[0]), "name": parts[1], "total_mib": int(float(parts[2])),
                             "free_mib": int(float(parts[3]))})
            except ValueError:
                continue
    need = int(v.get("tensor_parallel_size", 1))
    if len(gpus) < need:
        return False, f"{len(gpus)} GPU(s) visible, tensor parallel size needs {need}", {"gpus": gpus}
    min_free = int(v.get("min_free_gpu_mib", 0))
    short = [g for g in gpus[:need] if g["free_mib"] < min_free]
    if short:
        return False, ("not enough free GPU memory: " + ", ".join(
            f"GPU {g['index']} has {g['free_mib']} MiB free of {g['total_mib']}" for g in short)
            + f" (need {min_free} MiB); a stale server may hold it"), {"gpus": gpus}
    summary = ", ".join(f"GPU {g['index']} {g['name']} {g['free_mib']}/{g['total_mib']} MiB free" for g in gpus)
    return True, summary, {"gpus": gpus}


def check_port_free(r: RunResult, v: dict[str, Any]) -> CheckResult:
    lines = [ln for ln in r.out().splitlines() if ln.strip()]
    if r.exit_status != 0:
        return False, f"cannot list listening sockets: {r.err().strip()[:200]}", {}
    if lines:
        holder = re.search(r'users:\(\("([^"]+)",pid=(\d+)', lines[0])
        who = f"{holder[1]} (PID {holder[2]})" if holder else lines[0].strip()
        return False, (f"port {v.get('port')} is already in use by {who}; if that is an old server, "
                       f"stop it by its PID (`specops stop --host {v.get('host_name')}`)"), {}
    return True, f"port {v.get('port')} is free", {}


def check_vllm_version(r: RunResult, v: dict[str, Any]) -> CheckResult:
    m = re.search(r"(\d+\.\d+\.\d+[\w.+-]*)", r.out() + r.err())
    if r.exit_status != 0 or not m:
        return False, f"cannot read the vLLM version from `{v.get('vllm_bin')} --version`: " \
                      f"{(r.err() or r.out()).strip()[:200] or 'no output'}", {}
    found = m[1]
    expected = v.get("vllm_version_expected")
    note = f" (profile expects {expected})" if expected and not found.startswith(str(expected)) else ""
    return True, f"vLLM {found}{note}", {"vllm_version": found}


def check_drafter_config(r: RunResult, v: dict[str, Any]) -> CheckResult:
    if r.exit_status != 0:
        return False, f"cannot read the drafter's config.json: {r.err().strip()[:200]}", {}
    try:
        cfg = json.loads(r.out())
    except ValueError as exc:
        return False, f"the drafter's config.json is not valid JSON: {exc}", {}
    if not isinstance(cfg, dict):
        return False, "the drafter's config.json is not a JSON object", {}
    override = v.get("drafter_config_override")
    if isinstance(override, dict):
        cfg = {**cfg, **override}
    facts: dict[str, Any] = {"drafter_config": cfg}
    if v.get("method") == "dflash":
        dcfg = cfg.get("dflash_config")
        ids = dcfg.get("target_layer_ids") if isinstance(dcfg, dict) else None
        if not (isinstance(ids, list) and ids and all(isinstance(i, int) for i in ids)):
            return False, "the DFlash drafter config has no dflash_config.target_layer_ids", facts
        if not (isinstance(dcfg, dict) and "mask_token_id" in dcfg):
            return False, "the DFlash drafter config has no dflash_config.mask_token_id", facts
    types = cfg.get("layer_types")
    if types is not None:
        unknown = sorted({t for t in types if t not in KNOWN_LAYER_TYPES}) if isinstance(types, list) else [types]
        if unknown:
            return False, f"the drafter's layer_types has unknown values: {unknown}", facts
    mixed = isinstance(types, list) and len(set(types)) > 1
    ids_text = ""
    if isinstance(cfg.get("dflash_config"), dict):
        ids_text = f", target_layer_ids {cfg['dflash_config'].get('target_layer_ids')}"
    return True, f"layer_types {'mixed sliding/full' if mixed else (types[0] if types else 'n/a')}{ids_text}", facts


def check_doctor(r: RunResult, v: dict[str, Any]) -> CheckResult:
    """The short form of `specops doctor` a deploy starts with: device nodes, driver match, nvidia-smi."""
    from bot.core.doctor import host_checks

    checks = host_checks(r.out(), host=str(v.get("host_name", "HOST")), port=v.get("port"),
                         tp=int(v.get("tensor_parallel_size") or 1), short=True)
    failed = [c for c in checks if c.status == "failed"]
    if failed:
        first = failed[0]
        seen = "; ".join(first.seen[:3])
        more = f" (and {len(failed) - 1} more: `specops doctor --host {v.get('host_name')}`)" if len(failed) > 1 else ""
        return False, f"{first.title}: failed — {seen}. Fix: {first.fix}{more}", {
            "doctor": [c.id for c in failed], "output": [line for c in failed for line in c.seen]}
    return True, "; ".join(f"{c.title}: {c.status}" for c in checks), {}


CHECKS: dict[str, Callable[[RunResult, dict[str, Any]], CheckResult]] = {
    "doctor": check_doctor,
    "gpus": check_gpus,
    "port_free": check_port_free,
    "vllm_version": check_vllm_version,
    "drafter_config": check_drafter_config,
}
