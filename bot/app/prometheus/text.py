"""Prometheus text exposition read by prometheus_client's own parser, handed to the core as samples.

The core judges counters and never imports prometheus_client; this is the one place the text is
read. A scrape that parses whole costs one pass; one with a broken line is read line by line so the
rest still counts and the broken lines are counted, not silently dropped.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.parser import text_string_to_metric_families

from bot.core.prom_samples import PromSample, PromSnapshot, snapshot


def _samples(text: str) -> Iterator[PromSample]:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            yield s.name, s.labels, float(s.value)


def parse_prometheus(text: str) -> PromSnapshot:
    """The speculative-decoding and health series of one scrape; unreadable lines are counted."""
    try:
        return snapshot(list(_samples(text)))
    except ValueError:
        pass
    samples: list[PromSample] = []
    skipped = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # HELP/TYPE lines only name families; the samples carry their full names
        try:
            samples.extend(_samples(line + "\n"))
        except ValueError:
            skipped += 1
    return snapshot(samples, skipped=skipped)


def first_unreadable(text: str) -> str | None:
    """None when the text holds at least one Prometheus sample; else its first non-comment line (what to show
    of a file that is not a scrape at all), or "" when it is empty."""
    lines = [raw.strip() for raw in text.splitlines()]
    body = [line for line in lines if line and not line.startswith("#")]
    for line in body:
        try:
            if any(True for _ in _samples(line + "\n")):
                return None
        except ValueError:
            continue
    return body[0] if body else ""
