"""The simulated engine: the counters behind the Engine and SpecDecoding stats lines and /metrics, and the
requests it runs, each paced to the step cost of its method and batch, its drafts accepted by the model.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bot.sim.vllm_acceptance import conditional, load_factor, step_cost
from bot.sim.vllm_log import Log
from bot.sim.vllm_prometheus import Histogram, latency_names, metric_family
from bot.sim.vllm_serve_args import ServeArgs, SpecConfig
from bot.sim.vllm_settings import Control, Settings, Version, read_control

KV_CAPACITY_TOKENS = 65536  # only scales the KV-usage gauge
PACE_SLICE_SECONDS = 0.1


def spec_metrics_line(v: Version) -> int:
    """[file:line] of the SpecDecoding line by release; the ops tool reads it as a version hint."""
    if v >= (0, 24, 0):
        return 120
    if v >= (0, 19, 0):
        return 101
    return 100 if v >= (0, 12, 0) else 96


def engine_stats_line(v: Version) -> int:
    if v >= (0, 24, 0):
        return 273
    if v >= (0, 20, 0):
        return 271
    return 259 if v >= (0, 12, 0) else 127


@dataclass
class Counters:
    k: int
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: list[int] = field(default_factory=list)
    prompt_tokens: int = 0
    generation_tokens: int = 0

    def __post_init__(self) -> None:
        if not self.per_position:
            self.per_position = [0] * self.k

    def add_step(self, accepted: int) -> None:
        """One decode step: with speculation, one draft of k tokens whose first `accepted` matched."""
        if self.k:
            self.drafts += 1
            self.draft_tokens += self.k
            self.accepted += accepted
            for i in range(accepted):
                self.per_position[i] += 1
        self.generation_tokens += 1 + accepted


def engine_message(c: Counters, elapsed: float, running: int, kv_usage: float) -> str:
    # vLLM's format, field for field: "%.1f tokens/s", "%d reqs", "%.1f%%"
    return (
        f"Engine 000: Avg prompt throughput: {c.prompt_tokens / elapsed:.1f} tokens/s, "
        f"Avg generation throughput: {c.generation_tokens / elapsed:.1f} tokens/s, "
        f"Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: {kv_usage * 100:.1f}%, "
        f"Prefix cache hit rate: {0.0:.1f}%"
    )


def spec_message(c: Counters, elapsed: float) -> str:
    """vLLM's SpecDecodingLogging.log, computed from integer counts so its identities hold exactly."""
    drafts = c.draft_tokens // c.k
    mean = 1 + c.accepted / drafts
    rates = ", ".join(f"{n / drafts:.3f}" for n in c.per_position)
    draft_rate = c.accepted / c.draft_tokens * 100 if c.draft_tokens else math.nan  # prints "nan%" as vLLM's
    return (
        f"SpecDecoding metrics: Mean acceptance length: {mean:.2f}, "
        f"Accepted throughput: {c.accepted / elapsed:.2f} tokens/s, "
        f"Drafted throughput: {c.draft_tokens / elapsed:.2f} tokens/s, "
        f"Accepted: {c.accepted} tokens, Drafted: {c.draft_tokens} tokens, "
        f"Per-position acceptance rate: {rates}, Avg Draft acceptance rate: {draft_rate:.1f}%"
    )


