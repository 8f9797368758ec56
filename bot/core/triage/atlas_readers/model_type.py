"""`The checkpoint you are trying to load has model type qwen3_moe but Transformers does not recognize this
architecture`: transformers' AutoConfig refusing a `model_type` its release has no config class for.

Two installs decide whether the model loads: the transformers release (the config class) and the vLLM release (the
model's implementation in its registry). The atlas holds vLLM's registry per release, so the release that first
implements the architecture is known; each vLLM release requires at least the transformers its models need, so
upgrading vLLM past that release answers both halves."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from packaging.version import Version

from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.atlas_readers.releases import public_release
from bot.core.triage.findings import Advice, Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas

_UNRECOGNIZED = re.compile(r"has model type [`'\"]?(?P<mt>[\w.-]{1,80})[`'\"]? but Transformers does not recognize "
                           r"this architecture")
# Hugging Face's class naming, which vLLM's registry keeps: <ModelType in CamelCase>For<Task>. Only the generating
# classes name the model's implementation (`Gemma3TextModel` or `GPT2ForSequenceClassification` are other heads)
_TASK = re.compile(r"^For(?:CausalLM|ConditionalGeneration)$")
AUTO_CONFIG_DOC = "https://huggingface.co/docs/transformers/model_doc/auto"
REGISTRY_TREE = "https://github.com/vllm-project/vllm/tree/v{release}/vllm/model_executor/models"


def unknown_model_type(atlas: Atlas, cand: Candidate, version: str | None) -> Finding | None:
    hit = _UNRECOGNIZED.search(cand.line.message)
    if hit is None:
        return None
    model_type = hit["mt"]
    key = re.sub(r"[_.-]", "", model_type).lower()
    # `qwen2_5_vl` is `Qwen2_5_VLForConditionalGeneration`: compared without the separators either name may carry
    archs = sorted(a for a in atlas.architectures() if (bare := a.replace("_", "")).lower().startswith(key)
                   and _TASK.match(bare[len(key):]))
    spans = [(a, span) for a in archs if (span := atlas.architecture_span(a)) is not None]
    if not spans:
        return None  # no vLLM release read implements it: the site's own reading stands
    arch, (first, _last) = min(spans, key=lambda s: Version(s[1][0]))
    # two generating classes first read in different releases: which one this checkpoint names is not known here
    sure = len({span[0] for _a, span in spans}) == 1
    rels = atlas.releases
    before = rels[rels.index(first) - 1] if first in rels and rels.index(first) > 0 else None
    # only a public release is placed among the releases (a dev build or an rc comes before its release), and a
    # release between the last read one without it and the first with it is not known either way
    public = version is not None and public_release(version)
    supported = sure and public and Version(str(version)) >= Version(first)
    predates = sure and public and before is not None and Version(str(version)) <= Version(before)
    advice: list[Advice] = [] if supported else ["upgrade"]
    since = f"{first}" + (f" (not in {before}; the releases between were not read)" if before else "")
    if supported:
        remediation = [f"Your vLLM ({version}) implements `{arch}`: the transformers install is likely behind — "
                       f"install one that knows `{model_type}` (`pip install -U transformers`, within what your vLLM "
                       "allows: `pip show vllm` lists its requirement), or, when vLLM ships its own config for the "
                       "model, check the checkpoint's `config.json`."]
    else:
        remediation = [f"Upgrade vLLM to {first} or later: `{arch}`, an implementation of `{model_type}`, is in its "
                       f"model registry from {since}, and each release requires at least the transformers its models "
                       "need." + (f" Your vLLM ({version}) predates it: a newer transformers alone will not load it."
                                  if predates else ""),
                       f"If your vLLM already implements `{arch}`, it is the transformers install that is behind: "
                       f"install one that knows `{model_type}`."]
    return Finding(
        id=f"unknown-model-type:{model_type}", title=f"transformers has no config for `{model_type}`; vLLM's registry "
                                                   f"has it in {first} and later",
        severity="critical", confidence="medium",
        summary=(f"transformers' AutoConfig has no config class for the checkpoint's `model_type` `{model_type}` in "
                 f"the installed release. vLLM's registry has `{arch}` from vLLM {since}: "
                 "the model needs both a vLLM that implements it and a transformers that knows its config."),
        evidence=[quoted(cand.line)], remediation=remediation,
        sources=[REGISTRY_TREE.format(release=first), AUTO_CONFIG_DOC], priority=36,
        part="models", owner="transformers", inputs=[model_type], advice=advice, deps=["transformers"])
