"""Loads known_issues.yaml: the facts behind the findings (upstream threads, releases, drafters)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bot.core.kb import KB, known_issues_data, load_kb
from bot.core.upstream import Upstream

KB_PATH = Path(__file__).with_name("known_issues.yaml")
# percent of the KV cache in use, with requests waiting: past it new requests queue for blocks and running ones
# get preempted. The watch's alert rule (config AlertRules.kv_saturated) is the same limit: a caller that reads
# the config passes its value in Thresholds.
KV_SATURATED = 95.0


class IssueFacts(BaseModel):
    model_config = ConfigDict(defer_build=True)

    # what a finding of this hypothesis claims, for machines: the part at fault, the inputs it names, the kinds of
    # remedy (findings.Advice) and the flags or variables its remediation turns
    part: str | None = None
    inputs: list[str] = Field(default_factory=list)
    advice: list[str] = Field(default_factory=list)
    knobs: list[str] = Field(default_factory=list)
    title: str
    summary: str = ""
    affected: dict[str, str] = Field(default_factory=dict)
    effect: str = ""  # what a deploy that meets it sees (acceptance, start), as its sources say
    upstream: list[Upstream] = Field(default_factory=list)
    remediation: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)


class MethodFacts(BaseModel):
    model_config = ConfigDict(defer_build=True)

    healthy_mean: float | None = None
    healthy_pos0: float | None = None
    healthy_range: str = ""


class ReferenceCurve(BaseModel):
    model_config = ConfigDict(defer_build=True)

    label: str
    source: str
    per_position: list[float]


class DrafterFacts(BaseModel):
    model_config = ConfigDict(defer_build=True)

    name: str
    match: str | None = None
    target: str | None = None
    style: str | None = None
    sliding: bool | None = None
    num_hidden_layers: int | None = None
    num_target_layers: int | None = None
    block_size: int | None = None
    sliding_window: int | None = None
    layer_types: list[str] | None = None
    target_layer_ids: list[int] | None = None

    def has_sliding(self) -> bool | None:
        if self.layer_types is not None:
            return "sliding_attention" in self.layer_types
        return self.sliding

    def matches(self, name: str) -> bool:
        if self.match:
            return re.search(self.match, name, re.IGNORECASE) is not None
        short = self.name.lower()
        cand = name.lower().rstrip("/")
        return cand == short or cand.endswith("/" + short.split("/")[-1]) or cand.endswith(short)


class KnowledgeBase(BaseModel):
    model_config = ConfigDict(defer_build=True)

    releases: dict[str, str]
    dflash_first_release: str
    method_first_release: dict[str, str] = Field(default_factory=dict)
    metrics_line_hints: dict[int, tuple[str, str]]
    methods: dict[str, MethodFacts]
    reference_curves: dict[str, ReferenceCurve]
    baselines: list[dict[str, Any]] = Field(default_factory=list)
    drafters: list[DrafterFacts]
    issues: dict[str, IssueFacts]

    def drafter(self, name: str | None) -> DrafterFacts | None:
        if not name:
            return None
        for d in self.drafters:
            if d.matches(name):
                return d
        return None

    def method(self, name: str | None) -> MethodFacts:
        return self.methods.get(normalize_method(name) or "", MethodFacts())


KNOWN_METHODS = frozenset({"dflash", "mtp", "eagle", "eagle3", "ngram", "draft_model", "medusa", "mlp_speculator",
                           "suffix", "dspark", "dflash2"})


def normalize_method(method: str | None) -> str | None:
    if not method:
        return None
    m = method.strip().lower().replace("-", "_")
    aliases = {"eagle_3": "eagle3", "draft": "draft_model", "ngram_gpu": "ngram", "deepseek_mtp": "mtp",
               "qwen3_next_mtp": "mtp", "qwen3_5_mtp": "mtp"}
    if m.endswith("_mtp"):
        return "mtp"
    return aliases.get(m, m)


@lru_cache(maxsize=4)
def load_knowledge(path: Path = KB_PATH) -> KnowledgeBase:
    """The package's own facts file, read once per process (the core's only read besides bot/core/knowledge/);
    from the knowledge base's compiled form when that is fresh."""
    if path == KB_PATH:
        return KnowledgeBase.model_validate(known_issues_data())
    import yaml

    with open(path, encoding="utf-8") as f:
        data = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return KnowledgeBase.model_validate(data)


@dataclass(frozen=True)
class Thresholds:
    """The limits a diagnosis judges by that a deployment may set for itself (the watch's alert rules)."""

    kv_saturated: float = KV_SATURATED  # percent of the KV cache in use, with requests waiting


@dataclass(frozen=True)
class Knowledge:
    """Everything a diagnosis knows beside the evidence: the triage facts (known_issues.yaml), the knowledge
    base's entries (core/knowledge/*.yaml) and the thresholds."""

    facts: KnowledgeBase
    base: KB
    thresholds: Thresholds = field(default_factory=Thresholds)


def default_knowledge(thresholds: Thresholds | None = None) -> Knowledge:
    """The package's own facts and entries (each read once per process)."""
    return Knowledge(facts=load_knowledge(), base=load_kb(), thresholds=thresholds or Thresholds())
