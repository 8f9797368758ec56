"""`specops kb atlas LINE` answers as well as `diagnose` does (issue 38): the platform from the GPU the line names
(or --platform), the knowledge base's entry first, and a wording no later release prints said as reworded or
removed — never as "fixed in"."""

from __future__ import annotations

from bot.app.evaluation import kb
from bot.present.atlas import atlas_lines

BF16_T4 = ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 "
           "GPU has compute capability 7.5. You can use float16 instead by explicitly setting the `dtype` flag in "
           "CLI, for example: --dtype=half.")
NO_BLOCKS = ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
             "initializing the engine.")


def test_an_nvidia_gpu_in_the_line_picks_cudas_file_and_platform_overrides() -> None:
    assert kb.atlas(BF16_T4)["file"] == "vllm/platforms/cuda.py"
    assert kb.atlas(BF16_T4, platform="rocm")["file"] == "vllm/platforms/rocm.py"


def test_the_knowledge_base_comes_first_and_a_gone_wording_is_not_called_fixed() -> None:
    out = kb.atlas(NO_BLOCKS, "0.20.1")
    lines = atlas_lines(out)
    assert lines[0].startswith("knowledge base: no-available-memory-cache-blocks")
    assert not any("engine-crashed" in line for line in lines)  # a catch-all explains nothing
    text = "\n".join(lines)
    assert "upgrade to" not in text and "(None)" not in text and "reworded or removed" in text
