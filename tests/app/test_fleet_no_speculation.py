"""A server Prometheus scrapes that reports no speculative decoding (vLLM served without a drafter): the
diagnosis names where it looked — Prometheus' series for the instance — never "this log" (issue 22 item 11)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.prometheus import BINARY, Prometheus
from tests.support.served import wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(BINARY is None, reason="prometheus is not installed (.ci/run installs it)")

# what vLLM exports without --speculative-config: its gauges and counters, no vllm:spec_decode_* series
PLAIN = ("# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
         "# TYPE vllm:num_requests_running gauge\n"
         'vllm:num_requests_running{engine="0",model_name="m"} 0.0\n'
         "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
         "# TYPE vllm:generation_tokens_total counter\n"
         'vllm:generation_tokens_total{engine="0",model_name="m"} 1234.0\n')


class _Plain(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = PLAIN.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, str]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Plain)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    instance = f"127.0.0.1:{server.server_address[1]}"
    prom = Prometheus(tmp_path_factory.mktemp("prom"), [instance])
    try:
        wait_for("two scrapes", lambda: (prom.value(f'count_over_time(up{{instance="{instance}"}}[5m])') or 0) >= 2,
                 timeout=60)
        yield prom, instance
    finally:
        prom.stop()
        server.shutdown()


def test_no_speculation_in_prometheus_is_not_called_a_log(scraped: tuple[Prometheus, str]) -> None:
    prom, instance = scraped
    p = subprocess.run([sys.executable, "-m", "bot", "diagnose", "--prometheus", prom.url, "--instance", instance,
                        "--since", "5m", "--format", "md"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "No SpecDecoding metrics in Prometheus for this instance" in p.stdout, p.stdout
    assert "in this log" not in p.stdout and "The log has no" not in p.stdout, p.stdout
