"""The conventions a CLI user expects, through the real entry point in a subprocess: --version, -h,
stdin for --log, JSON errors, --fail-on, global options after the command, config discovery and
`config check` with file:line and "did you mean"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BRIEF = ["--vllm-version", "0.20.1", "--method", "dflash", "--drafter", "z-lab/Qwen3.6-27B-DFlash",
         "--num-speculative-tokens", "15"]


def run(*args: str, stdin: str | None = None, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "SPECOPS_CONFIG"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "bot", *args], capture_output=True, text=True, timeout=120,
                          input=stdin, env=full_env, cwd=cwd)


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def test_version_and_short_help() -> None:
    from bot import __version__

    v = run("--version")
    assert v.returncode == 0 and v.stdout.strip() == f"specops {__version__}"
    h = run("-h")
    assert h.returncode == 0 and "Exit codes:" in h.stdout and "--config" in h.stdout
    sub = run("diagnose", "-h")
    assert sub.returncode == 0 and "--fail-on" in sub.stdout


def test_log_from_stdin_is_read_whole_and_named_stdin(logs: Path) -> None:
    text = (logs / "brief-dflash-line.log").read_text()
    p = run("diagnose", "--log", "-", *BRIEF, "--format", "json", stdin=text)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["verdict"] == "failing"
    assert "stdin" in data["source"] and f"{len(text.encode())} of {len(text.encode())} bytes" in data["source"]


def test_errors_are_json_under_format_json_with_exit_2() -> None:
    p = run("diagnose", "--log", "/nonexistent.log", "--format", "json")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    err = json.loads(p.stdout)["error"]
    assert err["exit_code"] == 2 and "/nonexistent.log" in err["message"]
    usage = run("diagnose", "--no-such-option", "--format=json")
    assert usage.returncode == 2 and "no-such-option" in json.loads(usage.stdout)["error"]["message"]


def test_fail_on_turns_a_verdict_into_an_exit_code(logs: Path) -> None:
    log = str(logs / "brief-dflash-line.log")
    assert run("diagnose", "--log", log, *BRIEF, "--fail-on", "never").returncode == 0
    assert run("diagnose", "--log", log, *BRIEF, "--fail-on", "degraded").returncode == 1
    assert run("diagnose", "--log", log, *BRIEF, "--fail-on", "failing").returncode == 1
    healthy = str(logs / "mtp-0.20.1-healthy.log")
    assert run("diagnose", "--log", healthy, "--method", "mtp", "--fail-on", "degraded").returncode == 0
    bad = run("diagnose", "--log", log, "--fail-on", "sometimes")
    assert bad.returncode == 2 and "degraded, failing, never" in bad.stderr


def test_quiet_silences_notes(logs: Path, tmp_path: Path) -> None:
    args = ["diagnose", "--log", str(logs / "brief-dflash-line.log"), *BRIEF, "--chart", str(tmp_path / "c.png")]
    assert "chart written" in run(*args).stderr
    assert run(*args, "-q").stderr == ""


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


BAD = """\
hosts:
  a6000:
    address: 127.0.0.1
    user: vllm
profiles:
  mtp:
    model: m
    method: mtp
    num_speculative_tokens: 1
watch:
  hosts: [a6000, a600]
  report_cron: "0 25 * * *"
