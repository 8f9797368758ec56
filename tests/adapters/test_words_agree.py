"""Issue 22 item 11: words and numbers that agree, through the CLI. Each speed says where it comes from (the
probe's one request beside vLLM's log), a health line never reads "0 requests · 12.1 tok/s" with no word of
what each is, a /metrics scrape is never called "this log", and a file that is no scrape is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.config import Config, WatchSettings
from bot.sim.host import SimHost
from tests.e2e.test_health_report import report_after_three_watches
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]


def specops(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", *args], capture_output=True, text=True, timeout=180,
                          cwd=ROOT)


def test_a_file_that_is_no_scrape_is_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("hello world\nthis is not prometheus\n{{{\n")
    p = specops("diagnose", "--metrics", str(garbage))
    assert p.returncode == 2, p.stdout
    assert p.stderr.strip() == (f"specops: error: {garbage} is not a Prometheus /metrics scrape: no line of it is a "
                                "sample (first line: 'hello world'); save one with `curl -s http://HOST:PORT/metrics`")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    p = specops("diagnose", "--metrics", str(empty))
    assert p.returncode == 2 and "is empty" in p.stderr


def test_a_scrape_without_speculation_is_not_called_a_log(tmp_path: Path) -> None:
    scrape = tmp_path / "metrics.txt"
    scrape.write_text("# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
                      "# TYPE vllm:num_requests_running gauge\n"
                      'vllm:num_requests_running{engine="0",model_name="m"} 0.0\n')
    p = specops("diagnose", "--metrics", str(scrape), "--format", "md")
    assert p.returncode == 0, p.stderr
    assert "No SpecDecoding metrics in the /metrics scrape" in p.stdout
    assert "in this log" not in p.stdout and "vllm:spec_decode_*" in p.stdout


def test_each_speed_of_a_deploy_says_where_it_comes_from(sim: SimHost, tmp_path: Path) -> None:
    cfg = tmp_path / "specops.json"
    cfg.write_text(sim.config(port=free_port()).model_dump_json())
    chart = tmp_path / "deploy.png"
    p = specops("--config", str(cfg), "deploy", "dflash-0.20.1", "--host", "a6000", "--force", "--format", "md",
                "--chart", str(chart))
    assert p.returncode == 0, p.stderr
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"chart written to {chart}" in p.stderr
    status_chart = tmp_path / "status.png"  # the status's own window, charted like diagnose's
    s = specops("--config", str(cfg), "status", "--host", "a6000", "--chart", str(status_chart))
    assert s.returncode == 0 and "Traceback" not in s.stderr, s.stderr
    assert status_chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", s.stderr
    timed = next(line for line in p.stdout.splitlines() if line.startswith("| One request, timed |"))
    assert "specops' probe" in timed
    generation = next(line for line in p.stdout.splitlines() if line.startswith("| Generation throughput |"))
    assert "vLLM's log" in generation


def test_the_health_line_says_what_each_number_is(sim: SimHost, tmp_path: Path) -> None:
    cfg: Config = sim.config(port=free_port())
    cfg.watch = WatchSettings(interval=60, report_cron="0 8 * * *")
    out = report_after_three_watches(cfg, sim, "dflash-0.20.1", tmp_path)
    health = next(line for line in out.splitlines() if line.startswith("**Health over"))
    assert "requests finished" in health or "no request counted" in health
    assert "tok/s while busy" in health and "requests served · generation" not in health
