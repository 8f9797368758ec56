"""Prometheus as a source of evidence: the spec-decode counters of an instance over a window, read
through the HTTP API (`/api/v1/query`), turned into the sample the core already judges.

The counters are cumulative and reset when a server restarts, so a number is an `increase()` over the
window — of one server. When the window spans a restart on the same address (a tune, a rollback: another
vLLM process, maybe another method or k), `increase()` would sum both servers' counters, so the window is
clamped to the current server: its start (`_created` of the draft counter, else `process_start_time_seconds`)
and the restarts inside the window (`resets()` of the counter, `changes()` of both start times) are asked
first, and an instance whose current server started inside the window is judged on its counters' values now
— what they counted since they began at 0, which is exactly the current server's part of the window. Too
short a part (its counters cover under 10 s) is not judged at all rather than judged blended. A series that is
absent means the server does not speculate (or is not scraped), which the report says rather than guessing.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx

from bot.config import PrometheusSettings
from bot.core.parsed_log import SpecDecodeSample
from bot.core.prom_samples import PromSnapshot, window
from bot.core.vllm_metrics import (
    GENERATION_TOKENS,
    KV_CACHE_USAGE,
    PROCESS_START,
    REQUESTS_RUNNING,
    REQUESTS_WAITING,
    SPEC_ACCEPTED_PER_POSITION,
    SPEC_ACCEPTED_TOKENS,
    SPEC_DRAFT_TOKENS,
    SPEC_DRAFTS,
    SPEC_DRAFTS_CREATED,
    Metric,
    kv_percent,
)
from bot.errors import InputError, OperationError

__all__ = [
    "MAX_ANSWER_BYTES", "MAX_POSITIONS", "MAX_SERIES", "MIN_SPAN", "InstanceWindow", "PrometheusError",
    "PrometheusSource", "Series", "Span", "TooManySeries", "shown_window"
]

# One answer's bounds. A fleet of 10,000 vLLM servers is one a team runs (issue 23: read in under 5 s); past
# twice that, a selector is a typo (`{}` on a shared Prometheus), not a fleet: judging 50,000 windows took a
# minute and a gigabyte, so the answer is refused before any of it is judged, and its bytes are counted as they
# arrive, before any JSON is built.
MAX_SERIES = 20_000
# The per-position counter has a series per drafted position: k of them (a few; DFlash's block is 16).
MAX_POSITIONS = 32
MAX_ANSWER_BYTES = 32 * 2**20
# vLLM's counters and gauges are counts and ratios: past this an increase is a broken exporter, and summing
# values near float's limit overflows to inf, which no report or JSON can carry.
MAX_VALUE = 1e15
# The shortest part of a window the current server may be judged on after a restart: the shortest --since.
MIN_SPAN = 10.0


class PrometheusError(OperationError):
    """Prometheus could not be asked, or refused the question."""


class TooManySeries(PrometheusError):
    """The selector matches more series than one report judges: the user narrows it (exit 2, like bad input).
    A PrometheusError still, so the watch, which catches those, records it as a failed sample."""

    exit_code = 2


@dataclass(frozen=True)
class Series:
    """One series of an instant vector, checked: string labels, and the value Prometheus sent as text."""

    labels: dict[str, str]
    text: str

    @property
    def value(self) -> float | None:
        try:
            return float(self.text)
        except ValueError:
            return None

    def problem(self) -> str | None:
        """Why the value cannot be used, or None."""
        return _problem(self.text)[1]


def _short(value: object) -> str:
    """A field of an error answer, as text fit for one line: the answer is not ours to trust."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:199] + "…"


