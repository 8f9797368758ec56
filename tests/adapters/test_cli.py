"""The `specops` command as a user runs it: the installed entry point, in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BRIEF = ["--vllm-version", "0.20.1", "--method", "dflash", "--drafter", "z-lab/Qwen3.6-27B-DFlash",
         "--num-speculative-tokens", "15"]


def specops(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def test_brief_line_from_the_cli(logs: Path, tmp_path: Path) -> None:
    chart = tmp_path / "chart.png"
    p = specops("diagnose", "--log", str(logs / "brief-dflash-line.log"), *BRIEF, "--format", "json",
                "--chart", str(chart))
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["verdict"] == "failing"
    numbers = {u["number"] for f in data["findings"] for u in f["upstream"]}
    assert {40727, 40898} <= numbers
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pipe_gets_markdown(logs: Path) -> None:
    p = specops("diagnose", "--log", str(logs / "mtp-0.20.1-healthy.log"), "--method", "mtp")
    assert p.returncode == 0 and p.stdout.startswith("# ✅ Healthy")


def test_metrics_only(fixtures: Path) -> None:
    p = specops("diagnose", "--metrics", str(fixtures / "metrics-0.32.0.prom"), "--method", "ngram", "--format", "json")
    data = json.loads(p.stdout)
    assert data["metrics"]["mean_acceptance_length"] == pytest.approx(1 + 177 / 107, abs=0.005)
    assert data["metrics"]["prometheus_mean_acceptance_length"] == pytest.approx(2.65, abs=0.01)


@pytest.mark.parametrize(("args", "message"), [
    (["diagnose"], "nothing to diagnose"),
    (["diagnose", "--log", "/nonexistent/vllm.log"], "cannot read log /nonexistent/vllm.log"),
    (["diagnose", "--log", "/"], "is a directory"),
    (["diagnose", "--log", "README.md", "--format", "pdf"], "unknown --format"),
    (["diagnose", "--log", "README.md", "--vllm-version", "latest"], "not a version"),
    (["diagnose", "--log", "README.md", "--drafter-config", "README.md"], "is not valid JSON"),
    (["diagnose", "--metrics", "/nonexistent.prom"], "cannot read metrics file"),
])
def test_bad_input_gets_a_short_error_not_a_traceback(args: list[str], message: str) -> None:
    root = Path(__file__).resolve().parents[2]
    p = specops(*args, cwd=root)
    assert p.returncode == 2
    assert message in p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    assert len(p.stderr.strip().splitlines()) <= 3


def test_bad_option_value_is_a_usage_error() -> None:
    p = specops("diagnose", "--log", "x", "--samples", "0")
    assert p.returncode == 2 and "Traceback" not in p.stderr


def test_demo_tells_the_story_on_the_simulated_host(tmp_path: Path) -> None:
    p = specops("demo", "--out", str(tmp_path / "out"), "--format", "md")
    assert p.returncode == 0, p.stderr
    failing, healthy = p.stdout.split("# ✅ Healthy")
    assert "# 🛑 Failing" in failing and "#40727" in failing and "#40898" in failing
    assert "VLLM_USE_V2_MODEL_RUNNER=1" in failing and "0.22.0" in failing
    assert "reference 73.5 tok/s (baseline_tps)" in healthy
    assert (tmp_path / "out" / "dflash-0.20.1.png").exists() and (tmp_path / "out" / "dflash-fixed.png").exists()
    assert "stopped PID" in p.stderr
    # before launch: the brief refused (and why), deployed with --force to show the collapse, the fix ready
    assert "Refused before launch: dflash-0.20.1 on a6000" in p.stderr
    assert "$ specops deploy dflash-0.20.1 --host a6000 --force" in p.stderr
    assert "refused before launch" in failing and "dflash on a6000: ready to launch" in failing
    assert "deployed with --force past the checks before launch" in failing


def test_help_lists_the_commands() -> None:
    p = specops("--help")
    assert p.returncode == 0 and "diagnose" in p.stdout


def test_a_binary_config_is_bad_input_with_its_reason(tmp_path: Path) -> None:
    cfg = tmp_path / "specops.yaml"
    cfg.write_bytes(b"\x00\x01\xff\xfe not yaml")
    p = specops("--config", str(cfg), "status", "--host", "a6000")
    assert p.returncode == 2 and "not a text" in p.stderr and "internal error" not in p.stderr


def test_chart_writes_exactly_the_path_given(logs: Path, tmp_path: Path) -> None:
    log = str(logs / "brief-dflash-line.log")
    p = specops("diagnose", "--log", log, *BRIEF, "--chart", str(tmp_path / "adir"))
    assert p.returncode == 0 and f"chart written to {tmp_path / 'adir'}\n" in p.stderr
    assert (tmp_path / "adir").read_bytes()[:4] == b"\x89PNG" and not (tmp_path / "adir.png").exists()
    p = specops("diagnose", "--log", log, *BRIEF, "--chart", str(tmp_path))
    assert p.returncode == 2 and "is a folder" in p.stderr
    # a suffix the PNG would lie about is refused before anything runs; nothing is written
    p = specops("diagnose", "--log", log, *BRIEF, "--chart", str(tmp_path / "accept-out.svg"))
    assert p.returncode == 2 and "PNG images, not image/svg+xml" in p.stderr and "Traceback" not in p.stderr
    assert not list(tmp_path.glob("accept-out*"))
    # `-`: the PNG on stdout, the report on stderr
    out = subprocess.run([sys.executable, "-m", "bot", "diagnose", "--log", log, *BRIEF, "--chart", "-", "--format",
                          "text"], capture_output=True, timeout=120)
    assert out.returncode == 0 and out.stdout[:4] == b"\x89PNG" and b"40727" in out.stderr


def test_an_unknown_method_is_refused(logs: Path) -> None:
    p = specops("diagnose", "--log", str(logs / "brief-dflash-line.log"), "--method", "foo")
    assert p.returncode == 2 and "`--method foo` is not one of" in p.stderr
    # echoed as typed: inside a code span `_` is literal (it once came back as `a?b`); a backtick is not
    p = specops("diagnose", "--log", str(logs / "brief-dflash-line.log"), "--method", "a_b`x")
    assert p.returncode == 2 and "`--method a_b?x` is not one of" in p.stderr
