"""Where a line came from, as a finding names it: vLLM's parts in words, the library an exception's dotted class
names, the site reference of an atlas match, and the innermost frame of a traceback the atlas reads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.core.parsed_log import ProblemLine
from bot.core.triage.findings import SiteRef

if TYPE_CHECKING:
    from bot.core.atlas import Atlas, AtlasMatch, Site

PART_TITLES: dict[str, str] = {
    "drafter": "the drafter (speculative proposer)", "spec-config": "the speculative-decoding config",
    "parallel": "parallel / distributed setup", "attention": "an attention backend",
    "compilation": "compilation / CUDA graphs", "structured-output": "structured output",
    "model-loading": "model loading", "models": "a model implementation", "quantization": "quantization",
    "kv-cache": "the KV cache", "scheduler": "the scheduler", "entrypoint": "the API server (entrypoint)",
    "engine": "the engine", "worker": "the GPU worker", "platform": "the platform check", "lora": "LoRA",
    "multimodal": "multimodal input", "tokenizer": "the tokenizer", "config": "the engine config",
    "hub": "huggingface_hub (model download)", "transformers": "transformers (model/tokenizer config)",
    "other": "vLLM",
}
SPEC_PARTS = frozenset({"drafter", "spec-config"})
_MODULE_PARTS = (("huggingface_hub.", "hub"), ("transformers.", "transformers"))


def module_part(text: str) -> str | None:
    """The library an exception's dotted class names (`huggingface_hub.errors.GatedRepoError: …`)."""
    body = text.split("] ", 1)[-1].strip() if "] " in text else text.strip()
    for prefix, part in _MODULE_PARTS:
        if body.startswith(prefix) or f" {prefix}" in body[:80]:
            return part
    return None


def site_ref(m: AtlasMatch) -> SiteRef:
    site = m.site
    return SiteRef(package=site.package, file=site.file, function=site.function, line=m.line, release=m.release,
                   url=m.url, first=site.first, last=site.last, condition=site.condition, compare_url=m.compare_url)


def innermost(atlas: Atlas, frames: list[ProblemLine], version: str | None) -> tuple[ProblemLine, Site | None] | None:
    """The traceback's innermost frame inside vLLM (or a library the atlas reads): which part raised."""
    for frame in reversed(frames):
        path = frame.frame_file or ""
        if "vllm/" not in path and "huggingface_hub/" not in path and "transformers/" not in path:
            continue
        return frame, atlas.frame(path, frame.frame_function or "", version=version)
    return None