def _checked(raw: object) -> tuple[dict[str, str], str] | None:
    """A series as the API documents it, `{"metric": {name: str}, "value": [time, "number"]}`, as (labels, the
    value's text), else None. JSON gives exact types (a dict's keys are strings), so `type() is` checks them: this
    runs once per series of every answer, tens of thousands for a big fleet."""
    if type(raw) is not dict:
        return None
    metric, value = raw.get("metric", {}), raw.get("value")
    if type(metric) is not dict or type(value) is not list or len(value) != 2:
        return None
    text, at = value[1], value[0]
    if type(text) is not str or type(at) not in (float, int, str):
        return None
    for v in metric.values():
        if type(v) is not str:
            return None
    return metric, text


def _problem(text: str) -> tuple[float | None, str | None]:
    """A value's text as a number, or why it cannot be used (Series.problem's words)."""
    try:
        value = float(text)
    except ValueError:
        return None, f"{text[:40]!r} is not a number"
    if not math.isfinite(value) or abs(value) > MAX_VALUE:
        return None, f"{text[:40]} is not a usable value"
    if value < 0:
        return None, f"{text[:40]} is negative (a counter reset or an invalid series)"
    return value, None


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
    span: Span | None = None  # what part of the window the numbers cover (None: the whole of it)

    @property
    def kv_percent(self) -> float | None:
        return kv_percent(self.kv_usage)


