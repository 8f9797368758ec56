"""Rules from the sixty-eighth batch's misses, general: the reasons vLLM's attention backend selection gives per
backend (`FLASHMLA_SPARSE: [kv_cache_dtype not supported]`) name the setting refused and its flag, quoted alone too;
a kernel refusing a KV cache of uint8 refused the FP8 KV cache (vLLM stores it as bytes)."""

from __future__ import annotations

from tests.core.triage.reports import claims_of


def test_a_backends_reasons_name_the_setting_it_refused() -> None:
    (found,) = [f for f in claims_of("FLASHINFER_MLA: [kv_cache_dtype not supported, block_size not supported]\n")
                if f.id == "attention-backend-refused-setting"]
    assert found.part == "attention" and found.knobs == ["--kv-cache-dtype", "--block-size"]
    # a reason that names no setting a flag sets (the GPU's capability): nothing claimed by this reader
    assert not [f for f in claims_of("FLASHMLA_SPARSE: [compute capability not supported]\n")
                if f.id == "attention-backend-refused-setting"]
    # a backend that also refuses what no flag sets (the GPU): not won back by the flag
    assert not [f for f in claims_of("FLASHMLA_SPARSE: [kv_cache_dtype not supported, compute capability not "
                                     "supported]\n") if f.id == "attention-backend-refused-setting"]
    # the reasons logged as news before a backend was chosen, then another error: that error's, not the reasons'
    news = ("INFO 11-20 10:00:05 [cuda.py:403] Some attention backends are not valid for cuda. Reasons: {\n"
            "  FLASH_ATTN: [kv_cache_dtype not supported],\n}.\n"
            "ERROR 11-20 10:00:30 [core.py:700] torch.OutOfMemoryError: CUDA out of memory.\n")
    assert not [f for f in claims_of(news) if f.id == "attention-backend-refused-setting"]


def test_a_kv_cache_of_uint8_refused_is_the_fp8_kv_cache() -> None:
    (found,) = [f for f in claims_of("ValueError: MLA kv_data_type torch.uint8 is not supported\n")
                if f.id == "fp8-kv-cache-refused"]
    assert found.inputs == ["--kv-cache-dtype"] and found.part == "attention"
    # uint8 refused for a KV connector's transfer, or an image's pixels: not the KV cache
    assert not [f for f in claims_of("ValueError: KV connector transfer of torch.uint8 tensors is not supported\n")
                if f.id == "fp8-kv-cache-refused"]
    assert not [f for f in claims_of("ValueError: pixel_values of dtype torch.uint8 is not supported\n")
                if f.id == "fp8-kv-cache-refused"]
