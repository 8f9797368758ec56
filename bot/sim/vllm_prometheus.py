"""/metrics in prometheus_client's text exposition format, and vLLM's request latency histograms by release."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.sim.vllm_settings import Version


def go_float(value: float) -> str:
    """prometheus_client's number format (Go's: exponent from 1e7 up)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _labels(labels: Mapping[str, str]) -> str:
    def escape(v: str) -> str:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return ",".join(f'{k}="{escape(v)}"' for k, v in sorted(labels.items()))


def metric_family(name: str, kind: str, help_text: str, samples: Sequence[tuple[Mapping[str, str], float]],
                  created: float) -> list[str]:
    """One family as prometheus_client prints it: counters get `_total` and a `_created` gauge."""
    full = f"{name}_total" if kind == "counter" else name
    out = [f"# HELP {full} {help_text}", f"# TYPE {full} {kind}"]
    out += [f"{full}{{{_labels(labels)}}} {go_float(value)}" for labels, value in samples]
    if kind == "counter":
        out += [f"# HELP {name}_created {help_text}", f"# TYPE {name}_created gauge"]
        out += [f"{name}_created{{{_labels(labels)}}} {go_float(created)}" for labels, _ in samples]
    return out


# vLLM's request latency histograms (v1/metrics/loggers.py): which release exports which name, from the atlas's
# metric names per release — inter-token latency took over from time_per_output_token (both in 0.10.2–0.14.1),
# and the per-request time per output token came in 0.11
LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


@dataclass
class Histogram:
    counts: list[float] = field(default_factory=lambda: [0.0] * len(LATENCY_BUCKETS))
    total: float = 0.0
    n: float = 0.0

    def observe(self, value: float, times: int = 1) -> None:
        for i, le in enumerate(LATENCY_BUCKETS):
            if value <= le:
                self.counts[i] += times
        self.total += value * times
        self.n += times

    def lines(self, name: str, help_text: str, labels: Mapping[str, str], created: float) -> list[str]:
        out = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        for le, count in zip((*map(go_float, LATENCY_BUCKETS), "+Inf"), (*self.counts, self.n), strict=True):
            out.append(f"{name}_bucket{{{_labels({**labels, 'le': le})}}} {go_float(count)}")
        out += [f"{name}_count{{{_labels(labels)}}} {go_float(self.n)}",
                f"{name}_sum{{{_labels(labels)}}} {go_float(self.total)}",
                f"# HELP {name}_created {help_text}", f"# TYPE {name}_created gauge",
                f"{name}_created{{{_labels(labels)}}} {go_float(created)}"]
        return out


def latency_names(v: Version) -> dict[str, str]:
    """What each simulated latency is exported as in release `v`: kind -> name."""
    names = {"ttft": "vllm:time_to_first_token_seconds"}
    if v >= (0, 10, 2):
        names["itl"] = "vllm:inter_token_latency_seconds"
    if v < (0, 15, 0):
        names["itl_old"] = "vllm:time_per_output_token_seconds"
    if v >= (0, 11, 0):
        names["tpot"] = "vllm:request_time_per_output_token_seconds"
    return names
