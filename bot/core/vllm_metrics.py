"""The vLLM Prometheus series specops reads: each one's name, the older name a server may still export it
under, and its unit — and the one conversion into the unit the core judges in.

vLLM's own source is the authority: `vllm/v1/metrics/loggers.py` (scheduler, cache and token series) and
`vllm/v1/spec_decode/metrics.py` (speculative decoding), tabled at https://docs.vllm.ai/en/stable/usage/metrics/.
A counter is declared there without `_total`; prometheus_client appends it in the text and Prometheus keeps
it, so the names here carry it: they are what a scrape and a PromQL query both spell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Metric:
    name: str
    kind: Literal["gauge", "counter"]
    unit: Literal["requests", "ratio", "tokens", "drafts", "preemptions", "seconds"]
    legacy: tuple[str, ...] = ()  # older names of the same series, newest first
    labels: tuple[str, ...] = ()  # the labels specops reads besides model_name and engine

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.legacy)


REQUESTS_RUNNING = Metric("vllm:num_requests_running", "gauge", "requests")
REQUESTS_WAITING = Metric("vllm:num_requests_waiting", "gauge", "requests")
# "KV-cache usage. 1 means 100 percent usage." — a ratio despite the `_perc`; vLLM renamed it from the
# GPU-only name and exported both while the old one was deprecated
KV_CACHE_USAGE = Metric("vllm:kv_cache_usage_perc", "gauge", "ratio", legacy=("vllm:gpu_cache_usage_perc",))
GENERATION_TOKENS = Metric("vllm:generation_tokens_total", "counter", "tokens")
PROMPT_TOKENS = Metric("vllm:prompt_tokens_total", "counter", "tokens")
PREEMPTIONS = Metric("vllm:num_preemptions_total", "counter", "preemptions")
REQUESTS_FINISHED = Metric("vllm:request_success_total", "counter", "requests", labels=("finished_reason",))
SPEC_DRAFTS = Metric("vllm:spec_decode_num_drafts_total", "counter", "drafts")
SPEC_DRAFT_TOKENS = Metric("vllm:spec_decode_num_draft_tokens_total", "counter", "tokens")
SPEC_ACCEPTED_TOKENS = Metric("vllm:spec_decode_num_accepted_tokens_total", "counter", "tokens")
SPEC_ACCEPTED_PER_POSITION = Metric("vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "tokens",
                                    labels=("position",))

# When the server behind an address started: a window that spans a restart sums two servers' counters.
# prometheus_client exports the process's start (its ProcessCollector, on Linux) and, beside each counter, a
# `_created` gauge with the moment it began at 0 (unless PROMETHEUS_DISABLE_CREATED_SERIES is set).
PROCESS_START = Metric("process_start_time_seconds", "gauge", "seconds")
SPEC_DRAFTS_CREATED = Metric("vllm:spec_decode_num_drafts_created", "gauge", "seconds")


def value_of(values: Mapping[str, float], metric: Metric) -> float | None:
    """The metric's value under its name, else under an older one (a server from before the rename)."""
    for name in metric.names:
        if name in values:
            return values[name]
    return None


def in_core_unit(metric: Metric, value: float | None) -> float | None:
    """A series' value in the unit the core judges it in. A ratio becomes the percent the log lines print
    (vLLM writes `GPU KV cache usage: %.1f%%` of the same ratio x 100), so a scrape and a log line of the
    same moment give the same number; counts stay as they are."""
    if value is None or metric.unit != "ratio":
        return value
    return round(value * 100.0, 1)


def kv_percent(ratio: float | None) -> float | None:
    """`vllm:kv_cache_usage_perc` (a ratio) as the Engine line's percent."""
    return in_core_unit(KV_CACHE_USAGE, ratio)
