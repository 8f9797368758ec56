"""The general rules the twenty-first blind batch's first sight asked for (issue 35): the flag a config key is given
with is an input of the failure that read it; vLLM's lookups of a local path at the Hub are notes; the KV offload
code is the KV cache's part; too little /dev/shm names the container's shared memory; a library's error about what
it was given is not a version drift. Lines as vLLM prints them, none of them a line of the evaluation cases."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.parts import part_of
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.atlas_readers.named_in_words import named_in_words
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings


def report(lines: list[str], **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text("\n".join(lines)), flags=Flags(**flags))))


def test_the_flag_a_config_key_is_given_with_is_an_input() -> None:
    r = report(["Traceback (most recent call last):",
                '  File "/usr/lib/python3.12/site-packages/vllm/distributed/kv_transfer/kv_connector/v1/p2p/'
                'p2p_nccl_engine.py", line 95, in __init__',
                "    port = self.config.kv_connector_extra_config['proxy_port']",
                "KeyError: 'proxy_port'"])
    f = next(f for f in r.findings if f.id.startswith("frame:"))
    assert "--kv-transfer-config" in f.inputs and "--kv-transfer-config" in f.knobs


def test_vllms_lookup_of_a_local_path_at_the_hub_is_a_note() -> None:
    # vLLM's config lookup (vllm/transformers_utils/config.py) logging the Hub's refusal, then going on
    r = report(["ERROR 03-01 10:00:00 config.py:102] Error retrieving file list: Repo id must use alphanumeric "
                "chars or '-', '_', '.', '--' and '..' are forbidden, '-' and '.' cannot start or end the name, max "
                "length is 96: '../models/opt-125m'., retrying 1 of 2"])
    assert not any(f.severity in ("critical", "warning") for f in r.findings)


def test_the_kv_offload_code_is_the_kv_caches_part() -> None:
    assert part_of("vllm/v1/kv_offload/cpu/shared_offload_region.py") == "kv-cache"


def test_too_little_dev_shm_names_the_containers_shared_memory() -> None:
    assert named_in_words("Insufficient space in /dev/shm: 4095/4096 MiB required, 1405 MiB free", None,
                          None).host == ["shm"]


def test_a_librarys_error_about_what_it_was_given_is_not_a_version_drift() -> None:
    r = report(["zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5600')"])
    assert not any(f.id.startswith("package-raised:") for f in r.findings)


def test_ipythons_frames_are_frames() -> None:
    # IPython's traceback format, as a notebook prints it
    parsed = parse_text("\n".join([
        "File ~/venv/lib/python3.11/site-packages/vllm/lora/punica_wrapper/punica_gpu.py:48, in "
        "PunicaWrapperGPU._shrink_prefill(self, y, x, w_t_all, scale)",
        "ValueError: boom"]))
    frame = next(p for p in parsed.problems if p.kind == "frame")
    assert frame.frame_line == 48 and frame.frame_function == "PunicaWrapperGPU._shrink_prefill"


def test_tensors_on_two_devices_name_the_device_selection() -> None:
    # PyTorch's own words (aten's device check)
    named = named_in_words("Expected all tensors to be on the same device, but found at least two devices, cuda:1 "
                           "and cuda:0!", None, None)
    assert "device-visibility" in named.host and "CUDA_VISIBLE_DEVICES" in named.knobs


def test_an_attention_kernels_gpu_requirement_offers_the_backend_switch() -> None:
    # vllm-flash-attn's own check (flash_attn_interface), on an older GPU
    r = report(["RuntimeError: FlashAttention only supports Ampere GPUs or newer."], vllm_version="0.5.5")
    f = next(f for f in r.findings if f.id == "gpu-too-old")
    assert f.part == "attention" and "VLLM_ATTENTION_BACKEND" in f.knobs


def test_a_weight_file_that_does_not_read_back_is_the_checkpoints() -> None:
    named = named_in_words("Error while deserializing header: MetadataIncompleteBuffer", None, None)
    assert "checkpoint" in named.inputs and "checkpoint" in named.advice


def test_the_hub_not_reached_names_the_local_model_and_the_network() -> None:
    # requests' words for a connection that failed (urllib3's MaxRetryError inside)
    r = report(["requests.exceptions.ConnectionError: (MaxRetryError('HTTPSConnectionPool(host=huggingface.co, "
                "port=443)'), \"HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded\")"])
    f = next(f for f in r.findings if f.id == "hub-unreachable")
    assert "--model" in f.knobs and "network" in f.host