class Engine:
    """The counters behind the stats lines and /metrics, under one lock so the two always agree:
    each /metrics counter is the sum of the logged intervals plus the one not yet logged."""

    def __init__(self, rates: Sequence[float], seed: int, version: Version) -> None:
        self.rates = list(rates)
        self.k = len(self.rates)
        self.version = version
        self._rng = random.Random(seed)
        self._carry: list[float] = []
        self._lock = threading.Lock()
        self.total = Counters(self.k)
        self.interval = Counters(self.k)
        self.running = 0
        self.running_tokens = 0
        self.finished = 0
        self.latency = {"ttft": Histogram(), "itl": Histogram(), "tpot": Histogram()}
        self.created = time.time()
        now = time.monotonic()
        self._engine_mark = now  # vLLM's Engine line spans the last interval ...
        self._spec_mark = now  # ... its SpecDecoding line the time since the previous one, idle included

    def plan(self, max_tokens: int, scale: float) -> list[int]:
        """Accepted draft tokens per decode step until max_tokens are out (a step emits 1 + accepted)."""
        chances = conditional([r * scale for r in self.rates])
        steps: list[int] = []
        left = max_tokens
        with self._lock:  # one generator for the whole run: reproducible from the seed
            while left > 0:
                accepted = min(self._draw(chances), left - 1)  # the request stops at max_tokens
                steps.append(accepted)
                left -= 1 + accepted
        return steps

    def _draw(self, chances: Sequence[float]) -> int:
        # Error diffusion instead of coin flips: each position accepts its conditional chance's share of the
        # drafts that reach it, within one draft, so a 64-token probe already shows the configured curve.
        # The seed only sets where each accumulator starts.
        if len(self._carry) != len(chances):
            self._carry = [self._rng.random() for _ in chances]
        accepted = 0
        for i, chance in enumerate(chances):
            self._carry[i] += chance
            if self._carry[i] < 1.0:
                break
            self._carry[i] -= 1.0
            accepted += 1
        return accepted

    def begin(self, prompt_tokens: int, max_tokens: int) -> int:
        """A request starts; returns how many run now, this one included (the batch it joins)."""
        with self._lock:
            self.running += 1
            self.running_tokens += prompt_tokens + max_tokens
            self.total.prompt_tokens += prompt_tokens
            self.interval.prompt_tokens += prompt_tokens
            return self.running

    def commit(self, steps: Sequence[int]) -> None:
        with self._lock:
            for accepted in steps:
                self.total.add_step(accepted)
                self.interval.add_step(accepted)

    def end(self, prompt_tokens: int, max_tokens: int, seconds: float | None = None,
            first: float | None = None) -> None:
        with self._lock:
            self.running -= 1
            self.running_tokens -= prompt_tokens + max_tokens
            self.finished += 1
            if seconds is not None and first is not None:
                self.latency["ttft"].observe(first)
                if max_tokens > 1:
                    per_token = max(seconds - first, 0.0) / (max_tokens - 1)
                    self.latency["itl"].observe(per_token, max_tokens - 1)
                    self.latency["tpot"].observe(per_token)

    def _kv_usage(self) -> float:
        return min(1.0, self.running_tokens / KV_CAPACITY_TOKENS)

    def tick(self) -> list[tuple[str, str]]:
        """The (file:line, message) pairs vLLM logs at INFO for the interval just ended."""
        with self._lock:
            now = time.monotonic()
            done, self.interval = self.interval, Counters(self.k)
            elapsed = max(now - self._engine_mark, 1e-9)
            self._engine_mark = now
            if not (done.generation_tokens or done.prompt_tokens):
                return []  # an idle vLLM logs both lines at DEBUG: nothing at INFO
            lines = [(f"loggers.py:{engine_stats_line(self.version)}",
                      engine_message(done, elapsed, self.running, self._kv_usage()))]
            if self.k and done.drafts:
                spec_elapsed = max(now - self._spec_mark, 1e-9)
                self._spec_mark = now
                lines.append((f"metrics.py:{spec_metrics_line(self.version)}", spec_message(done, spec_elapsed)))
            return lines

    def metrics(self, model_name: str) -> str:
        base = {"engine": "0", "model_name": model_name}
        created = self.created
        with self._lock:
            t = self.total
            out: list[str] = []
            if self.k:
                out += metric_family("vllm:spec_decode_num_drafts", "counter", "Number of spec decoding drafts.",
                                     [(base, t.drafts)], created)
                out += metric_family("vllm:spec_decode_num_draft_tokens", "counter", "Number of draft tokens.",
                                     [(base, t.draft_tokens)], created)
                out += metric_family("vllm:spec_decode_num_accepted_tokens", "counter", "Number of accepted tokens.",
                                     [(base, t.accepted)], created)
                out += metric_family(
                    "vllm:spec_decode_num_accepted_tokens_per_pos", "counter", "Accepted tokens per draft position.",
                    [({**base, "position": str(i)}, n) for i, n in enumerate(t.per_position)], created)
            out += metric_family("vllm:num_requests_running", "gauge",
                                 "Number of requests in model execution batches.", [(base, self.running)], created)
            out += metric_family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
                                 [(base, 0)], created)
            out += metric_family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
                                 [(base, self._kv_usage())], created)
            out += metric_family("vllm:prompt_tokens", "counter", "Number of prefill tokens processed.",
                                 [(base, t.prompt_tokens)], created)
            out += metric_family("vllm:generation_tokens", "counter", "Number of generation tokens processed.",
                                 [(base, t.generation_tokens)], created)
            finished = {"stop": 0, "length": self.finished, "abort": 0}  # every sim request runs to max_tokens
            out += metric_family("vllm:request_success", "counter", "Count of successfully processed requests.",
                                 [({**base, "finished_reason": r}, n) for r, n in finished.items()], created)
            for kind, name in latency_names(self.version).items():
                out += self.latency[kind.removesuffix("_old")].lines(name, f"Histogram of {kind} in seconds.", base,
                                                                     created)
        return "\n".join(out) + "\n"


