"""The named checks a `run` step applies to its output: what passes, what fails and what it says."""

from __future__ import annotations

import json
from typing import cast

import pytest

from bot.engine.hostvars import HostVars
from bot.engine.preflight import check_drafter_config, check_gpus
from bot.remote.ssh import RunResult

GOOD_DFLASH = {"layer_types": ["full_attention", "sliding_attention"],
               "dflash_config": {"target_layer_ids": [1, 30], "mask_token_id": 7}}


def _out(text: str, exit_status: int = 0) -> RunResult:
    return RunResult(["x"], "x", exit_status, text.encode(), b"boom" if exit_status else b"", 0.0)


def _v(**kw: object) -> HostVars:
    """Only the keys a check reads: the checks read with .get and defaults, as a bare playbook run has none."""
    return cast(HostVars, kw)


def test_a_good_dflash_drafter_passes_and_its_config_is_recorded() -> None:
    got = check_drafter_config(_out(json.dumps(GOOD_DFLASH)), _v(method="dflash"))
    assert got.ok and got.message == "layer_types mixed sliding/full, target_layer_ids [1, 30]"
    assert got.facts == {"drafter_config": GOOD_DFLASH}


@pytest.mark.parametrize(("cfg", "v", "said"), [
    ({"dflash_config": {"mask_token_id": 1}}, {"method": "dflash"}, "no dflash_config.target_layer_ids"),
    ({"dflash_config": {"target_layer_ids": [3]}}, {"method": "dflash"}, "no dflash_config.mask_token_id"),
    ({"layer_types": ["full_attention", "chunked"]}, {}, "unknown values: ['chunked']"),
    ({"layer_types": "full_attention"}, {}, "unknown values: ['full_attention']"),
    # the profile's override is what vLLM gets, so it is what is checked
    (GOOD_DFLASH, {"method": "dflash", "drafter_config_override": {"dflash_config": {}}}, "target_layer_ids"),
])
def test_a_drafter_config_vllm_would_refuse_fails(cfg: dict[str, object], v: dict[str, object], said: str) -> None:
    got = check_drafter_config(_out(json.dumps(cfg)), _v(**v))
    assert not got.ok and said in got.message and "drafter_config" in got.facts


def test_a_drafter_config_that_is_not_json_fails_without_facts() -> None:
    for got in (check_drafter_config(_out("nope"), _v()), check_drafter_config(_out("[1]"), _v()),
                check_drafter_config(_out("", 1), _v())):
        assert not got.ok and got.facts == {}


def test_gpus_short_of_memory_or_count_fail_with_what_was_seen() -> None:
    out = _out("0, NVIDIA RTX A6000, 49140, 48000\n1, NVIDIA RTX A6000, 49140, 100\n")
    assert check_gpus(out, _v(tensor_parallel_size=1, min_free_gpu_mib=1024)).ok
    short = check_gpus(out, _v(tensor_parallel_size=2, min_free_gpu_mib=1024))
    assert not short.ok and "GPU 1 has 100 MiB free of 49140" in short.message and len(short.facts["gpus"]) == 2
    assert "tensor parallel size needs 3" in check_gpus(out, _v(tensor_parallel_size=3)).message
    assert "vfio-pci" in check_gpus(_out("No devices were found"), _v()).message
