"""The files of vLLM's API a program calls: the offline `LLM`, the engines, the engine arguments, the sampling and
pooling parameters, the entrypoints. A class from one of them is one another program builds on; a class elsewhere in
vLLM (`Request`, `Sampler`) shares its name with other libraries' classes and proves nothing."""

from __future__ import annotations

API_FILES = ("vllm/entrypoints/llm.py", "vllm/sampling_params.py", "vllm/engine/arg_utils.py", "vllm/inputs/",
             "vllm/entrypoints/", "vllm/engine/async_llm_engine.py", "vllm/engine/llm_engine.py",
             "vllm/v1/engine/async_llm.py", "vllm/v1/engine/llm_engine.py", "vllm/pooling_params.py",
             "vllm/outputs.py")
