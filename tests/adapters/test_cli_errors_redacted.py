"""An error names what it could not reach — a Prometheus URL with its password in it is masked there too, and a
URL httpx cannot read is a clear error, not an internal one (issue 21, item 4); `--chart` into a folder that is
not there is refused, none made (item 9)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bot.redact import Redactor, url_password
from bot.sim import ports

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    return ports.free_port()  # nothing listens there, and nothing bound to port 0 will


def specops(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_url_passwords_with_any_character() -> None:
    assert url_password("https://bob:pa/ss99word@host/") == "pa/ss99word"
    assert url_password("postgres://admin:p@ss@word99@db") == "p@ss@word99"
    assert url_password("http://127.0.0.1:9090/api") is None and url_password("http://user@host/") is None
    r = Redactor()
    r.learn_url("postgres://admin:p@ss@word99@db")
    assert "p@ss@word99" not in r.text("could not reach postgres://admin:p@ss@word99@db:5432")


def test_a_prometheus_password_on_the_command_line_is_masked_in_the_error() -> None:
    url = f"http://bob:s3cr3t-pa55word@127.0.0.1:{_closed_port()}"
    p = specops("fleet", "--prometheus", url, "--format", "text")
    assert p.returncode == 1 and "cannot reach Prometheus" in p.stderr and "s3cr3t-pa55word" not in p.stderr
    p = specops("diagnose", "--prometheus", url, "--instance", "127.0.0.1:8000", "--format", "json")
    assert p.returncode == 1 and "s3cr3t-pa55word" not in p.stderr + p.stdout


def test_a_prometheus_password_in_the_config_is_masked_in_the_error(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("hosts:\n  a6000: {address: 127.0.0.1, user: x}\n"
                   "profiles:\n  mtp: {model: /m, method: mtp, num_speculative_tokens: 3}\n"
                   f"prometheus:\n  url: http://bob:c0nfig-pa55word@127.0.0.1:{_closed_port()}\n"
                   f"settings:\n  state: {tmp_path / 's.db'}\n")
    p = specops("--config", str(cfg), "fleet", "--format", "text")
    assert p.returncode == 1 and "c0nfig-pa55word" not in p.stderr, p.stderr


def test_a_config_that_does_not_load_is_said_not_ignored(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("prometheus:\n  url: http://127.0.0.1:9\n")  # no hosts, no profiles: not a config
    p = specops("--config", str(cfg), "fleet", "--format", "text")
    assert p.returncode == 2 and "hosts" in p.stderr and "which Prometheus" not in p.stderr, p.stderr


def test_a_url_httpx_cannot_read_is_a_clear_error() -> None:
    p = specops("fleet", "--prometheus", "http://bob:pa/ss99word@127.0.0.1:9", "--format", "text")
    assert p.returncode == 2 and "percent-encode" in p.stderr and "internal error" not in p.stderr
    assert "pa/ss99word" not in p.stderr and "'pa'" not in p.stderr


def test_a_chart_into_a_missing_folder_is_refused_and_none_is_made(tmp_path: Path) -> None:
    log = tmp_path / "one.log"
    log.write_text("INFO 05-08 16:26:29 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 2.00, "
                   "Accepted: 100 tokens, Drafted: 200 tokens, Per-position acceptance rate: 0.600, 0.400\n")
    target = tmp_path / "no" / "such" / "chart.png"
    p = specops("diagnose", "--log", str(log), "--chart", str(target))
    assert p.returncode == 2 and "there is no folder" in p.stderr and not (tmp_path / "no").exists()