class App:
    """What the request handlers share: settings, the engine, and the ready/stop switches."""

    def __init__(self, args: ServeArgs, settings: Settings, spec: SpecConfig | None, engine: Engine,
                 log: Log) -> None:
        self.args = args
        self.settings = settings
        self.spec = spec
        self.engine = engine
        self.log = log
        self.ready = threading.Event()
        self.stop = threading.Event()
        cost = step_cost(spec.method, spec.num_tokens) if spec else 1.0
        self.step_seconds = cost / settings.base_tps

    def control(self) -> Control:
        return read_control(self.settings.control_path)

    def generate(self, prompt_tokens: int, max_tokens: int, on_tokens: Callable[[int], None] | None = None) -> None:
        """Run one request to max_tokens; `on_tokens(n)` hears of each batch of tokens as it is emitted."""
        steps = self.engine.plan(max_tokens, self.control().acceptance_scale)
        running = self.engine.begin(prompt_tokens, max_tokens)
        step = self.step_seconds * load_factor(self.spec.num_tokens if self.spec else 0, running)
        duration = min(len(steps) * step, self.settings.max_request_seconds)
        started = time.monotonic()
        try:
            self._pace(steps, duration, on_tokens)
        finally:
            # a stream's first token lands after one step (_pace): what the latency histograms observe
            self.engine.end(prompt_tokens, max_tokens, time.monotonic() - started,
                            duration / len(steps) if steps else None)

    def _pace(self, steps: Sequence[int], duration: float, on_tokens: Callable[[int], None] | None = None) -> None:
        """Spread the steps over `duration`: a few sleeps, not one per token, committing the steps due
        so far, so a long request shows in the interval lines and /metrics while it runs. The first step
        lands after one step's time (a stream's first token)."""
        start = time.monotonic()
        done = 0
        first = duration / len(steps) if steps else 0.0
        while done < len(steps):
            elapsed = time.monotonic() - start
            finished = self.stop.is_set() or elapsed >= duration
            due = len(steps) if finished else max(int(len(steps) * elapsed / duration), 1 if elapsed >= first else 0)
            if due > done:
                batch = steps[done:due]
                self.engine.commit(batch)
                done = due
                if on_tokens is not None:
                    on_tokens(sum(1 + a for a in batch))
            if done < len(steps):
                wait = min(PACE_SLICE_SECONDS, max(0.0, duration - elapsed))
                if done == 0:
                    wait = min(wait, max(0.0, first - elapsed))
                self.stop.wait(wait)
