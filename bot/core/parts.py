"""Which part of vLLM a file (and the function in it) belongs to, and a path as its repository writes it.

The parts are the vocabulary the reports and the cases share (tests/CASES.md: `part:P`): read from the path
(`vllm/distributed/…` is parallel), refined by the function (a config class of the one-file `vllm/config.py`, a
model's own weight loading, a shared module's multimodal helper). Pure: strings in, strings out.
"""

from __future__ import annotations

import re

# Which part of vLLM a file belongs to: the first rule that matches wins, so the specific come first.
PARTS: tuple[tuple[str, str], ...] = (
    (r"^huggingface_hub/|^src/huggingface_hub/", "hub"),
    # transformers' tokenizers (`tokenization_utils_base.py`, a model's `tokenization_x.py`): the tokenizer vLLM runs
    (r"^(?:src/)?transformers/(?:models/\w+/)?tokenization_\w+\.py$", "tokenizer"),
    (r"^transformers/|^src/transformers/", "transformers"),
    # vLLM's C++/CUDA sources (csrc/ in the sdist): a message or a frame naming one says which kernels failed
    # (`csrc/libtorch_stable/…`: the same trees built against torch's stable ABI, read as the trees they mirror)
    (r"^csrc/libtorch_stable/(custom_all_reduce|quickreduce|.*all_?reduce)", "parallel"),
    (r"^csrc/libtorch_stable/(attention|.*attn|flash|.*mla)", "attention"),
    (r"^csrc/libtorch_stable/(quantization|cutlass|.*marlin|.*gptq|.*awq|.*fp8|.*fp4)", "quantization"),
    (r"^csrc/(custom_all_reduce|quickreduce|.*all_?reduce)", "parallel"),
    (r"^csrc/(attention|.*attn|flash|.*mla)", "attention"),
    (r"^csrc/(quantization|cutlass|.*marlin|.*gptq|.*awq|.*fp8|.*fp4)", "quantization"),
    (r"^csrc/(cache|.*kv_?cache)", "kv-cache"),
    (r"^csrc/(cpu|rocm|xpu|hpu)/", "platform"),
    (r"^csrc/punica/", "lora"),  # the multi-LoRA (bgmv/sgmv) kernels
    (r"^csrc/", "models"),
    (r"^vllm/config/speculative", "spec-config"),
    (r"spec_decode/|proposer|speculator|^vllm/(?:\w+/)*(\w*eagle\w*|\w*dflash\w*|medusa|\w*mtp\w*|"
     r"mlp_speculator)\.py$|^vllm/transformers_utils/configs/(eagle|medusa|mlp_speculator|speculators)", "drafter"),
    (r"^vllm/(v1/)?structured_output/|guided_decoding/|^vllm/config/structured_outputs", "structured-output"),
    (r"^vllm/model_executor/layers/quantization/|^vllm/config/quantization|^vllm/model_executor/kernels/|"
     r"^vllm/model_executor/layers/(linear|fused_moe/.*quant)", "quantization"),
    (r"^vllm/(v1/)?attention/|^vllm/vllm_flash_attn/|^vllm/config/attention|^vllm/model_executor/layers/attention|"
     r"^vllm/model_executor/layers/(mla|flash_attn|radix_attention)", "attention"),
    (r"^vllm/compilation/|^vllm/config/compilation|cudagraph|cuda_graph", "compilation"),
    (r"^vllm/(v1/)?core/(kv_cache|block_pool|block/|block_manager|single_type_kv|evictor)|^vllm/config/cache|"
     r"^vllm/v1/kv_cache_interface|^vllm/v1/kv_offload/|^vllm/config/kv_offload", "kv-cache"),
    (r"^vllm/(v1/)?core/sched/|^vllm/core/scheduler|^vllm/config/scheduler", "scheduler"),
    # KV connectors move the KV cache between instances (disaggregated prefill, LMCache): the cache's part
    (r"^vllm/distributed/kv_transfer/|^vllm/config/kv_transfer", "kv-cache"),
    (r"^vllm/distributed/|^vllm/config/parallel|^vllm/(v1/)?executor/", "parallel"),
    (r"^vllm/lora/|^vllm/config/lora", "lora"),
    (r"^vllm/multimodal/|^vllm/config/multimodal", "multimodal"),
    (r"^vllm/(tokenizers?/|transformers_utils/tokenizer)", "tokenizer"),
    (r"^vllm/model_executor/model_loader/|^vllm/transformers_utils/|^vllm/config/(load|model)", "model-loading"),
    (r"^vllm/model_executor/models/|^vllm/model_executor/layers/", "models"),
    # the OpenAI server's output parsers (in folders of their own from 0.13.0 and 0.8.5): the server's part
    (r"^vllm/entrypoints/|^vllm/renderers/|^vllm/tool_parsers/|^vllm/reasoning/", "entrypoint"),
    (r"^vllm/engine/arg_utils\.py$|^vllm/envs\.py$", "config"),
    (r"^vllm/(v1/)?engine/", "engine"),
    (r"^vllm/(v1/)?worker/", "worker"),
    # the platforms' own kernels: ROCm's AITER and Intel's IPEX ops, called only on those platforms
    (r"^vllm/platforms/|^vllm/_(?:aiter|ipex|xpu|rocm)\w*_ops\.py$", "platform"),
    (r"^vllm/config/|^vllm/config\.py$|^vllm/envs\.py$|^vllm/engine/arg_utils\.py$", "config"),  # the rest
)
_PART_RES = tuple((re.compile(p), part) for p, part in PARTS)
# vllm/config.py's classes and the parts their files under vllm/config/ map to (the rules above)
_CONFIG_CLASS_PARTS = {"SpeculativeConfig": "spec-config", "CacheConfig": "kv-cache", "ParallelConfig": "parallel",
                       "SchedulerConfig": "scheduler", "LoRAConfig": "lora", "MultiModalConfig": "multimodal",
                       "CompilationConfig": "compilation", "DecodingConfig": "structured-output",
                       "StructuredOutputsConfig": "structured-output", "QuantizationConfig": "quantization"}
