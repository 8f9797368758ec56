"""Fleet values a Prometheus must not be trusted with: non-finite or huge numbers, wrongly shaped answers,
negative counters, and answers too large to read. A real HTTP server on 127.0.0.1 stands in for Prometheus
and answers crafted JSON, each test choosing what it says; the CLI runs as a user would run it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from bot.app.fleet import diagnose_instance, fleet
from bot.app.prometheus.source import PrometheusError
from bot.config import PrometheusSettings
from bot.errors import SpecopsError

ROOT = Path(__file__).resolve().parents[2]
INSTANCE = "127.0.0.1:9"

Answer = Callable[[str], Any]  # the PromQL asked -> a JSON-able body, or bytes sent as they are


def vector(result: Any) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def series(value: str, instance: str = INSTANCE, **labels: str) -> dict[str, Any]:
    return {"metric": {"instance": instance, **labels}, "value": [1700000000.0, value]}


def healthy(query: str, **override: str) -> Any:
    """A speculating instance with a good acceptance (mean 3); `override` replaces one counter's value,
    keyed by a word of its name (drafts, draft_tokens, accepted, per_pos, up, …)."""
    values = {"per_pos": "60", "draft_tokens": "300", "accepted": "200", "drafts": "100", "generation": "50",
              "running": "2", "waiting": "0", "kv": "0.5", "up": "1"}
    values.update(override)
    if "per_pos" in query:
        return vector([series(values["per_pos"], position=str(i)) for i in range(3)])
    for word, metric in (("draft_tokens", "num_draft_tokens"), ("accepted", "num_accepted_tokens"),
                         ("drafts", "num_drafts"), ("generation", "generation_tokens"),
                         ("running", "num_requests_running"), ("waiting", "num_requests_waiting"),
                         ("kv", "kv_cache_usage"), ("up", "(up")):
        if metric in query:
            return vector([series(values[word])])
    return vector([])


class FakePrometheus:
    def __init__(self) -> None:
        self.answer: Answer = healthy
        self.asked: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlparse(self.path).query).get("query", [""])[0]
                owner.asked.append(query)
                body = owner.answer(query)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading: what a size cap does

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    p = FakePrometheus()
    try:
        yield p
    finally:
        p.close()


def cli(prom: FakePrometheus, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", "fleet", "--prometheus", prom.url, "--since", "60s", *args],
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)})


def test_the_healthy_answer_is_judged_healthy(prom: FakePrometheus) -> None:
    report = fleet(None, PrometheusSettings(url=prom.url), "", 60)
    assert [line.verdict for line in report.lines] == ["healthy"]
    assert report.lines[0].metrics.mean_acceptance_length == 3.0


@pytest.mark.parametrize("bad", ["+Inf", "-Inf", "NaN", "1e308", "1e309"])
@pytest.mark.parametrize("counter", ["drafts", "accepted", "draft_tokens", "per_pos", "generation", "kv", "up"])
def test_a_non_finite_or_huge_value_is_skipped_with_a_note(prom: FakePrometheus, tmp_path: Path, bad: str,
                                                           counter: str) -> None:
    prom.answer = lambda q: healthy(q, **{counter: bad})
    report = fleet(None, PrometheusSettings(url=prom.url), "", 60)
    (line,) = report.lines
    json.dumps(report.as_json(), allow_nan=False)  # every number in the JSON contract is finite
    if counter in ("drafts", "accepted", "draft_tokens", "per_pos"):
        assert line.verdict != "failing", line.report.headline
        assert any("not a usable value" in n for n in line.report.notes), line.report.notes


def test_a_non_finite_value_through_the_cli_is_not_an_internal_error(prom: FakePrometheus, tmp_path: Path) -> None:
    prom.answer = lambda q: healthy(q, drafts="+Inf", accepted="1e308")
    p = cli(prom, tmp_path, "--format", "json")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    data = json.loads(p.stdout)
    assert data["instances"][0]["verdict"] != "failing"


SHAPES: dict[str, Any] = {
    "data a list": {"status": "success", "data": [1, 2]},
    "data a string": {"status": "success", "data": "vector"},
    "result a dict": {"status": "success", "data": {"resultType": "vector", "result": {"a": 1}}},
    "result a string": {"status": "success", "data": {"resultType": "vector", "result": "x"}},
    "metric a list": vector([{"metric": ["instance"], "value": [1, "1"]}]),
    "metric a string": vector([{"metric": "instance", "value": [1, "1"]}]),
    "label a number": vector([{"metric": {"instance": 5}, "value": [1, "1"]}]),
    "value a number": vector([{"metric": {"instance": INSTANCE}, "value": 5}]),
    "value one item": vector([{"metric": {"instance": INSTANCE}, "value": ["5"]}]),
    "value a dict": vector([{"metric": {"instance": INSTANCE}, "value": {"v": "5"}}]),
    "value not a string": vector([{"metric": {"instance": INSTANCE}, "value": [1, [5]]}]),
    "value text": vector([{"metric": {"instance": INSTANCE}, "value": [1, "many"]}]),
    "series a string": vector(["instance"]),
    "status error": {"status": "error", "errorType": "execution", "error": "query timed out"},
    "status missing": {"data": {"resultType": "vector", "result": []}},
    "error a dict": {"status": "error", "errorType": {"a": 1}, "error": ["x"]},
    "a list": [1, 2, 3],
    "not JSON": b"<html>hello</html>",
    "a matrix": {"status": "success", "data": {"resultType": "matrix", "result": []}},
}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("where", ["instances", "drafts", "everywhere"])
def test_a_wrongly_shaped_answer_is_a_clear_error_or_a_skipped_series(prom: FakePrometheus, shape: str,
                                                                     where: str) -> None:
    wrong = SHAPES[shape]

    def answer(q: str) -> Any:
        if where == "everywhere" or (where == "instances" and q.startswith("vllm:num_requests_running")) or \
                (where == "drafts" and "num_drafts" in q):
            return wrong
        return healthy(q)

    prom.answer = answer
    try:
        report = fleet(None, PrometheusSettings(url=prom.url), "", 60)
    except PrometheusError as exc:
        assert str(exc).startswith("Prometheus") and len(str(exc)) < 300, exc
        assert "Traceback" not in str(exc)
        return
    json.dumps(report.as_json(), allow_nan=False)


def test_a_wrongly_shaped_answer_through_the_cli_exits_1_with_one_line(prom: FakePrometheus, tmp_path: Path) -> None:
    prom.answer = lambda q: SHAPES["data a list"]
    p = cli(prom, tmp_path)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    assert "Prometheus" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    prom.answer = lambda q: vector(["instance"]) if "num_drafts" in q else healthy(q)
    p = cli(prom, tmp_path)
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr


@pytest.mark.parametrize("counter", ["drafts", "accepted", "draft_tokens", "per_pos"])
def test_a_negative_counter_increase_is_a_reset_or_invalid_not_failing(prom: FakePrometheus, counter: str) -> None:
    prom.answer = lambda q: healthy(q, **{counter: "-50"})
    report = fleet(None, PrometheusSettings(url=prom.url), "", 60)
    (line,) = report.lines
    assert line.verdict != "failing", line.report.headline
    assert any("negative" in n and "counter reset" in n for n in line.report.notes), line.report.notes


def test_the_instances_per_query_are_capped_with_a_clear_error(prom: FakePrometheus, tmp_path: Path) -> None:
    # a fleet of 10,000 is read (issue 23); twice that one selector matches is a typo, refused
    many = vector([series("1", instance=f"127.0.0.1:{10_000 + i}") for i in range(20_001)])
    prom.answer = lambda q: many
    with pytest.raises(SpecopsError, match=r"20001 series.*more than 20000.*narrower selector") as caught:
        fleet(None, PrometheusSettings(url=prom.url), "", 60)
    assert caught.value.exit_code == 2
    assert len(prom.asked) == 1  # refused at the first answer: nothing else asked
    p = cli(prom, tmp_path)
    assert p.returncode == 2 and "narrower selector" in p.stderr and "Traceback" not in p.stderr, p.stderr
    with pytest.raises(SpecopsError, match="narrower selector"):
        diagnose_instance(None, PrometheusSettings(url=prom.url), 'job="vllm"', 60)


def test_fifty_thousand_series_are_refused_quickly_and_in_bounded_memory(prom: FakePrometheus) -> None:
    body = json.dumps(vector([series("1", instance=f"127.0.0.1:{10_000 + i}",
                                     job="vllm", model_name="Qwen/Qwen3.6-27B") for i in range(50_000)])).encode()
    prom.answer = lambda q: body
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(SpecopsError, match="narrower selector"):
            fleet(None, PrometheusSettings(url=prom.url), "", 60)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 10
    assert peak < 150 * 2**20, f"{peak / 2**20:.0f} MiB"


def test_an_answer_past_the_byte_cap_is_refused_before_it_is_parsed(prom: FakePrometheus) -> None:
    filler = b'{"status": "success", "data": {"resultType": "vector", "result": [' + b"1," * (20 * 2**20) + b"1]}}"
    prom.answer = lambda q: filler  # 40 MiB: more than the 32 MiB an answer may hold
    tracemalloc.start()
    try:
        with pytest.raises(PrometheusError, match=r"more than 32 MiB.*narrower selector"):
            fleet(None, PrometheusSettings(url=prom.url), "", 60)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 80 * 2**20, f"{peak / 2**20:.0f} MiB"  # the cap plus a chunk, never the whole body
