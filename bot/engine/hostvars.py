"""The variables a playbook run starts from: the host's inventory entry and, for deploy and diagnose, the
profile as that host serves it (its `overrides` applied: `Config.profile_for`). Playbooks (playbooks/*.yaml)
and templates (templates/vllm-server.yaml.j2) read them by name, so the key names below are part of their
contract.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Literal, TypedDict, cast

from bot.config import Config, Method
from bot.core.doctor import probe
from bot.engine.hosts import RemoteLayout
from bot.engine.playbook import render_template

# vLLM logs SpecDecoding every VLLM_LOG_STATS_INTERVAL (10 s by default) after traffic
STATS_WAIT = 25.0
# Reads the vLLM version of the venv that `vllm_bin` belongs to; the path arrives as $1, never in the text.
VERSION_SCRIPT = (
    'first=$(head -c 256 "$1" | head -n 1); case "$first" in "#!"*) py=${first#??}; '
    '$py -c "from importlib.metadata import version; print(version(\'vllm\'))" 2>/dev/null && exit 0;; esac; '
    'exec "$1" --version'
)
DEFAULT_PROBE_PROMPT = "Write a Python function that returns the n-th Fibonacci number."


class HostKeys(TypedDict):
    """Set for every run, with or without a profile (stop needs only these)."""

    host_name: str
    host_address: str
    workdir: str
    config_file: str
    pid_file: str
    log_file: str
    meta_file: str
    pid: int | None  # the server's, once known (the host's meta file; a start step)
    health_status: int | None  # diagnose's /health step saves its status code here
    probe: bool  # diagnose sends a completion (status does not)
    stats_wait: float
    profile_name: str | None
    version_script: str
    doctor_script: str


class HostVars(HostKeys, total=False):
    """The host's keys, and the profile's when the run has one (deploy, diagnose)."""

    model: str
    served_model_name: str
    method: Method
    drafter: str | None
    num_speculative_tokens: int | None
    speculative_config: dict[str, object] | None
    tensor_parallel_size: int
    port: int
    vllm_bin: str
    vllm_version_expected: str | None
    extra_args: dict[str, object]
    env: dict[str, str]  # the host's vllm_env under the profile's env
    startup_timeout: float
    min_free_gpu_mib: int
    probe_max_tokens: int
    drafter_config_override: dict[str, object] | None
    model_is_path: bool
    drafter_is_path: bool
    device: Literal["cuda", "cpu"]
    probe_prompt: str


def host_variables(cfg: Config, host_name: str, profile_name: str | None) -> HostVars:
    host = cfg.host(host_name)
    layout = RemoteLayout(host.workdir)
    v: HostVars = {
        "host_name": host_name, "host_address": host.address, "workdir": layout.workdir,
        "config_file": layout.config_file, "pid_file": layout.pid_file, "log_file": layout.log_file,
        "meta_file": layout.meta_file, "pid": None, "health_status": None, "probe": True,
        "stats_wait": STATS_WAIT, "profile_name": profile_name, "version_script": VERSION_SCRIPT,
        "doctor_script": probe("host"),
    }
    if profile_name is not None:
        p = cfg.profile_for(profile_name, host_name)  # the host's overrides over the profile
        v.update({
            "model": p.model, "served_model_name": p.served_model_name or p.model, "method": p.method,
            "drafter": p.drafter, "num_speculative_tokens": p.num_speculative_tokens,
            "speculative_config": p.speculative_config(), "tensor_parallel_size": p.tensor_parallel_size,
            "port": p.port, "vllm_bin": p.vllm.bin, "vllm_version_expected": p.vllm.version,
            "extra_args": p.extra_args, "env": {**host.vllm_env, **p.env},
            "startup_timeout": p.startup_timeout, "min_free_gpu_mib": p.min_free_gpu_mib,
            "probe_max_tokens": p.probe_max_tokens, "drafter_config_override": p.drafter_config,
            "model_is_path": p.model.startswith("/"), "drafter_is_path": bool(p.drafter and p.drafter.startswith("/")),
            "device": p.device, "probe_prompt": p.probe_prompt or DEFAULT_PROBE_PROMPT,
            # no speculative config, no SpecDecoding line to wait for (tune's k = 0, a plain server)
            "stats_wait": 0.0 if p.method == "none" else STATS_WAIT,
        })
    return v


def as_host_vars(variables: Mapping[str, object]) -> HostVars:
    """A run's variables, read as the host's: they start as `host_variables(...)` and steps only add names
    or re-set `pid` and `health_status` with those types. A playbook that `save_as`es over a host key is
    read as it wrote it, as before this was typed; the checks that read these coerce what they use."""
    return cast(HostVars, variables)


def fingerprint_of(variables: HostVars) -> str:
    """What makes two deployments the same: the config file, the environment, the binary, the model."""
    config_text = render_template("vllm-server.yaml.j2", variables)
    payload = json.dumps({"config": config_text, "env": variables.get("env"), "bin": variables.get("vllm_bin"),
                          "model": variables.get("model")}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]
