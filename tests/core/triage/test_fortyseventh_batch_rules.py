"""Rules from the forty-seventh batch's misses, general: another package importing a module vLLM moved (which way
to move vLLM, from the code's history); a module-level function of vLLM's API refusing a keyword; the divisor of a
division by zero that a flag sets, read from the code line a paste kept above the exception; a volume too small for
the weights; weight shards loading part way; the forward torch.fx writes; the settings an attention backend selection
judged."""

from __future__ import annotations

from bot.core import owners
from tests.core.triage.reports import claims_of, report_of


def test_another_package_importing_a_module_vllm_moved_says_which_way_to_move_vllm() -> None:
    text = """\
Traceback (most recent call last):
  File "/srv/env/lib/python3.11/site-packages/acme_gateway/routes.py", line 5, in <module>
    from vllm.entrypoints.openai.speech_to_text.protocol import TranscriptionRequest
ModuleNotFoundError: No module named 'vllm.entrypoints.openai.speech_to_text'
"""
    later = [f for f in claims_of(text, version="0.30.0") if f.id.startswith("stale-import:")]
    assert later and later[0].advice == ["pin"] and later[0].owner == "other" and later[0].part == "entrypoint"
    assert not any("upgrade" in r.lower() for r in later[0].remediation)  # the frames' library advice is not added
    earlier = [f for f in claims_of(text, version="0.8.5") if f.id.startswith("stale-import:")]
    assert earlier and earlier[0].advice == ["upgrade"]


def test_a_module_level_function_of_vllms_api_refusing_a_keyword_is_the_callers() -> None:
    claims = claims_of("apply_hf_chat_template() got an unexpected keyword argument 'tokenize_mode'\n")
    found = [f for f in claims if f.id.startswith("api-call:")]
    assert found and found[0].part == "entrypoint" and {"fix-script", "pin"} <= set(found[0].advice)
    # a function no vLLM release defines is no call into vLLM's API
    assert not any(f.id.startswith("api-call:") for f in claims_of(
        "frobnicate_the_widgets() got an unexpected keyword argument 'x'\n"))


def test_a_divisor_a_flag_sets_is_that_flag_and_a_local_count_names_nothing() -> None:
    text = ("    if num_kv_heads % pipeline_parallel_size != 0:\n        ^^^^^^^^^^^^^^^^^^\n"
            "ZeroDivisionError: integer modulo by zero\n")
    words = [f for f in claims_of(text) if f.id.startswith("words:")]
    assert words and "--pipeline-parallel-size" in words[0].inputs and "--pipeline-parallel-size" in words[0].knobs
    local = claims_of("    share = total / count\nZeroDivisionError: float division by zero\n")
    assert not any("count" in f.inputs for f in local)


def test_a_volume_too_small_for_the_weights_is_the_disk_and_a_full_dev_shm_is_not() -> None:
    hub = ("/opt/py/lib/python3.12/site-packages/huggingface_hub/file_download.py:798: UserWarning: Not enough free "
           "disk space to download the file. The expected file size is: 3000.00 MB. The target location "
           "/cache/hub/models--acme--big/blobs only has 120.50 MB free disk space.\n")
    found = [f for f in claims_of(hub) if f.id == "disk-full"]
    assert found and found[0].severity == "critical" and found[0].host == ["disk"]
    assert "--download-dir" in found[0].knobs
    roomy = hub.replace("120.50 MB free", "9000.00 MB free")
    assert [f.severity for f in claims_of(roomy) if f.id == "disk-full"] == ["warning"]
    enospc = claims_of("OSError: [Errno 28] No space left on device: '/models/tmp/shard-3.safetensors'\n")
    assert any(f.id == "disk-full" and f.part is None for f in enospc)
    assert not any(f.id == "disk-full" for f in claims_of(
        "OSError: [Errno 28] No space left on device: '/dev/shm/nccl-abc'\n"))


def test_weight_shards_loading_part_way_is_startup_going_on() -> None:
    report = report_of("Loading safetensors checkpoint shards:  40% Completed | 2/5 [00:01<00:01,  2.01it/s]\n")
    assert report.verdict == "healthy"


def test_the_forward_torch_fx_writes_is_torchs_not_the_users() -> None:
    assert owners.of_path("<eval_with_key>.12") == owners.Owner("torch", "torch")
    assert owners.of_path("/home/me/serve.py").name == "user-script"


def test_no_backend_for_the_judged_configuration_names_the_settings_it_judged() -> None:
    claims = claims_of("ValueError: No valid attention backend found for cuda with AttentionSelectorConfig("
                       "head_size=96, dtype=torch.float16, kv_cache_dtype=fp8_e5m2, block_size=32, use_mla=False)\n")
    found = [f for f in claims if f.site is not None and "get_attn_backend_cls" in f.site.function]
    assert found and found[0].part == "attention"
    assert {"--kv-cache-dtype", "--block-size"} <= set(found[0].knobs)
    assert any("`--block-size` (32)" in r for r in found[0].remediation)
