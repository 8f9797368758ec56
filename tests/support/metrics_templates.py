"""vLLM's metrics-line templates per release range (knowledge/atlas/metrics_templates.json, built with the atlas by
tools/atlas/) — the SpecDecoding/Speculative metrics line and the engine's throughput line as each release's source
formats them. Tests render a real line of each release with them for the parser; the product reads none."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

METRICS = "metrics_templates.json"


@dataclass(frozen=True)
class MetricsPart:
    text: str
    args: tuple[str, ...]
    optional: bool
    condition: str | None


@dataclass(frozen=True)
class MetricsTemplate:
    kind: str  # "v1-spec" | "v0-spec" | "engine"
    first: str
    last: str
    template: str  # a %-format: `template % tuple(values)` renders the line (parts always present)
    args: tuple[str, ...]  # the source expressions that fill it, in order
    file: str
    releases: tuple[str, ...]
    source_style: str  # "percent" | "fstring" | "percent-parts"
    joiner: str | None
    prefix: str | None
    parts: tuple[MetricsPart, ...]  # when the line is joined from a list: every part, optional ones too


@lru_cache(maxsize=1)
def metrics_templates_data() -> tuple[MetricsTemplate, ...]:
    data = json.loads((resources.files("bot.core") / "knowledge" / "atlas" / METRICS).read_bytes())
    return tuple(MetricsTemplate(
        kind=t["kind"], first=t["first"], last=t["last"], template=t["template"], args=tuple(t["args"]),
        file=t["file"], releases=tuple(t["releases"]), source_style=t["source_style"], joiner=t.get("joiner"),
        prefix=t.get("prefix"),
        parts=tuple(MetricsPart(p["text"], tuple(p["args"]), bool(p["optional"]), p.get("condition"))
                    for p in t.get("parts") or ()))
        for t in data["templates"])


def metrics_templates() -> list[MetricsTemplate]:
    """The metrics-line templates (SpecDecoding/Speculative metrics, the engine throughput line) per release range."""
    return list(metrics_templates_data())