_CONFIG_CLASS_PART = re.compile(r"^(" + "|".join(_CONFIG_CLASS_PARTS) + r")\.")
_CONCERN_RE = re.compile(r"multimodal|(?:^|[._])mm_", re.IGNORECASE)


# Packages that serve one part of vLLM only (what vLLM imports each for): a missing one names that part. Not those
# that serve several (FlashInfer: attention, sampling, MoE, all-reduce; DeepGEMM: MoE and sparse attention's
# indexer; torch; transformers)
PACKAGE_PARTS: dict[str, str] = {
    "bitsandbytes": "quantization", "compressed_tensors": "quantization",
    "xformers": "attention", "flash_attn": "attention", "vllm_flash_attn": "attention",
    "xgrammar": "structured-output", "outlines": "structured-output", "llguidance": "structured-output",
    "lmformatenforcer": "structured-output", "ray": "parallel", "mistral_common": "tokenizer",
    "sentencepiece": "tokenizer", "tiktoken": "tokenizer", "tokenizers": "tokenizer",
}


def part_of_package(module: str) -> str | None:
    """The part of vLLM a package serves, by its top-level module (`bitsandbytes.functional` -> quantization)."""
    return PACKAGE_PARTS.get(module.split(".", 1)[0])


def part_of(path: str, function: str | None = None) -> str:
    rel = repo_path(path) or path
    part = next((p for rx, p in _PART_RES if rx.search(rel)), "other")
    if part == "config" and function and (cls := _CONFIG_CLASS_PART.match(function)):
        # the one-file config of older releases: a class's checks are the part its own file holds later
        return _CONFIG_CLASS_PARTS[cls.group(1)]
    # a shared module's function named for one concern (`_merge_multimodal_embeddings` in models/utils.py)
    if part in ("models", "other") and function and _CONCERN_RE.search(function):
        return "multimodal"
    # a model's own weight loading is model loading, wherever the model's file is
    if part == "models" and function and re.search(r"(?:^|\.)(?:load_weights|weight_loader|_load_\w+)$", function):
        return "model-loading"
    return part


_ROOTS = (("huggingface_hub/", "src/huggingface_hub/"), ("transformers/", "src/transformers/"), ("vllm/", "vllm/"))


def repo_path(path: str) -> str | None:
    """A file path as its repository writes it: `.../site-packages/vllm/x.py` -> `vllm/x.py`."""
    p = path.replace("\\", "/")
    # an egg install keeps the package one folder deeper: `site-packages/vllm-0.6.6….egg/vllm/x.py`
    installed = re.search(r"(?:site|dist)-packages/(?:[\w.+-]{1,200}\.egg/)?", p)
    if installed is not None:
        # the package is the folder right after site-packages: vLLM's own `models/transformers/` is vLLM's, and
        # another package that holds a `vllm/` folder (a plugin's integration code) is none of these
        rest = p[installed.end():]
        return next((repo_root + rest[len(root):] for root, repo_root in _ROOTS if rest.startswith(root)), None)
    if any(p.startswith(repo_root) for _, repo_root in _ROOTS):
        return p
    # a checkout: each package's innermost folder of its name, and of those the outermost package (a checkout of
    # vLLM holds `vllm/model_executor/models/transformers/`, a checkout of transformers `src/transformers/`)
    found = []
    for root, repo_root in _ROOTS:
        k = p.rfind("/" + root)
        if k >= 0 or p.startswith(root):
            found.append((k, repo_root, p[k + 1 + len(root):] if k >= 0 else p[len(root):]))
    if not found:
        return None
    _, repo_root, rest = min(found)
    if repo_root == "vllm/":
        # a `vllm/` folder inside another package's checkout that holds no file of vLLM's is a plugin's (the
        # owners' reading of the same path): no path of vLLM's package, so no site, part or history of vLLM's
        from bot.core.owners import of_path

        owner = of_path(path)
        if owner is not None and owner.name in ("plugin", "user-script"):
            return None  # (or a script of vLLM's repository run from a checkout: benchmarks/, examples/)
    return repo_root + rest


# the files of the platforms other than CUDA (vLLM's default): ROCm, XPU, TPU, CPU, Neuron, HPU
_OTHER_PLATFORM = re.compile(r"^vllm/platforms/(?:rocm|xpu|tpu|cpu|neuron|hpu)\.py$|rocm|_xpu|/xpu|_tpu|/tpu|/cpu/|"
                             r"_cpu\.py$")


def other_platform(path: str) -> bool:
    """Is the file one of a platform other than CUDA's (a copy of a sentence CUDA's file also has)?"""
    return _OTHER_PLATFORM.search(path) is not None
