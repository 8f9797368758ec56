"""The variables a run starts from: the names playbooks and templates read, and their values."""

from __future__ import annotations

from pathlib import Path
from typing import get_type_hints

import jinja2
import jinja2.meta
import pytest
import yaml

from bot.config import Config, load_config
from bot.core.doctor import probe
from bot.engine.hostvars import (
    STATS_WAIT,
    VERSION_SCRIPT,
    HostKeys,
    HostVars,
    fingerprint_of,
    host_variables,
)
from bot.paths import playbooks_dir, templates_dir

ROOT = Path(__file__).resolve().parents[2]
HOST_KEYS = {
    "host_name", "host_address", "workdir", "config_file", "pid_file", "log_file", "meta_file", "pid",
    "health_status", "probe", "stats_wait", "profile_name", "version_script", "doctor_script",
}
PROFILE_KEYS = {
    "model", "served_model_name", "method", "drafter", "num_speculative_tokens", "speculative_config",
    "tensor_parallel_size", "port", "vllm_bin", "vllm_version_expected", "extra_args", "env", "startup_timeout",
    "min_free_gpu_mib", "probe_max_tokens", "drafter_config_override", "model_is_path", "drafter_is_path", "device",
    "probe_prompt",
}
# what steps add to the variables as the run goes (check facts, save_as); playbooks may read them too
REGISTERED = {"gpus", "vllm_version", "drafter_config", "doctor"}


@pytest.fixture
def cfg() -> Config:
    return load_config(ROOT / "deploy" / "specops.example.yaml")


def test_without_a_profile_only_the_host_keys_are_set(cfg: Config) -> None:
    v = host_variables(cfg, "a6000", None)
    assert set(v) == HOST_KEYS
    assert v == {
        "host_name": "a6000", "host_address": "a6000.gpu.example.internal", "workdir": "/srv/specops",
        "config_file": "/srv/specops/server.yaml", "pid_file": "/srv/specops/server.pid",
        "log_file": "/srv/specops/server.log", "meta_file": "/srv/specops/server.json", "pid": None,
        "health_status": None, "probe": True, "stats_wait": STATS_WAIT, "profile_name": None,
        "version_script": VERSION_SCRIPT, "doctor_script": probe("host"),
    }


def test_a_profile_adds_its_keys_with_the_values_the_templates_read(cfg: Config) -> None:
    v = host_variables(cfg, "a6000", "dflash")
    assert set(v) == HOST_KEYS | PROFILE_KEYS
    assert {k: val for k, val in v.items() if k in PROFILE_KEYS} == {
        "model": "/models/Qwen3.6-27B", "served_model_name": "Qwen/Qwen3.6-27B", "method": "dflash",
        "drafter": "/models/Qwen3.6-27B-DFlash", "num_speculative_tokens": 15,
        "speculative_config": {"method": "dflash", "num_speculative_tokens": 15,
                               "model": "/models/Qwen3.6-27B-DFlash"},
        "tensor_parallel_size": 2, "port": 8000, "vllm_bin": "/opt/vllm-0.26.0/bin/vllm",
        "vllm_version_expected": "0.26.0",
        "extra_args": {"attention-backend": "flash_attn", "max-num-batched-tokens": 32768},
        "env": {"VLLM_USE_V2_MODEL_RUNNER": "1"}, "startup_timeout": 900.0, "min_free_gpu_mib": 1024,
        "probe_max_tokens": 64, "drafter_config_override": None, "model_is_path": True, "drafter_is_path": True,
        "device": "cuda", "probe_prompt": "Write a Python function that returns the n-th Fibonacci number.",
    }
    assert v["profile_name"] == "dflash"
    mtp = host_variables(cfg, "a6000", "mtp")
    assert mtp["drafter"] is None and mtp["drafter_is_path"] is False and mtp["env"] == {}


def test_the_typed_dict_declares_exactly_the_keys_built(cfg: Config) -> None:
    assert HostKeys.__required_keys__ == HOST_KEYS
    assert HostVars.__required_keys__ == HOST_KEYS and HostVars.__optional_keys__ == PROFILE_KEYS
    assert set(get_type_hints(HostVars)) == HOST_KEYS | PROFILE_KEYS


def test_the_fingerprint_is_the_one_deployments_already_recorded(cfg: Config) -> None:
    # the meta file on each host holds it: a different value makes every serving deployment redeploy
    assert fingerprint_of(host_variables(cfg, "a6000", "dflash")) == "d5f176fe2a405b92"
    assert fingerprint_of(host_variables(cfg, "a6000", "mtp")) == "5113fe66bd5e0958"


def _names_read(text: str, env: jinja2.Environment, expression: bool = False) -> set[str]:
    source = f"{{{{ {text} }}}}" if expression else text
    return set(jinja2.meta.find_undeclared_variables(env.parse(source)))


def _strings(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [s for item in node for s in _strings(item)]
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    return []


@pytest.mark.parametrize("path", sorted(playbooks_dir().glob("*.yaml")), ids=lambda p: p.stem)
def test_every_name_a_playbook_reads_is_a_host_variable_or_registered(path: Path) -> None:
    env = jinja2.Environment()
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    read: set[str] = set()
    for step in data["steps"]:
        when = step.pop("when", None)
        if when:
            read |= _names_read(when, env, expression=True)
        read |= {n for s in _strings(step) for n in _names_read(s, env)}
    assert read and read <= HOST_KEYS | PROFILE_KEYS | REGISTERED, read - (HOST_KEYS | PROFILE_KEYS | REGISTERED)


def test_the_server_config_template_reads_only_host_variables() -> None:
    env = jinja2.Environment()
    read = _names_read((templates_dir() / "vllm-server.yaml.j2").read_text(encoding="utf-8"), env)
    assert read and read <= HOST_KEYS | PROFILE_KEYS
