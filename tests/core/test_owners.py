"""Who owns a traceback frame, a compiled module, or a message from below vLLM."""

from __future__ import annotations

import pytest

from bot.core import owners


@pytest.mark.parametrize(("path", "owner", "package"), [
    ("/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", "vllm", "vllm"),
    ("/opt/conda/lib/python3.10/site-packages/vllm_ascend/utils.py", "plugin", "vllm_ascend"),
    ("/home/u/code/LMCache/lmcache/integration/vllm/vllm_v1_adapter.py", "plugin", "lmcache"),
    ("/workspace/vllm/vllm/model_executor/models/llama.py", "vllm", "vllm"),
    ("/usr/local/lib/python3.10/dist-packages/flashinfer/sampling.py", "flashinfer", "flashinfer"),
    ("/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py", "torch", "torch"),
    ("/usr/lib/python3.12/multiprocessing/process.py", "python", "python"),
    ("/root/code/vllm/vllm/vllm_flash_attn/flash_attn_interface.py", "flash-attn", "vllm_flash_attn"),
    ("/tmp/test.py", "user-script", "test.py"),
    ("csrc/custom_all_reduce.cuh", "vllm", "vllm"),
])
def test_the_owner_of_a_frame_comes_from_its_path(path: str, owner: str, package: str) -> None:
    got = owners.of_path(path)
    assert got is not None and (got.name, got.package) == (owner, package)


def test_a_compiled_module_is_owned_by_its_package() -> None:
    flash = owners.of_shared_object("ImportError: /usr/lib/python3/dist-packages/flash_attn_2_cuda.cpython-310-x86_64"
                                    "-linux-gnu.so: undefined symbol: _ZN3c105Error")
    assert flash is not None and flash.name == "flash-attn"
    vllm = owners.of_shared_object("version `GLIBC_2.32' not found (required by /usr/local/lib/python3.10/dist-packages"
                                   "/vllm/_C.abi3.so)")
    assert vllm is not None and vllm.name == "vllm"
