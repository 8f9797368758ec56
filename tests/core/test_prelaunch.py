"""The pre-launch checks (issue 37) on facts given directly: each fails on a wrong pair and passes on the right one.
The facts are the brief's (shared/reference/upstream.md: z-lab's Qwen3.6-27B DFlash drafter, its 64-layer target)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.core.atlas import load_atlas
from bot.core.prelaunch import Check, PairFacts, run_checks, worst
from bot.core.triage.knowledge import load_knowledge

DRAFTER = "z-lab/Qwen3.6-27B-DFlash"
# the drafter's config.json as shared/reference/upstream.md gives it (the simulated host carries the same)
QWEN36_DFLASH_CONFIG: dict[str, Any] = {
    "architectures": ["DFlashDraftModel"], "num_hidden_layers": 5, "num_target_layers": 64, "block_size": 16,
    "sliding_window": 2048, "layer_types": ["sliding_attention"] * 4 + ["full_attention"],
    "dflash_config": {"mask_token_id": 248070, "target_layer_ids": [1, 16, 31, 46, 61]},
}
TARGET: dict[str, Any] = {"architectures": ["Qwen3_5ForConditionalGeneration"], "num_hidden_layers": 64}
SPEC = {"method": "dflash", "model": DRAFTER, "num_speculative_tokens": 15}
FIXED_ENV = {"VLLM_USE_V2_MODEL_RUNNER": "1"}


def checks(**over: Any) -> dict[str, Check]:
    facts: dict[str, Any] = dict(profile="p", method="dflash", vllm_version="0.26.0", drafter=DRAFTER,
                                 speculative_config=SPEC, target_config=TARGET, drafter_config=QWEN36_DFLASH_CONFIG,
                                 env=FIXED_ENV, gpus=(("NVIDIA RTX A6000", (8, 6)),) * 2, tensor_parallel_size=2)
    facts.update(over)
    return {c.id: c for c in run_checks(PairFacts(**facts), load_knowledge(), load_atlas())}


def test_the_right_pair_on_a_fixed_release_passes() -> None:
    got = checks()
    assert worst(list(got.values())) == "ok", [(c.id, c.verdict, c.evidence) for c in got.values()]


def test_the_brief_on_0_20_1_is_refused_with_both_upstream_threads() -> None:
    got = checks(vllm_version="0.20.1", env={})
    offset, swa = got["known:dflash-layer-offset"], got["known:dflash-swa-full-attention"]
    assert offset.verdict == swa.verdict == "refuse"
    assert "vllm#40727" in offset.evidence[0] and "fixed in / handled from vLLM 0.22.0" in offset.evidence
    assert any(e.startswith("expect: ") and "1.18" in e for e in offset.evidence)  # what it does, before launch
    assert "vllm#40898" in swa.evidence[0] and any("40898" in s for s in swa.sources)


def test_0_26_without_model_runner_v2_is_refused_for_a_mixed_drafter() -> None:
    assert checks(env={})["known:dflash-swa-needs-v2"].verdict == "refuse"
    all_full = {**QWEN36_DFLASH_CONFIG, "layer_types": ["full_attention"] * 5}
    assert "known:dflash-swa-needs-v2" not in checks(env={}, drafter_config=all_full)


def test_ids_shifted_by_hand_on_0_20_1_are_the_offset_workaround() -> None:
    shifted = {**QWEN36_DFLASH_CONFIG, "dflash_config": {"mask_token_id": 248070,
                                                         "target_layer_ids": [2, 17, 32, 47, 62]}}
    got = checks(vllm_version="0.20.1", env={}, drafter_config=shifted)
    assert "known:dflash-layer-offset" not in got  # compensated
    assert got["layer-ids"].verdict == "warn" and "workaround of vllm#40727" in got["layer-ids"].title


def test_a_guessed_premise_warns_and_never_refuses() -> None:
    got = checks(vllm_version="0.20.1", env={}, drafter_config=None, unread={"drafter": "not on the host"})
    assert got["known:dflash-swa-full-attention"].verdict == "warn"
    assert got["vocabulary"].verdict == "unknown" and "not on the host" in got["vocabulary"].evidence[0]


@pytest.mark.parametrize(("over", "check", "verdict"), [
    ({"target_config": {**TARGET, "vocab_size": 248320},
      "drafter_config": {**QWEN36_DFLASH_CONFIG, "vocab_size": 151936}}, "vocabulary", "refuse"),
    ({"target_config": {**TARGET, "hidden_size": 5120},
      "drafter_config": {**QWEN36_DFLASH_CONFIG, "hidden_size": 4096}}, "hidden-size", "warn"),
    ({"target_config": {**TARGET, "num_hidden_layers": 48}}, "layer-ids", "refuse"),
    ({"drafter_config": {**QWEN36_DFLASH_CONFIG,
                         "dflash_config": {"mask_token_id": 248070, "target_layer_ids": [1, 15, 31, 46, 61]}}},
     "layer-ids", "warn"),
    ({"target_config": {**TARGET, "rope_theta": 10000000},
      "drafter_config": {**QWEN36_DFLASH_CONFIG, "rope_theta": 1000000}}, "rope", "warn"),
    ({"drafter_config": {**QWEN36_DFLASH_CONFIG, "max_position_embeddings": 32768}, "max_model_len": 65536},
     "context", "warn"),
    ({"vllm_version": "0.19.1", "env": {}}, "method-in-release", "refuse"),
    ({"speculative_config": {**SPEC, "kv_cache_dtype": "fp8"}, "vllm_version": "0.20.1", "env": {}},
     "spec-fields", "refuse"),
    ({"env": {"VLLM_USE_V2_MODEL_RUNER": "1"}}, "environment", "warn"),
])
def test_each_wrong_pair_is_caught(over: dict[str, Any], check: str, verdict: str) -> None:
    got = checks(**over)
    assert got[check].verdict == verdict, (got[check].title, got[check].evidence)


def test_a_field_of_a_later_release_names_that_release_and_a_typo_its_name() -> None:
    later = checks(speculative_config={**SPEC, "kv_cache_dtype": "fp8"}, vllm_version="0.20.1", env={})
    assert any("0.26.0" in e for e in later["spec-fields"].evidence)
    typo = checks(speculative_config={**SPEC, "num_speculative_token": 15})
    assert any("num_speculative_tokens" in e for e in typo["spec-fields"].evidence)
    env = checks(env={"VLLM_USE_V2_MODEL_RUNER": "1"})["environment"]
    assert "VLLM_USE_V2_MODEL_RUNNER" in env.evidence[0]


def test_an_unknown_version_says_unknown_never_ok() -> None:
    got = checks(vllm_version=None, unread={"version": "`vllm --version` said 'command not found'"})
    assert got["vllm-version"].verdict == "unknown" and "command not found" in got["vllm-version"].evidence[0]


A6000 = ("NVIDIA RTX A6000", (8, 6))
T4 = ("Tesla T4", (7, 5))


def test_enough_gpus_for_the_tensor_parallel_size() -> None:
    assert checks(gpus=(A6000, A6000), tensor_parallel_size=2)["gpus"].verdict == "ok"
    short = checks(gpus=(A6000,), tensor_parallel_size=2)["gpus"]
    assert short.verdict == "refuse" and "1 GPU(s) for a tensor-parallel size of 2" in short.title


def test_bfloat16_on_a_gpu_below_compute_capability_8_is_refused_with_vllms_check() -> None:
    bf16 = {**TARGET, "torch_dtype": "bfloat16"}
    got = checks(gpus=(T4,), tensor_parallel_size=1, target_config=bf16)["dtype-on-gpu"]
    assert got.verdict == "refuse" and "7.5" in got.title and "--dtype half" in got.fix
    assert got.sources and got.sources[0].startswith("https://github.com/vllm-project/vllm/blob/")
    assert checks(gpus=(A6000,), tensor_parallel_size=1, target_config=bf16)["dtype-on-gpu"].verdict == "ok"
    # float16 asked for; the dtype not stated (not guessed)
    assert "dtype-on-gpu" not in checks(gpus=(T4,), tensor_parallel_size=1, target_config=bf16, dtype="half")
    assert "dtype-on-gpu" not in checks(gpus=(T4,), tensor_parallel_size=1)


def test_gpus_not_read_are_unknown_and_a_cpu_build_has_none_to_check() -> None:
    assert checks(gpus=None, unread={"gpus": "nvidia-smi said 'No devices were found'"})["gpus"].verdict == "unknown"
    assert "gpus" not in checks(gpus=None, device="cpu")


# the target's memory facts (the simulated host's: Qwen3.5-27B's architecture, one full-attention layer in four)
SIZED = {**TARGET, "text_config": {"num_hidden_layers": 64, "num_attention_heads": 24, "num_key_value_heads": 4,
                                   "head_dim": 256, "full_attention_interval": 4, "max_position_embeddings": 262144,
                                   "torch_dtype": "bfloat16"}}
A6000_MIB = 49140


def memory(**over: Any) -> Check:
    facts: dict[str, Any] = dict(target_config=SIZED, target_weights=55_600_000_000, drafter_weights=3_400_000_000,
                                 gpu_memory=((A6000_MIB, 4),) * 2)
    facts.update(over)
    return checks(**facts)["memory-fit"]


def test_weights_and_one_request_at_max_model_len_fit_two_a6000s() -> None:
    got = memory()
    assert got.verdict == "ok", got
    # 16 full-attention layers x 2 x 4 KV heads x 256 x 2 bytes = 64 KiB a token: 16 GiB at 262144 tokens
    assert any("KV cache for one request of 262144 tokens: 17.0 GiB" in e for e in got.evidence), got.evidence


def test_weights_and_kv_that_do_not_fit_are_refused_with_the_largest_max_model_len_that_would() -> None:
    got = memory(tensor_parallel_size=1, gpus=(("NVIDIA RTX A6000", (8, 6)),), gpu_memory=((A6000_MIB, 4),))
    assert got.verdict == "refuse" and "--max-model-len" not in got.fix, got  # the weights alone do not fit one GPU
    assert "weights alone" in got.fix
    short = memory(target_weights=30_000_000_000, drafter_weights=None, tensor_parallel_size=1,
                   gpus=(("NVIDIA RTX A6000", (8, 6)),), gpu_memory=((A6000_MIB, 4),))
    assert short.verdict == "refuse" and "`--max-model-len " in short.fix, short
    largest = int(short.fix.split("`--max-model-len ")[1].split("`")[0])
    assert 0 < largest < 262144
    # the release's own check is the source: vLLM's sentence, found in the atlas at that version
    assert short.sources and "kv_cache_utils.py" in short.sources[0], short.sources
    assert memory(target_weights=30_000_000_000, drafter_weights=None, tensor_parallel_size=1,
                  gpus=(("NVIDIA RTX A6000", (8, 6)),), gpu_memory=((A6000_MIB, 4),),
                  max_model_len=largest).verdict in ("ok", "warn")


def test_gpu_memory_in_use_warns_and_unweighed_weights_are_unknown() -> None:
    busy = checks(target_config=SIZED, target_weights=55_600_000_000, gpu_memory=((A6000_MIB, 30000),) * 2)
    assert busy["gpu-free-memory"].verdict == "warn" and "utils.py" in busy["gpu-free-memory"].sources[0]
    unweighed = memory(target_weights=None, unread={"weights": "no weight files (*.safetensors, *.bin) in /m"})
    assert unweighed.verdict == "unknown" and "no weight files" in unweighed.evidence[0]


def test_special_tokens_of_another_tokenizer_warn() -> None:
    target = {**TARGET, "vocab_size": 248320, "eos_token_id": 248044}
    same = checks(target_config=target, drafter_config={**QWEN36_DFLASH_CONFIG, "vocab_size": 248320,
                                                        "eos_token_id": 248044})
    assert same["vocabulary"].verdict == "ok"
    other = checks(target_config=target, drafter_config={**QWEN36_DFLASH_CONFIG, "vocab_size": 248320,
                                                         "eos_token_id": 2})
    said = other["vocabulary"]
    assert said.verdict == "warn" and "eos_token_id: target 248044, drafter 2" in said.evidence


def test_vllms_own_capability_checks_of_the_selected_backend_are_evaluated_before_launch() -> None:
    # 0.26.0's Triton attention backend refuses an FP8 KV cache below SM89 (its condition, read from the atlas)
    got = checks(attention_backend="TRITON_ATTN", kv_cache_dtype="fp8", target_config=SIZED)
    gate = got["gpu-gate:TritonAttentionImpl.__init__"]
    assert gate.verdict == "refuse" and "FP8 KV cache is not supported by the Triton attention backend on NVIDIA " \
        "RTX A6000 (compute capability 8.6)" in gate.evidence[0], gate
    assert gate.sources and "triton_attn.py" in gate.sources[0]
    # the same on an SM89 GPU, or another backend, or the default KV cache: nothing to refuse
    assert not any(k.startswith("gpu-gate:") for k in checks(attention_backend="TRITON_ATTN", kv_cache_dtype="fp8",
                                                             gpus=(("NVIDIA L40S", (8, 9)),) * 2))
    assert not any(k.startswith("gpu-gate:") for k in checks(attention_backend="FLASH_ATTN", kv_cache_dtype="fp8"))
    assert not any(k.startswith("gpu-gate:") for k in checks(attention_backend="TRITON_ATTN"))
    # a release without that check: nothing claimed for it
    assert not any(k.startswith("gpu-gate:") for k in checks(vllm_version="0.20.1", env={},
                                                             attention_backend="TRITON_ATTN", kv_cache_dtype="fp8"))


def test_architectures_are_looked_up_in_the_releases_model_registry() -> None:
    got = checks(target_config={**TARGET, "architectures": ["Qwen3_5ForConditionalGeneration"]})
    assert got["architecture-target"].verdict == got["architecture-drafter"].verdict == "ok"
    # the DFlash drafter's architecture is registered from 0.20.0 on: on 0.19.1 it is not
    old = checks(vllm_version="0.19.1", env={})
    assert old["architecture-drafter"].verdict == "warn" and "DFlashDraftModel: in vLLM 0.20.0" in \
        old["architecture-drafter"].evidence[0]
    typo = checks(target_config={**TARGET, "architectures": ["Qwen3_5ForConditionalGenerashun"]})
    assert typo["architecture-target"].verdict == "warn" and "in no release" in typo["architecture-target"].evidence[0]


def test_a_quantization_below_its_least_compute_capability_is_refused() -> None:
    # vLLM's get_min_capability() per method and release, read into the atlas: modelopt (FP8) wants 8.9 in 0.20.1
    quantized = {**SIZED, "quantization_config": {"quant_method": "modelopt"}}
    refused = checks(vllm_version="0.20.1", env={}, target_config=quantized)["quantization-on-gpu"]
    assert refused.verdict == "refuse" and "compute capability 8.9" in refused.title, refused
    assert checks(vllm_version="0.20.1", env={}, target_config=quantized,
                  gpus=(("NVIDIA L40S", (8, 9)),) * 2)["quantization-on-gpu"].verdict == "ok"
    assert checks(vllm_version="0.20.1", env={}, quantization="bitsandbytes",
                  target_config=SIZED)["quantization-on-gpu"].verdict == "ok"
    unknown = checks(quantization="no-such-method")["quantization-on-gpu"]
    assert unknown.verdict == "unknown" and "holds no least compute capability" in unknown.evidence[0]
