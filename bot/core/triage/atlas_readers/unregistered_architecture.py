"""`Model architectures ['Qwen2ForCausalLMBiased'] are not supported for now`: the checkpoint's `architectures` names
a class vLLM's model registry does not hold. When no vLLM release the atlas reads registers that name at all, it is
an out-of-tree model — the user's or a plugin's code, or a checkpoint's remote code — not a model a later release
adds: it has to be registered where the engine runs. vLLM builds the model in its own engine process (the API
server's, and V1's engine core), so a `ModelRegistry.register_model` call in a launch script does not reach it; a vLLM
plugin (the `vllm.general_plugins` entry point) is loaded in every process."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.atlas_readers.releases import newer
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# vLLM's words (vllm/model_executor/models/registry.py `_raise_for_unsupported`, 0.6.3 on; model_loader.py before)
_UNSUPPORTED = re.compile(r"\bModel architectures \[(?P<names>'[A-Za-z_]\w{0,120}'(?:, ?'[A-Za-z_]\w{0,120}'){0,7})\] "
                          r"are not supported for now")
# a drafter's class names itself so (EagleLlamaForCausalLM, DFlash2DraftModel, MLPSpeculatorPreTrainedModel)
_DRAFTER_WORDS = re.compile(r"Eagle|Draft|DFlash|Medusa|Speculator|MTP", re.IGNORECASE)
PLUGINS_DOC = "https://docs.vllm.ai/en/latest/design/plugin_system.html"
REGISTRY_SOURCE = "https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/model_executor/models/registry.py"


# the Transformers fallback's refusal (vllm/model_executor/model_loader/utils.py `resolve_transformers_fallback`)
_GENERATING = re.compile(r"For(?:CausalLM|ConditionalGeneration)")
_NO_IMPLEMENTATION = re.compile(r"\b(?P<name>[A-Z]\w{1,120}) has no vLLM implementation\b")


def unregistered_architecture(st: State) -> None:
    line = next((p for p in [*st.ev.parsed.problems, *st.ev.parsed.loose] if p.kind != "frame"
                 and _UNSUPPORTED.search(p.origin.text or p.message)), None)
    if _backbone_class(st) or line is None:
        return  # (a backbone's name: the checkpoint's entry, not an out-of-tree model)
    from bot.core.atlas import load_atlas

    hit = _UNSUPPORTED.search(line.origin.text or line.message)
    assert hit is not None
    names = re.findall(r"'([^']+)'", hit["names"])
    atlas = load_atlas()
    foreign = [n for n in names if atlas.architecture_span(n) is None and not _DRAFTER_WORDS.search(n)]
    if not foreign:
        return  # a class some release registers (a release too old for it), or a drafter's: other findings say
    name = foreign[0]
    version = st.ev.context.vllm_version
    # a vLLM newer than the newest release read may register it: then "no release registers it" is not known
    beyond = bool(version and atlas.releases and newer(version, atlas.releases[-1]))
    st.findings.append(Finding(
        id=f"architecture-out-of-tree:{name}", severity="critical", confidence="low" if beyond else "medium",
        title=f"`{name}` is an out-of-tree model: no vLLM release registers it, so it must be registered where the "
              "engine runs",
        summary=(f"vLLM's model registry does not hold `{name}`, the class the checkpoint's config.json names, and no "
                 "vLLM release read registers a class of that name: it is not a model a later release adds, but "
                 "custom model code (yours, a framework's, or the checkpoint's own remote code). vLLM builds the "
                 "model in its engine process, which a registration made in the launching script does not reach."),
        evidence=[quoted(line)],
        remediation=[f"Register `{name}` in a vLLM plugin (a package with a `vllm.general_plugins` entry point that "
                     "calls `ModelRegistry.register_model`): vLLM loads plugins in every process it starts "
                     f"({PLUGINS_DOC}). A `register_model` call in the launch script only reaches that process.",
                     "If the class is the checkpoint's own remote code, `--trust-remote-code` with "
                     "`--model-impl transformers` runs it through the Transformers backend; if the name is a typo or "
                     "a renamed class, fix `architectures` in the checkpoint's config.json."],
        sources=[PLUGINS_DOC, REGISTRY_SOURCE], priority=35, part="models", inputs=["architectures"],
        advice=["fix-script"], knobs=["--trust-remote-code", "--model-impl"], at=position(line.origin),
        level=line.origin.level or "EXCEPTION"))


def _backbone_class(st: State) -> bool:
    """`Qwen2VLModel` refused while the registry holds `Qwen2VLForConditionalGeneration`: the checkpoint's config.json
    names the bare backbone class (saved from the model without its head — by `AutoModel`, a merge or export tool),
    not a class vLLM serves. The architectures entry is the fix; the model itself is supported."""
    from bot.core.atlas import load_atlas

    atlas = load_atlas()
    version = st.ev.context.vllm_version
    for line in [p for p in [*st.ev.parsed.problems, *st.ev.parsed.loose] if p.kind != "frame"][:60]:
        text = line.origin.text or line.message
        named = [m["name"] for m in _NO_IMPLEMENTATION.finditer(text)]
        hit = _UNSUPPORTED.search(text)
        named += re.findall(r"'([^']+)'", hit["names"]) if hit else []
        for name in named:
            if not name.endswith("Model") or atlas.architecture_span(name) is not None or _DRAFTER_WORDS.search(name):
                continue
            stem = name.removesuffix("Model")
            # the heads that generate (a classification head is another model's use of the same backbone)
            heads = sorted(a for a in atlas.architectures(version) if _GENERATING.fullmatch(a.removeprefix(stem)))
            if not heads:
                continue
            st.findings.append(Finding(
                id=f"architecture-backbone:{name}", severity="critical",
                confidence="medium" if len(heads) == 1 else "low",
                title=f"`{name}` is the model without its head: vLLM serves `{heads[0]}`",
                summary=(f"The checkpoint's config.json names `{name}` in `architectures`, the bare backbone class, "
                         "which no vLLM release registers; vLLM registers the same model with its head as "
                         + ", ".join(f"`{h}`" for h in heads[:3]) + ". A checkpoint saved from the model without its "
                         "head (by `AutoModel`, or a merge or export tool) writes the backbone's name."),
                evidence=[quoted(line)],
                remediation=[f"Set `architectures` in the checkpoint's config.json to `[\"{heads[0]}\"]` (or pass "
                             f"`--hf-overrides '{{\"architectures\": [\"{heads[0]}\"]}}'`)"
                             + (f" — or `{heads[1]}`, whichever the base model's own config.json names —"
                                if len(heads) > 1 else "")
                             + ", after checking the checkpoint holds the head's weights too (the save or merge step "
                             "decides)."],
                sources=[REGISTRY_SOURCE], priority=34, part="models", inputs=["architectures", "checkpoint"],
                advice=["checkpoint"], knobs=["--hf-overrides"], at=position(line.origin),
                level=line.origin.level or "EXCEPTION"))
            return True
    return False
