"""The probe workload and its measurement, one copy for every use case that measures a deployment: `tune`
(each setting of a sweep) and `rollout` (a host before and after its change, gated on the difference).

It holds the workload (`Workload` of `Prompt`s: the shipped bot/app/tuning/tune_prompts.yaml, or a file of the same
shape, read by `load_prompts`), the driver (`soak`: through one SSH forward and one HTTP client, a warm-up,
then rounds of completions at each concurrency until the soak time has passed; `measure` is one round) and
`serving_before` (the profile specops has serving on a host now: what a measurement "before" measures and a
restore puts back).

What one concurrency level yields is a `Measurement` (bot/core/results/tune.py): generation tok/s = generated
tokens / wall time, the mean acceptance and per-position curve from /metrics counter deltas, and the median
time to first token of streamed requests (at the lowest concurrency only: under load it measures the queue).
A request that fails (a non-200 answer, a dropped connection, an answer without usage) raises SpecopsError:
a measurement is whole or it is a failure, never a partial number passed off as a result. A rollout soaks with
`count_errors`: a request the server answers with an error is counted (`Measurement.errors`, which its gate
reads) and the soak goes on; a dropped connection still fails the measurement, and so does a round in which
every request failed.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bot.app.prometheus.text import parse_prometheus
from bot.config import Config
from bot.core.parsed_log import SpecDecodeSample
from bot.core.prom_samples import PromSnapshot, window
from bot.core.results.tune import Measurement
from bot.engine.hosts import HostPool, HostSession
from bot.engine.steps import process_matches
from bot.errors import InputError, SpecopsError
from bot.store.facade import Store

__all__ = ["PROMPTS_FILE", "REQUEST_TIMEOUT", "TTFT_REQUESTS", "Prompt", "Workload", "load_prompts", "measure",
           "serving_before", "soak"]

PROMPTS_FILE = Path(__file__).with_name("tune_prompts.yaml")
REQUEST_TIMEOUT = 300.0
TTFT_REQUESTS = 2  # streamed requests per round at the lowest concurrency


# --- the workload -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Prompt:
    id: str
    kind: str
    text: str


@dataclass(frozen=True)
class Workload:
    prompts: tuple[Prompt, ...]
    max_tokens: int | None
    source: str


def _read_yaml(file: Path) -> Any:
    try:
        return yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read --prompts {file}: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"--prompts {file} is not valid YAML: {str(exc).splitlines()[0]}") from None


def _prompt(file: Path, i: int, item: Any) -> Prompt:
    if isinstance(item, str):
        item = {"text": item}
    if not isinstance(item, dict) or not isinstance(item.get("text"), str) or not item["text"].strip():
        raise InputError(f"--prompts {file}: prompt {i} has no text")
    return Prompt(str(item.get("id") or f"prompt-{i}"), str(item.get("kind") or "chat"), item["text"])


def _max_tokens(file: Path, data: Any) -> int | None:
    max_tokens = data.get("max_tokens") if isinstance(data, dict) else None
    if max_tokens is None:
        return None
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= 4096:
        raise InputError(f"--prompts {file}: max_tokens must be a whole number from 1 to 4096")
    return max_tokens


def load_prompts(path: Path | None = None) -> Workload:
    """The probe workload: the shipped prompt set, or a file of the same shape. Raises InputError."""
    file = path or PROMPTS_FILE
    shown = str(path) if path else "the shipped prompt set (bot/app/tuning/tune_prompts.yaml)"
    data = _read_yaml(file)
    items = data.get("prompts") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise InputError(f"--prompts {file}: expected `prompts:` with a list of prompts")
    prompts = tuple(_prompt(file, i, item) for i, item in enumerate(items, 1))
    return Workload(prompts, _max_tokens(file, data), shown)


# --- requests -----------------------------------------------------------------------------------

def _scrape(http: Any) -> PromSnapshot:
    resp = http.get("/metrics")
    if resp.status_code != 200:
        raise SpecopsError(f"/metrics answered {resp.status_code}: {resp.text[:200]}")
    return parse_prometheus(resp.text)


def _body(model: str, prompt: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            **extra}


def _complete(http: Any, model: str, prompt: str, max_tokens: int) -> int:
    resp = http.post("/v1/completions", json=_body(model, prompt, max_tokens))
    if resp.status_code != 200:
        raise SpecopsError(f"completion answered {resp.status_code}: {resp.text[:200]}")
    try:
        return int(resp.json()["usage"]["completion_tokens"])
    except (ValueError, KeyError, TypeError):
        raise SpecopsError("completion answer has no usage") from None


def _chunk_text(data: str) -> str | None:
    try:
        choice = json.loads(data)["choices"][0]
        return str(choice.get("text") or (choice.get("delta") or {}).get("content") or "") or None
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None


def _ttft(http: Any, model: str, prompt: str, max_tokens: int) -> float | None:
    """Seconds from sending a streamed request to its first chunk with text (None: no chunk had text)."""
    t0 = time.monotonic()
    first: float | None = None
    with http.stream("POST", "/v1/completions", json=_body(model, prompt, max_tokens, stream=True)) as resp:
        if resp.status_code != 200:
            raise SpecopsError(f"streamed completion answered {resp.status_code}")
        for line in resp.iter_lines():
            if first is not None or not line.startswith("data:"):
                continue  # read to the end: the request is whole, not abandoned mid-stream
            data = line[5:].strip()
            if data == "[DONE]":
                break
            if _chunk_text(data):
                first = time.monotonic() - t0
    return first


class _Errors:
    """The answered errors of a soak that counts them (`count_errors`); without it the first one raises."""

    def __init__(self, counting: bool) -> None:
        self.counting = counting
        self.count = 0
        self.first = ""
        self._lock = threading.Lock()

    def add(self, exc: SpecopsError) -> None:
        if not self.counting:
            raise exc
        with self._lock:
            self.count += 1
            self.first = self.first or str(exc)


def _batch(http: Any, model: str, prompts: Sequence[str], max_tokens: int, concurrency: int, n: int,
           errors: _Errors) -> list[int]:
    """The completion tokens of `n` requests, `concurrency` at a time (one: in order, no pool); a request
    answered with an error is left out (counted in `errors`, or raised)."""
    def one(i: int) -> int | None:
        try:
            return _complete(http, model, prompts[i % len(prompts)], max_tokens)
        except SpecopsError as exc:
            errors.add(exc)
            return None

    if concurrency == 1:
        done = [one(i) for i in range(n)]
    else:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            done = list(pool.map(one, range(n)))
    return [t for t in done if t is not None]


def _ttfts(http: Any, model: str, prompts: Sequence[str], max_tokens: int, n: int, errors: _Errors) -> list[float]:
    out = []
    for i in range(min(TTFT_REQUESTS, n)):
        try:
            t = _ttft(http, model, prompts[i % len(prompts)], max_tokens)
        except SpecopsError as exc:
            errors.add(exc)
            continue
        if t is not None:
            out.append(t)
    return out


# --- measuring ----------------------------------------------------------------------------------

def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None or x != x else round(x, digits)


def _pooled(windows: Sequence[SpecDecodeSample], at: int | None) -> float | None:
    """The drafts-weighted mean over the rounds' windows of the mean acceptance (`at` None) or of position
    `at`'s rate: Σ(value·drafts)/Σdrafts, which is exactly what one /metrics window over this level's requests
    alone would read. One window spanning every round cannot be taken: the rounds interleave the levels, so it
    would count the other concurrencies' drafts too; a requests-weighted mean would weigh a round by its
    requests where the ratio is per draft."""
    parts = [(w.mean_acceptance_length - 1.0 if at is None else w.per_position[at], w.num_drafts or 0.0)
             for w in windows if at is None or at < len(w.per_position)]
    drafts = sum(d for _, d in parts)
    if not drafts:
        return None
    pooled = sum(v * d for v, d in parts if d) / drafts
    return pooled + 1.0 if at is None else pooled


@dataclass
class _Level:
    """What the rounds at one concurrency measured so far."""

    concurrency: int
    requests: int = 0
    tokens: int = 0
    seconds: float = 0.0
    windows: list[SpecDecodeSample] = field(default_factory=list)  # one per round (none: no speculation)
    ttfts: list[float] = field(default_factory=list)
    errors: _Errors = field(default_factory=lambda: _Errors(False))

    def run(self, http: Any, model: str, prompts: Sequence[str], max_tokens: int, n: int, ttft: bool) -> None:
        """One round: `n` completions at this concurrency between two scrapes, then the streamed ones."""
        before = _scrape(http)
        t0 = time.monotonic()
        done = _batch(http, model, prompts, max_tokens, self.concurrency, n, self.errors)
        wall = time.monotonic() - t0
        if not done:  # nothing was served at all: no number to give, whatever is counted
            raise SpecopsError(f"every request of a round at concurrency {self.concurrency} failed: "
                               f"{self.errors.first}")
        w = window(before, _scrape(http))  # None: no speculation, or the counters went down (a restart)
        self.requests += len(done)
        self.tokens += sum(done)
        self.seconds += wall
        if w is not None:
            self.windows.append(w)
        if ttft:
            self.ttfts += _ttfts(http, model, prompts, max_tokens, n, self.errors)

    def measurement(self) -> Measurement:
        positions = max((len(w.per_position) for w in self.windows), default=0)
        return Measurement(
            concurrency=self.concurrency, requests=self.requests, tokens=self.tokens, seconds=round(self.seconds, 3),
            tokens_per_s=round(self.tokens / self.seconds, 2) if self.seconds > 0 else None,
            mean_acceptance_length=_round(_pooled(self.windows, None)),
            per_position=tuple(_round(_pooled(self.windows, i)) for i in range(positions)),
            ttft_s=_round(statistics.median(self.ttfts), 4) if self.ttfts else None, errors=self.errors.count)


def soak(session: HostSession, port: int, model: str, workload: Workload, max_tokens: int,
         concurrency: Sequence[int], requests: int, cancel: threading.Event, seconds: float,
         count_errors: bool = False) -> list[Measurement]:
    """Drive the workload in rounds until at least `seconds` have passed since the warm-up (at least one round):
    each round runs `max(requests, c)` completions at each concurrency c, all through one forward and one
    client. One Measurement per concurrency, aggregated over its rounds (tokens and seconds summed, the
    acceptance pooled over the rounds' windows, the median of every round's TTFT). A set `cancel` stops between
    two batches and what was measured so far is returned. Raises SpecopsError when a request fails (with
    `count_errors`: when the connection drops, or every request of a round failed; answered errors are counted
    in each level's `errors`)."""
    import httpx

    prompts = [p.text for p in workload.prompts]
    levels = {c: _Level(c, errors=_Errors(count_errors)) for c in concurrency}
    low = min(concurrency)
    limits = httpx.Limits(max_connections=max(concurrency) + 4, max_keepalive_connections=max(concurrency) + 4)
    beat: _Heartbeat | None = None
    try:
        with session.forward(port) as fwd, httpx.Client(base_url=fwd.url, timeout=REQUEST_TIMEOUT,
                                                        limits=limits) as http:
            beat = _Heartbeat(session, fwd).start()
            try:
                _complete(http, model, prompts[0], min(16, max_tokens))  # warm-up: the first request compiles
                started = time.monotonic()
                while not cancel.is_set():
                    for c, level in levels.items():
                        if cancel.is_set():
                            break
                        level.run(http, model, prompts, max_tokens, max(requests, c), c == low)
                    if time.monotonic() - started >= seconds:
                        break
            finally:
                beat.stop()
    except (httpx.HTTPError, SpecopsError) as exc:  # the connection dropped, timed out, or the answer was cut off
        if beat is not None and beat.lost:
            raise SpecopsError(f"the host stopped answering during the measurement: {beat.lost}") from None
        if isinstance(exc, SpecopsError):
            raise
        raise SpecopsError(f"request to {model} failed: {type(exc).__name__}: {str(exc)[:200]}") from None
    return [level.measurement() for level in levels.values() if level.requests]


HEARTBEAT_EVERY = 5.0  # s between two checks that the host still answers over SSH
HEARTBEAT_TIMEOUT = 10.0  # s a check may take: a host that does not answer by then is gone


class _Heartbeat:
    """While a measurement runs: `true` over SSH every few seconds. A host gone from the network answers neither
    that nor the forwarded requests, which would each wait REQUEST_TIMEOUT; when the check fails, the forward is
    closed so they fail at once, and `lost` says why."""

    def __init__(self, session: HostSession, fwd: Any) -> None:
        self.session = session
        self.fwd = fwd
        self.lost = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="specops-measure-beat", daemon=True)

    def start(self) -> _Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=HEARTBEAT_TIMEOUT + 5)

    def _run(self) -> None:
        while not self._stop.wait(HEARTBEAT_EVERY):
            try:
                self.session.run(["true"], timeout=HEARTBEAT_TIMEOUT)
            except SpecopsError as exc:
                self.lost = str(exc)
                self.fwd.close()
                return


def measure(session: HostSession, port: int, model: str, workload: Workload, max_tokens: int,
            concurrency: Sequence[int], requests: int, cancel: threading.Event) -> list[Measurement]:
    """One round of the workload: `soak` for no time."""
    return soak(session, port, model, workload, max_tokens, concurrency, requests, cancel, seconds=0.0)


# --- what serves now ----------------------------------------------------------------------------

def serving_before(config: Config, host: str, store: Store, hosts: HostPool) -> str | None:
    """The profile specops has serving on the host now: the store's latest deployment, if it is serving there
    (the host's meta file names it and its PID is that server)."""
    dep = store.deployments.latest(host)
    if dep is None or dep.status != "serving" or dep.profile not in config.profiles:
        return None
    files = hosts.layout(host)
    with hosts.session(host) as session:
        raw = session.read_file(files.meta_file)
        try:
            meta = json.loads(raw) if raw else {}
        except ValueError:
            meta = {}
        pid = meta.get("pid") if isinstance(meta, dict) else None
        if not isinstance(pid, int) or meta.get("profile") != dep.profile:
            return None
        ours, _, _ = process_matches(session, pid, files.config_file)
    return dep.profile if ours else None