@dataclass(frozen=True)
class Span:
    """The part of the window an instance is judged on, when it is not all of it: since the current server
    started (`seconds`, None when its start is not exported), with the restarts the window holds before it."""

    restarts: int
    seconds: float | None
    too_short: bool = False


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
        self.malformed: dict[str, int] = {}  # metric asked -> series of its answers not shaped as the API says
        self.problems: dict[str, list[str]] = {}  # instance -> values of it that were left out, and why
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

    def _answer(self, params: dict[str, str]) -> tuple[int, bytes]:
        """The status and body of one query, read as it streams: refused past MAX_ANSWER_BYTES (decoded bytes,
        so a gzip bomb is refused too) or once the whole answer takes longer than twice the timeout."""
        deadline = time.monotonic() + 2 * self.settings.timeout
        too_big = PrometheusError(f"Prometheus at {self.url} answered more than {MAX_ANSWER_BYTES // 2**20} MiB for "
                                  "one query: give a narrower selector (e.g. job=\"vllm\")")
        try:
            with self._client.stream("GET", "/api/v1/query", params=params) as resp:
                declared = resp.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
                    raise too_big
                chunks: list[bytes] = []
                size = 0
                for chunk in resp.iter_bytes():
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        raise too_big
                    if time.monotonic() > deadline:
                        raise httpx.ReadTimeout("the whole answer took too long")
                    chunks.append(chunk)
                return resp.status_code, b"".join(chunks)
        except httpx.TimeoutException:
            raise PrometheusError(f"Prometheus at {self.url} did not answer within "
                                  f"{self.settings.timeout:.0f} s") from None
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise PrometheusError(f"cannot reach Prometheus at {self.url}: {reason}") from None

    def query(self, promql: str, at: float | None = None) -> list[Series]:
        """An instant query's vector, each series checked; the malformed ones are counted in `self.malformed`
        (by the metric asked), and an answer of nothing but malformed series is an error."""
        return [Series(dict(labels), text) for labels, text in self._rows(promql, at)]

    def _rows(self, promql: str, at: float | None, per_instance: int = 1) -> list[tuple[dict[str, str], str]]:
        """`query` without a Series apiece: (labels, the value's text) as the answer holds them. `per_instance`:
        how many series one instance may have in this answer (one per position for the per-position counter)."""
        result = self._result(promql, at)
        if len(result) > MAX_SERIES * per_instance:
            raise TooManySeries(f"the query matches {len(result)} series, more than {MAX_SERIES * per_instance} one "
                                "report judges: give a narrower selector (e.g. job=\"vllm\" or instance=~\"10.0.1.*\")")
        checked = [c for c in map(_checked, result) if c is not None]
        if result and not checked:
            raise PrometheusError(f"Prometheus at {self.url} answered {len(result)} series, none of them "
                                  '{"metric": {...}, "value": [time, "number"]}')
        if len(checked) < len(result):
            name = promql.split("(")[-1].split("{")[0] or promql[:60]
            self.malformed[name] = self.malformed.get(name, 0) + len(result) - len(checked)
        return checked

    def _result(self, promql: str, at: float | None) -> list[object]:
        """The `result` list of an instant query's answer, its envelope checked."""
        params: dict[str, str] = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        status, raw = self._answer(params)
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            body = None
        del raw  # the bytes go before the series are checked: a big fleet's answer is megabytes
        if not isinstance(body, dict):
            raise PrometheusError(f"Prometheus at {self.url} answered HTTP {status} without its JSON "
                                  "(is this the Prometheus URL?)")
        if body.get("status") != "success":
            kind = _short(body.get("errorType") or f"HTTP {status}")
            reason = _short(body.get("error") or "no reason given")
            raise PrometheusError(f"Prometheus refused the query ({kind}): {reason}")
        data = body.get("data")
        if not isinstance(data, dict):
            raise PrometheusError(f"Prometheus at {self.url} answered without a `data` object (is this the "
                                  "Prometheus API?)")
        if data.get("resultType") != "vector":
            raise PrometheusError(f"Prometheus answered a {_short(data.get('resultType'))}, not an instant vector")
        result = data.get("result", [])
        if not isinstance(result, list):
            raise PrometheusError(f"Prometheus at {self.url} answered a `result` that is not a list of series")
        return result

    def _by_instance(self, promql: str, at: float | None, extra: str = "",
                     what: str = "", per_instance: int = 1) -> dict[tuple[str, ...], float]:
        """The values by instance (and `extra` label); a value that cannot be used leaves its instance out
        of the result and a note in `self.problems[instance]`, so no judgement rests on it."""
        out: dict[tuple[str, ...], float] = {}
        bad: set[str] = set()
        for labels, text in self._rows(promql, at, per_instance):
            instance = labels.get("instance", "")
            value, problem = _problem(text)
            if problem is not None:
                self.problems.setdefault(instance, []).append(
                    f"Prometheus gave {what or promql[:60]} = {problem}: not a usable value, left out")
                bad.add(instance)
                continue
            key = (instance, labels.get(extra, "")) if extra else (instance,)
            out[key] = out.get(key, 0.0) + (value or 0.0)
        return {k: v for k, v in out.items() if k[0] not in bad} if bad else out

    def _gauge(self, how: str, metric: Metric, sel: str, at: float | None) -> dict[tuple[str, ...], float]:
        """A gauge by instance under its name, else under an older one (a server from before the rename)."""
        for name in metric.names:
            found = self._by_instance(f"{how} by (instance) ({name}{sel})", at, what=name)
            if found:
                return found
        return {}

    def instances(self, selector: str = "", at: float | None = None) -> dict[str, dict[str, str]]:
        """The vLLM instances Prometheus scrapes (every vLLM server exports vllm:num_requests_running),
        with their identifying labels."""
        sel = _join(self.settings.selector, selector)
        found: dict[str, dict[str, str]] = {}
        for r in self.query(f"{REQUESTS_RUNNING.name}{sel}", at):
            metric = {k: v for k, v in r.labels.items() if k != "__name__"}
            instance = metric.get("instance", "")
            labels = found.setdefault(instance, {})
            for k, v in metric.items():
                if k not in ("engine",):
                    labels.setdefault(k, v)
        return found

    def window(self, selector: str, seconds: float, at: float | None = None) -> dict[str, InstanceWindow]:
        """Each instance's spec-decode window, throughput and health over the last `seconds` — of the server
        that runs there now (see the module's docstring)."""
        sel = _join(self.settings.selector, selector)
        rng = f"[{int(seconds)}s]"
        self.malformed, self.problems = {}, {}
        labels = self.instances(selector, at)
        spans = self._spans(sel, rng, seconds, at)

        def increase(metric: Metric, by: str = "instance", extra: str = "") -> dict[tuple[str, ...], float]:
            return self._by_instance(f"sum by ({by}) (increase({metric.name}{sel}{rng}))", at, extra=extra,
                                     what=f"the increase of {metric.name}", per_instance=MAX_POSITIONS if extra else 1)

        def since_start(metric: Metric, by: str = "instance", extra: str = "") -> dict[tuple[str, ...], float]:
            # a counter's value is what it counted since the server started (it began at 0 then)
            if not spans:
                return {}
            return self._by_instance(f"sum by ({by}) ({metric.name}{sel})", at, extra=extra,
                                     what=f"{metric.name} since the server started",
                                     per_instance=MAX_POSITIONS if extra else 1)

        def counts(metric: Metric, by: str = "instance", extra: str = "") -> dict[tuple[str, ...], float]:
            whole = increase(metric, by, extra)
            current = since_start(metric, by, extra)
            return {**{k: v for k, v in whole.items() if k[0] not in spans},
                    **{k: v for k, v in current.items() if k[0] in spans}}

        drafts = counts(SPEC_DRAFTS)
        tokens = counts(SPEC_DRAFT_TOKENS)
        accepted = counts(SPEC_ACCEPTED_TOKENS)
        counted = self._left_out()  # the instances whose acceptance counters cannot be trusted
        per_pos = counts(SPEC_ACCEPTED_PER_POSITION, "instance, position", "position")
        positions_out = self._left_out() - counted
        tps = self._by_instance(f"sum by (instance) (rate({GENERATION_TOKENS.name}{sel}{rng}))", at,
                                what=f"the rate of {GENERATION_TOKENS.name}")
        generated = since_start(GENERATION_TOKENS)
        for inst, span in spans.items():  # the current server's throughput, not both servers'
            value = generated.get((inst,))
            tps.pop((inst,), None)
            if value is not None and span.seconds:
                tps[(inst,)] = value / span.seconds
        running = self._gauge("sum", REQUESTS_RUNNING, sel, at)
        waiting = self._gauge("sum", REQUESTS_WAITING, sel, at)
        kv = self._gauge("avg", KV_CACHE_USAGE, sel, at)  # a ratio per engine: their mean is the server's
        up = self._by_instance(f"max by (instance) (up{sel})", at, what="up")  # did Prometheus' scrape answer
        by_position: dict[str, dict[int, float]] = {}
        for (inst, pos), value in per_pos.items():
            if pos.isdigit() and len(pos) < 4:  # vLLM's positions are 0..k-1 with k a few; a huge one is junk
                by_position.setdefault(inst, {})[int(pos)] = value
        shared = [f"Prometheus answered {n} malformed series of {name}: skipped"
                  for name, n in sorted(self.malformed.items())]
        out: dict[str, InstanceWindow] = {}
        for instance in sorted(set(labels) | {k[0] for k in drafts} | set(self.problems)):
            key = (instance,)
            notes: list[str] = list(self.problems.get(instance, [])) + shared
            current: Span | None = spans.get(instance)
            sample: SpecDecodeSample | None = None
            if instance in counted:
                notes.append("acceptance not judged: a spec-decode counter of this instance has no usable value")
            elif current is not None and current.too_short:
                notes.append(f"acceptance not judged: the current server's counters cover under {MIN_SPAN:.0f} s of "
                             "the window; the earlier server's counters are not this one's")
            elif key in drafts:
                snap = PromSnapshot(num_drafts=drafts[key], num_draft_tokens=tokens.get(key, 0.0),
                                    num_accepted_tokens=accepted.get(key, 0.0), has_spec_decode=True)
                if instance in positions_out:
                    notes.append("acceptance by position not judged: a per-position counter has no usable value")
                else:
                    snap.accepted_per_pos.update(by_position.get(instance, {}))
                sample = window(PromSnapshot(), snap)
                if sample is not None:  # increase() extrapolates each series alone: a rate may pass 1 a little
                    sample.per_position = [min(1.0, x) for x in sample.per_position]
                if sample is not None and not sample.num_drafts:
                    notes.append(f"no drafts in the last {_shown(seconds)} (no traffic?): nothing to judge "
                                 "acceptance on" if current is None else
                                 "no drafts since the current server started (no traffic?): nothing to judge "
                                 "acceptance on")
                    sample = None
            else:
                notes.append("no vllm:spec_decode_* series: this server does not speculate, or is not scraped "
                             "with them")
            up_value = up.get(key)
            out[instance] = InstanceWindow(
                instance=instance, labels=labels.get(instance, {"instance": instance}), sample=sample,
                tokens_per_s=tps.get(key), running=running.get(key), waiting=waiting.get(key),
                kv_usage=kv.get(key), up=None if up_value is None else up_value >= 1.0, notes=notes, span=current)
        return out

    def _signal(self, promql: str, at: float | None) -> dict[str, float]:
        """A restart signal by instance: only usable values (a broken one leaves the window as it is; the
        counters' own queries say what is wrong with them)."""
        out: dict[str, float] = {}
        for r in self.query(promql, at):
            if r.problem() is None and r.value is not None:
                instance = r.labels.get("instance", "")
                out[instance] = max(out.get(instance, r.value), r.value)
        return out

    def _spans(self, sel: str, rng: str, seconds: float, at: float | None) -> dict[str, Span]:
        """The instances whose window must be clamped to the current server: it started inside the window, or
        the window holds a restart; each with the span its counters cover (start to their last scrape)."""
        tag = 'label_replace({q}, "specops_signal", "{n}", "", "")'  # a label apiece: `or` keeps every signal
        restarts = self._signal("max by (instance) (" + " or ".join(tag.format(q=q, n=n) for n, q in (
            ("reset", f"resets({SPEC_DRAFTS.name}{sel}{rng})"),
            ("created", f"changes({SPEC_DRAFTS_CREATED.name}{sel}{rng})"),
            ("process", f"changes({PROCESS_START.name}{sel}{rng})"))) + ")", at)
        # the latest start of the two: the counters began at 0 at their `_created`, a little after the process
        started = "max by (instance) (" + " or ".join(tag.format(q=q, n=n) for n, q in (
            ("created", f"{SPEC_DRAFTS_CREATED.name}{sel}"), ("process", f"{PROCESS_START.name}{sel}"))) + ")"
        ages = self._signal(f"time() - {started}", at)
        spans: dict[str, Span] = {}
        for instance in set(restarts) | set(ages):
            n = int(restarts.get(instance, 0.0))
            age = ages.get(instance)
            inside = age is not None and 0 <= age < seconds
            if n > 0 or inside:
                spans[instance] = Span(n, age if inside else None)
        if not any(span.seconds is not None for span in spans.values()):
            return spans
        # the counters' values are those of their last scrape: the span they cover ends there, not now
        covered = self._signal(f"max by (instance) (timestamp({SPEC_DRAFTS.name}{sel})) - on (instance) {started}",
                               at)
        for instance, span in spans.items():
            if span.seconds is None:
                continue
            cover = covered.get(instance)
            cover = span.seconds if cover is None else max(0.0, min(cover, span.seconds))
            # after a restart, a few seconds of the new server are no evidence; a server that started inside
            # the window with nothing before it blends nothing, and is judged on whatever it counted
            spans[instance] = Span(span.restarts, cover, too_short=bool(span.restarts) and cover < MIN_SPAN)
        return spans

    def _left_out(self) -> set[str]:
        return set(self.problems)


def _shown(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{int(seconds)} s"


def shown_window(seconds: float) -> str:
    return _shown(seconds)
