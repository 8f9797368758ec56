"""Prometheus samples -> snapshots and windows: the speculative-decoding and health series of one `/metrics` scrape,
summed over engines, and the interval between two scrapes as a SpecDecoding sample. The text itself is parsed
outside the core (`bot.app.prometheus.text`)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bot.core import vllm_metrics as M
from bot.core.parsed_log import SpecDecodeSample


@dataclass
class PromSnapshot:
    """The speculative-decoding and health series of one `/metrics` scrape, summed over engines."""

    num_drafts: float = 0.0
    num_draft_tokens: float = 0.0
    num_accepted_tokens: float = 0.0
    accepted_per_pos: dict[int, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    model_names: set[str] = field(default_factory=set)
    has_spec_decode: bool = False
    skipped: int = 0

    def as_sample(self) -> SpecDecodeSample | None:
        """Cumulative since the server started (one scrape)."""
        return window(PromSnapshot(), self, cumulative=True)


_GAUGES = frozenset(n for m in (M.REQUESTS_RUNNING, M.REQUESTS_WAITING, M.KV_CACHE_USAGE) for n in m.names)
_COUNTERS = frozenset(m.name for m in (M.GENERATION_TOKENS, M.PROMPT_TOKENS, M.PREEMPTIONS, M.REQUESTS_FINISHED))
_POSITION = M.SPEC_ACCEPTED_PER_POSITION.labels[0]

# one sample of a scrape: (name, labels, value), as a Prometheus text parser yields it
PromSample = tuple[str, Mapping[str, str], float]


def snapshot(samples: Iterable[PromSample], skipped: int = 0) -> PromSnapshot:
    """The series specops reads, summed over engines. The text itself is parsed outside the core
    (`bot.app.prometheus.text`, by prometheus_client's parser); `skipped` counts what it could not read."""
    snap = PromSnapshot(skipped=skipped)
    for name, labels, value in samples:
        if not name.startswith("vllm:"):
            continue
        if math.isnan(value):
            snap.skipped += 1
            continue
        if "model_name" in labels:
            snap.model_names.add(labels["model_name"])
        # names are matched exactly: `grep spec` also hits "respected" in help text
        if name == M.SPEC_DRAFTS.name:
            snap.num_drafts += value
            snap.has_spec_decode = True
        elif name == M.SPEC_DRAFT_TOKENS.name:
            snap.num_draft_tokens += value
            snap.has_spec_decode = True
        elif name == M.SPEC_ACCEPTED_TOKENS.name:
            snap.num_accepted_tokens += value
            snap.has_spec_decode = True
        elif name == M.SPEC_ACCEPTED_PER_POSITION.name:
            try:
                pos = int(labels.get(_POSITION, ""))
            except ValueError:
                snap.skipped += 1
                continue
            snap.accepted_per_pos[pos] = snap.accepted_per_pos.get(pos, 0.0) + value
            snap.has_spec_decode = True
        elif name in _GAUGES:
            snap.gauges[name] = snap.gauges.get(name, 0.0) + value
        elif name in _COUNTERS:
            snap.counters[name] = snap.counters.get(name, 0.0) + value
    return snap


def window(before: PromSnapshot, after: PromSnapshot, cumulative: bool = False) -> SpecDecodeSample | None:
    """The interval between two scrapes: mean = 1 + Δaccepted/Δdrafts, rate_i = Δper_pos_i/Δdrafts."""
    if not after.has_spec_decode:
        return None
    d_drafts = after.num_drafts - before.num_drafts
    d_tokens = after.num_draft_tokens - before.num_draft_tokens
    d_acc = after.num_accepted_tokens - before.num_accepted_tokens
    if d_drafts < 0 or d_tokens < 0 or d_acc < 0:
        return None  # a counter went down: the server restarted between the scrapes
    positions = sorted(after.accepted_per_pos)
    per_pos = [
        ((after.accepted_per_pos[p] - before.accepted_per_pos.get(p, 0.0)) / d_drafts) if d_drafts else math.nan
        for p in positions
    ]
    return SpecDecodeSample(
        form="prometheus",
        mean_acceptance_length=(1.0 + d_acc / d_drafts) if d_drafts else math.nan,
        accepted=round(d_acc),
        drafted=round(d_tokens),
        per_position=per_pos,
        avg_draft_acceptance_rate=(100.0 * d_acc / d_tokens) if d_tokens else math.nan,
        num_drafts=d_drafts,
        cumulative=cumulative,
    )


def split_scrapes(text: str) -> list[str]:
    """A file may hold several scrapes one after another; each starts again at the first family."""
    blocks: list[list[str]] = [[]]
    seen: set[str] = set()
    for line in text.splitlines():
        m = re.match(r"# (?:HELP|TYPE) (\S+)", line)
        if m and line.startswith("# TYPE"):
            if m[1] in seen:
                blocks.append([])
                seen = set()
            seen.add(m[1])
        blocks[-1].append(line)
    return ["\n".join(b) for b in blocks if any(x.strip() for x in b)]
