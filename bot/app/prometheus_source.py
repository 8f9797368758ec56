"""Prometheus as a source of evidence: the spec-decode counters of an instance over a window, read
through the HTTP API (`/api/v1/query`), turned into the sample the core already judges.

The counters are cumulative and reset when a server restarts, so every number is an `increase()`
over the window (Prometheus handles the resets); a series that is absent means the server does not
speculate (or is not scraped), which the report says rather than guessing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from bot.app.promql import parse_since, selector_of
from bot.config import PrometheusSettings
from bot.core.logparse import PromSnapshot, SpecDecodeSample, window
from bot.core.vllm_metrics import (
    GENERATION_TOKENS,
    KV_CACHE_USAGE,
    REQUESTS_RUNNING,
    REQUESTS_WAITING,
    SPEC_ACCEPTED_PER_POSITION,
    SPEC_ACCEPTED_TOKENS,
    SPEC_DRAFT_TOKENS,
    SPEC_DRAFTS,
    Metric,
    kv_percent,
)
from bot.errors import InputError, OperationError

__all__ = ["InstanceWindow", "PrometheusError", "PrometheusSource", "parse_since", "selector_of", "shown_window"]


class PrometheusError(OperationError):
    """Prometheus could not be asked, or refused the question."""


def _join(*selectors: str) -> str:
    return "{" + ",".join(s for s in selectors if s) + "}"


@dataclass
class InstanceWindow:
    """What Prometheus knows of one instance over the window."""

    instance: str
    labels: dict[str, str]
    sample: SpecDecodeSample | None
    tokens_per_s: float | None = None
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None  # a ratio (0..1), as vLLM exports it
    up: bool | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def kv_percent(self) -> float | None:
        return kv_percent(self.kv_usage)


class PrometheusSource:
    def __init__(self, settings: PrometheusSettings, env: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        env = os.environ if env is None else env
        headers = dict(settings.headers)
        auth: tuple[str, str] | None = None
        token = env.get(settings.bearer_token_env or "") if settings.bearer_token_env else None
        if token:
            headers.setdefault("Authorization", f"Bearer {token}")
        if settings.basic_auth_env:
            pair = env.get(settings.basic_auth_env, "")
            if ":" not in pair:
                raise InputError(f"${settings.basic_auth_env} must hold user:password for Prometheus")
            user, _, password = pair.partition(":")
            auth = (user, password)
        self.url = settings.url.rstrip("/")
        try:
            self._client = httpx.Client(base_url=self.url, headers=headers, auth=auth, timeout=settings.timeout,
                                        trust_env=False)
        except httpx.InvalidURL:
            # httpx's message quotes the part it could not read, a piece of a password among them: not shown
            raise InputError("the Prometheus URL is not one httpx can read: percent-encode `/`, `@` and `:` in a "
                             "user or password (%2F, %40, %3A)") from None

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> PrometheusSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's vector: [{"metric": {...}, "value": [t, "v"]}, ...]."""
        params: dict[str, str] = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        try:
            resp = self._client.get("/api/v1/query", params=params)
        except httpx.TimeoutException:
            raise PrometheusError(f"Prometheus at {self.url} did not answer within "
                                  f"{self.settings.timeout:.0f} s") from None
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise PrometheusError(f"cannot reach Prometheus at {self.url}: {reason}") from None
        try:
            body = resp.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise PrometheusError(f"Prometheus at {self.url} answered HTTP {resp.status_code} without its JSON "
                                  "(is this the Prometheus URL?)")
        if body.get("status") != "success":
            kind = body.get("errorType") or f"HTTP {resp.status_code}"
            raise PrometheusError(f"Prometheus refused the query ({kind}): {body.get('error') or 'no reason given'}")
        data = body.get("data") or {}
        if data.get("resultType") != "vector":
            raise PrometheusError(f"Prometheus answered a {data.get('resultType')!r}, not an instant vector")
        result = data.get("result") or []
        return [r for r in result if isinstance(r, dict)]

    def _by_instance(self, promql: str, at: float | None, extra: str = "") -> dict[tuple[str, ...], float]:
        out: dict[tuple[str, ...], float] = {}
        for r in self.query(promql, at):
            metric = r.get("metric") or {}
            try:
                value = float(r["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            if math.isnan(value):
                continue
            key = (str(metric.get("instance", "")),) + ((str(metric.get(extra, "")),) if extra else ())
            out[key] = out.get(key, 0.0) + value
        return out

    def _gauge(self, how: str, metric: Metric, sel: str, at: float | None) -> dict[tuple[str, ...], float]:
        """A gauge by instance under its name, else under an older one (a server from before the rename)."""
        for name in metric.names:
            found = self._by_instance(f"{how} by (instance) ({name}{sel})", at)
            if found:
                return found
        return {}

    def instances(self, selector: str = "", at: float | None = None) -> dict[str, dict[str, str]]:
        """The vLLM instances Prometheus scrapes (every vLLM server exports vllm:num_requests_running),
        with their identifying labels."""
        sel = _join(self.settings.selector, selector)
        found: dict[str, dict[str, str]] = {}
        for r in self.query(f"{REQUESTS_RUNNING.name}{sel}", at):
            metric = {k: str(v) for k, v in (r.get("metric") or {}).items() if k != "__name__"}
            instance = metric.get("instance", "")
            labels = found.setdefault(instance, {})
            for k, v in metric.items():
                if k not in ("engine",):
                    labels.setdefault(k, v)
        return found

    def window(self, selector: str, seconds: float, at: float | None = None) -> dict[str, InstanceWindow]:
        """Each instance's spec-decode window, throughput and health over the last `seconds`."""
        sel = _join(self.settings.selector, selector)
        rng = f"[{int(seconds)}s]"
        labels = self.instances(selector, at)
        drafts = self._by_instance(f"sum by (instance) (increase({SPEC_DRAFTS.name}{sel}{rng}))", at)
        tokens = self._by_instance(f"sum by (instance) (increase({SPEC_DRAFT_TOKENS.name}{sel}{rng}))", at)
        accepted = self._by_instance(f"sum by (instance) (increase({SPEC_ACCEPTED_TOKENS.name}{sel}{rng}))", at)
        per_pos = self._by_instance(f"sum by (instance, position) (increase({SPEC_ACCEPTED_PER_POSITION.name}"
                                    f"{sel}{rng}))", at, extra="position")
        tps = self._by_instance(f"sum by (instance) (rate({GENERATION_TOKENS.name}{sel}{rng}))", at)
        running = self._gauge("sum", REQUESTS_RUNNING, sel, at)
        waiting = self._gauge("sum", REQUESTS_WAITING, sel, at)
        kv = self._gauge("avg", KV_CACHE_USAGE, sel, at)  # a ratio per engine: their mean is the server's
        up = self._by_instance(f"max by (instance) (up{sel})", at)  # Prometheus' own: did the scrape answer
        out: dict[str, InstanceWindow] = {}
        for instance in sorted(set(labels) | {k[0] for k in drafts}):
            key = (instance,)
            notes: list[str] = []
            sample: SpecDecodeSample | None = None
            if key in drafts:
                snap = PromSnapshot(num_drafts=drafts[key], num_draft_tokens=tokens.get(key, 0.0),
                                    num_accepted_tokens=accepted.get(key, 0.0), has_spec_decode=True)
                for (inst, pos), value in per_pos.items():
                    if inst == instance:
                        try:
                            snap.accepted_per_pos[int(pos)] = value
                        except ValueError:
                            continue
                sample = window(PromSnapshot(), snap)
                if sample is not None:  # increase() extrapolates each series alone: a rate may pass 1 a little
                    sample.per_position = [min(1.0, x) for x in sample.per_position]
                if sample is not None and not sample.num_drafts:
                    notes.append(f"no drafts in the last {_shown(seconds)} (no traffic?): nothing to judge "
                                 "acceptance on")
                    sample = None
            else:
                notes.append("no vllm:spec_decode_* series: this server does not speculate, or is not scraped "
                             "with them")
            up_value = up.get(key)
            out[instance] = InstanceWindow(
                instance=instance, labels=labels.get(instance, {"instance": instance}), sample=sample,
                tokens_per_s=tps.get(key), running=running.get(key), waiting=waiting.get(key),
                kv_usage=kv.get(key), up=None if up_value is None else up_value >= 1.0, notes=notes)
        return out


def _shown(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{int(seconds)} s"


def shown_window(seconds: float) -> str:
    return _shown(seconds)
