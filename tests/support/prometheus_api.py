"""A stand-in of Prometheus' HTTP query API (`GET /api/v1/query`) on 127.0.0.1 serving a fleet of N vLLM
instances, for the fleet's scale tests and bench/fleet.py: a real Prometheus would need N scraped servers.

It answers the queries `bot/app/prometheus/source.py` asks, recognised by their PromQL text, in Prometheus' real
response shape (`{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {labels},
"value": [time, "text"]}]}}`), with the values Prometheus would compute for a fleet whose instances are each of
one kind, by their index (see `KINDS`; the kind is what the counters say, the verdict is the triage's): healthy,
degraded (a mean acceptance of ~1.85 at k = 4), failing (DFlash's broken acceptance, 1.18), restarted (a server
that started 10 min ago after a restart: the window is clamped to it), down (up == 0), plain (no spec-decode
series: it does not speculate). Each answer is built once per query and kept as bytes, so the
stand-in costs the measured client nothing but the transfer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

NOW = 1_790_000_000.123
K = 4  # draft positions
# per-position acceptance rates by kind (position 0 first)
RATES: dict[str, tuple[float, ...]] = {
    "healthy": (0.82, 0.64, 0.47, 0.31),
    "degraded": (0.55, 0.25, 0.08, 0.02),
    "failing": (0.166, 0.017, 0.0, 0.0),
    "restarted": (0.80, 0.60, 0.44, 0.30),
    "down": (0.81, 0.62, 0.45, 0.30),
}
# one kind per index: most of a fleet is healthy
KINDS: tuple[str, ...] = ("healthy",) * 14 + ("degraded", "failing", "restarted", "down", "plain", "healthy")


def kind_of(i: int) -> str:
    return KINDS[(i * 7) % len(KINDS)]


@dataclass(frozen=True)
class Instance:
    index: int
    address: str
    kind: str

    @property
    def speculates(self) -> bool:
        return self.kind != "plain"

    def drafts(self) -> float:
        return 1000.0 + 37 * (self.index % 101)  # in the window (or since the restart)

    def per_pos(self) -> list[float]:
        wobble = 1 - (self.index % 13) / 200  # each instance a little different, so worst first means something
        return [round(self.drafts() * r * wobble, 1) for r in RATES[self.kind]]


FIRST_PORT = 10000  # instance i is 127.0.0.1:10000+i (up to 55,535 of them)


def fleet_of(n: int) -> list[Instance]:
    return [Instance(i, f"127.0.0.1:{FIRST_PORT + i}", kind_of(i)) for i in range(n)]  # labels only: never dialled


def _text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _series(labels: dict[str, str], v: float) -> dict[str, Any]:
    return {"metric": labels, "value": [NOW, _text(v)]}


def _by(fleet: list[Instance], value: Callable[[Instance], float | None]) -> list[dict[str, Any]]:
    out = []
    for inst in fleet:
        v = value(inst)
        if v is not None:
            out.append(_series({"instance": inst.address}, v))
    return out


def _counter(inst: Instance, name: str, since_start: bool) -> float | None:
    """A spec-decode counter's increase over the window (or, `since_start`, its value now: what a restarted
    server counted since it began)."""
    if not inst.speculates:
        return None
    if since_start and inst.kind != "restarted":
        return inst.drafts() * 40  # a server up for days: its counters hold far more than the window
    drafts = inst.drafts()
    return {"drafts": drafts, "draft_tokens": drafts * K, "accepted": sum(inst.per_pos())}[name]


def answer(fleet: list[Instance], q: str) -> list[dict[str, Any]]:
    """The vector Prometheus would answer `q` with."""
    if q.startswith("vllm:num_requests_running{"):
        return [_series({"__name__": "vllm:num_requests_running", "engine": "0", "instance": i.address,
                         "job": "vllm", "model_name": "Qwen/Qwen3.6-27B"}, 2 + i.index % 3) for i in fleet]
    if "resets(" in q:
        return _by(fleet, lambda i: 1.0 if i.kind == "restarted" else 0.0)
    if q.startswith("time() - "):
        return _by(fleet, lambda i: 600.0 if i.kind == "restarted" else 5 * 86400.0)
    if "timestamp(" in q:
        return _by(fleet, lambda i: 598.0 if i.kind == "restarted" else 5 * 86400.0 - 2)
    since_start = "increase(" not in q and "rate(" not in q
    if "per_pos_total" in q:
        out = []
        for inst in fleet:
            if inst.speculates and (inst.kind == "restarted" or not since_start):
                out += [_series({"instance": inst.address, "position": str(p)}, v)
                        for p, v in enumerate(inst.per_pos())]
        return out
    for word, metric in (("draft_tokens", "num_draft_tokens_total"), ("accepted", "num_accepted_tokens_total"),
                         ("drafts", "num_drafts_total")):
        if metric in q:
            return _by(fleet, lambda i, w=word: _counter(i, w, since_start))  # type: ignore[misc]
    if "generation_tokens_total" in q:
        return _by(fleet, lambda i: 5400.0 * 3 if since_start else 30.0 + i.index % 17)
    if "num_requests_running" in q:
        return _by(fleet, lambda i: 2.0 + i.index % 3)
    if "num_requests_waiting" in q:
        return _by(fleet, lambda i: float(i.index % 2))
    if "kv_cache_usage_perc" in q:
        return _by(fleet, lambda i: 0.25 + (i.index % 50) / 100)
    if "(up{" in q:
        return _by(fleet, lambda i: 0.0 if i.kind == "down" else 1.0)
    return []


class PrometheusAPI:
    """The stand-in, serving `fleet_of(n)` from construction until `close()` (or the end of a `with` block:
    `with PrometheusAPI(n) as api:`); `asked` lists the queries in order."""

    def __init__(self, n: int) -> None:
        self.fleet = fleet_of(n)
        self.asked: list[str] = []
        self._bodies: dict[str, bytes] = {}
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                query = parse_qs(urlparse(self.path).query).get("query", [""])[0]
                data = owner.body(query)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def body(self, query: str) -> bytes:
        with self._lock:
            self.asked.append(query)
            if query not in self._bodies:
                result = answer(self.fleet, query)
                self._bodies[query] = json.dumps({"status": "success", "data": {"resultType": "vector",
                                                                                "result": result}}).encode()
            return self._bodies[query]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> PrometheusAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