"""


def test_config_check_finds_a_bad_cron_with_its_line(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.yaml", BAD)
    p = run("config", "check", "--config", str(cfg))  # the global option after the command
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"{cfg}:12: watch.report_cron" in p.stderr and "25" in p.stderr


def test_config_check_finds_an_unknown_watch_host_with_a_suggestion(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.yaml", BAD.replace('"0 25 * * *"', '"0 8 * * *"'))
    p = run("config", "check", "--config", str(cfg))
    assert p.returncode == 2
    assert f"{cfg}:11: watch.hosts.1: unknown host 'a600' (did you mean 'a6000'?)" in p.stderr
    js = run("config", "check", "--config", str(cfg), "--format", "json")
    assert js.returncode == 2 and not json.loads(js.stdout)["ok"]


def test_config_errors_say_where_and_what_was_meant(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.yaml", BAD.replace("    user: vllm", "    usr: vllm").replace(
        '"0 25 * * *"', '"0 8 * * *"').replace("  hosts: [a6000, a600]\n", "  timezone: Europe/Berln\n"))
    p = run("config", "check", "--config", str(cfg))
    assert p.returncode == 2
    assert f"{cfg}:4: hosts.a6000.usr: unknown key (did you mean 'user'?)" in p.stderr
    assert "did you mean 'Europe/Berlin'?" in p.stderr


def test_a_bad_cron_is_a_config_error_for_every_command_not_an_internal_error(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.yaml", BAD)
    p = run("schedule", "list", "--config", str(cfg))
    assert p.returncode == 2 and "internal error" not in p.stderr and "report_cron" in p.stderr


def test_discovery_order(tmp_path: Path, home: dict[str, str]) -> None:
    xdg = _write(Path(home["XDG_CONFIG_HOME"]) / "specops" / "config.yaml", BAD.replace('"0 25 * * *"', "null"))
    assert run("config", "path", env=home).stdout.strip() == str(xdg)
    other = _write(tmp_path / "other.yaml", "hosts: {}\nprofiles: {}\n")
    assert run("config", "path", env={**home, "SPECOPS_CONFIG": str(other)}).stdout.strip() == str(other)
    assert run("config", "path", "--config", "x.yaml", env=home).stdout.strip() == "x.yaml"


def test_no_config_says_how_to_make_one(home: dict[str, str]) -> None:
    p = run("deploy", "mtp", "--host", "a6000", env=home)
    assert p.returncode == 2 and "specops init" in p.stderr


def test_records_need_only_settings(tmp_path: Path, home: dict[str, str]) -> None:
    # a config with no inventory yet still has a database to read
    cfg = _write(tmp_path / "c.yaml", f"settings:\n  state: {tmp_path / 'state.db'}\n")
    for cmd in (["audit"], ["incidents"]):
        p = run(*cmd, "--config", str(cfg), env=home)
        assert p.returncode == 0, p.stderr
    assert run("audit", env=home).returncode == 0  # no config at all: the default database


def test_init_then_check_then_dry_run(tmp_path: Path, home: dict[str, str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    p = run("init", env=home, cwd=empty)
    assert p.returncode == 0, p.stderr
    written = Path(home["XDG_CONFIG_HOME"]) / "specops" / "config.yaml"
    assert written.is_file() and written.read_text().startswith("# Written by `specops init`")
    assert run("init", env=home, cwd=empty).returncode == 2  # never overwrites without --force
    check = run("config", "check", env=home, cwd=empty)
    assert check.returncode == 0, check.stderr
    assert "known_hosts" in check.stderr  # a warning: the host's key is not there yet
    plan = run("deploy", "dflash-0.20.1", "--host", "a6000", "--dry-run", env=home, cwd=empty)
    assert plan.returncode == 0, plan.stderr
    assert "wait for /health" in plan.stdout and "nothing ran" in plan.stdout


def test_init_deploy_files(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    p = run("init", "--deploy-files", str(out))
    assert p.returncode == 0, p.stderr
    for name in ("slack-manifest.socket-mode.yaml", "slack-manifest.http.yaml", "specops.service",
                 "Containerfile", "prometheus-rules.yml"):
        assert (out / name).read_bytes() == (ROOT / "deploy" / name).read_bytes()
    assert run("init", "--deploy-files", str(out)).returncode == 2


@pytest.mark.parametrize("verb", [["incidents"], ["audit"], ["replicas"], ["schedule", "list"]],
                         ids=lambda v: " ".join(v))
def test_a_store_that_does_not_answer_is_exit_1_not_an_internal_error(tmp_path: Path, verb: list[str]) -> None:
    """Issue 36: the store-reading commands said `internal error … exit 70` (a bug, per the README) when
    PostgreSQL did not answer; `--format json` printed no JSON."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = tmp_path / "specops.yaml"
    cfg.write_text(f"hosts: {{}}\nprofiles: {{}}\nsettings:\n  state: postgresql+psycopg://specops:pw-never-shown-77@"
                   f"127.0.0.1:{port}/specops\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_")}
    p = subprocess.run([sys.executable, "-m", "bot", "--config", str(cfg), *verb, "--format", "json"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr and "pw-never-shown-77" not in p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1])["error"]["exit_code"] == 1
