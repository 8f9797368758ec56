"""The config file: the shipped example validates; a bad file gets every error with its place."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import load_config, parse_config
from bot.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "deploy" / "specops.example.yaml"


def test_example_config_has_the_briefs_host_and_three_profiles() -> None:
    cfg = load_config(EXAMPLE)
    assert set(cfg.hosts) == {"a6000"}
    assert set(cfg.profiles) == {"dflash-0.20.1", "dflash", "mtp"}
    fixed = cfg.profiles["dflash"]
    assert fixed.env["VLLM_USE_V2_MODEL_RUNNER"] == "1" and fixed.vllm.version == "0.26.0"
    assert cfg.profiles["dflash-0.20.1"].speculative_config() == {
        "method": "dflash", "num_speculative_tokens": 15, "model": "/models/Qwen3.6-27B-DFlash"}


def test_every_error_is_reported_with_its_place() -> None:
    bad = {
        "hosts": {"a6000": {"address": "h", "user": "u", "port": 70000, "workdir": "relative", "colour": "red"}},
        "profiles": {"x": {"model": "m", "method": "dflash", "num_speculative_tokens": 3},
                     "bad name!": {"model": "m"}},
    }
    with pytest.raises(ConfigError) as err:
        parse_config(bad, "cfg.yaml")
    text = str(err.value)
    assert "hosts.a6000.port" in text and "hosts.a6000.workdir" in text and "hosts.a6000.colour" in text
    assert "bad name!" in text


def test_profile_rules() -> None:
    with pytest.raises(ConfigError, match=r"profiles\.x: .*needs a drafter"):
        parse_config({"hosts": {}, "profiles": {"x": {"model": "m", "method": "dflash", "num_speculative_tokens": 3}}})
    with pytest.raises(ConfigError, match="needs num_speculative_tokens"):
        parse_config({"hosts": {}, "profiles": {"x": {"model": "m", "method": "mtp"}}})
    with pytest.raises(ConfigError, match="not a valid environment variable"):
        parse_config({"hosts": {}, "profiles": {"x": {"model": "m", "env": {"A B": "1"}}}})


def test_the_acceptance_floor_is_position_0s_share_and_the_old_mean_floor_is_refused_by_name() -> None:
    """Issue 38: a floor on the mean acceptance length paged every healthy k = 1; the floor is position 0's share."""
    cfg = parse_config({"hosts": {}, "profiles": {}, "watch": {"rules": {"first_position_floor": {"mtp": 0.5}}}})
    assert cfg.watch.rules.first_position_floor == {"mtp": 0.5}
    with pytest.raises(ConfigError, match=r"watch\.rules.*acceptance_floor .*is gone: give first_position_floor"):
        parse_config({"hosts": {}, "profiles": {}, "watch": {"rules": {"acceptance_floor": {"mtp": 1.5}}}})
    with pytest.raises(ConfigError, match=r"first_position_floor\.mtp"):
        parse_config({"hosts": {}, "profiles": {}, "watch": {"rules": {"first_position_floor": {"mtp": 1.5}}}})


def test_yaml_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("hosts:\n  a: [1,\n")
    with pytest.raises(ConfigError, match=r"line \d+, column \d+"):
        load_config(path)


def test_no_config_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECOPS_CONFIG", raising=False)
    with pytest.raises(ConfigError, match="SPECOPS_CONFIG"):
        load_config(None)


@pytest.fixture(autouse=True)
def _own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example config keeps its state at ~/.local/share/specops: under the test's own home, never the user's
    (another checkout's newer schema there failed these tests)."""
    monkeypatch.setenv("HOME", str(tmp_path))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)


def test_dry_run_from_the_example_config_prints_the_plan_without_the_network() -> None:
    # the example host's address does not resolve: any attempt to connect would fail the command
    p = run("--config", str(EXAMPLE), "deploy", "dflash", "--host", "a6000", "--dry-run", "--format", "md")
    assert p.returncode == 0, p.stderr
    assert "planned" in p.stdout
    assert "/opt/vllm-0.26.0/bin/vllm serve /models/Qwen3.6-27B --config /srv/specops/server.yaml" in p.stdout
    # the environment travels in a 0600 file: the plan names the variables, never their values
    assert "server.pid.env (0600): VLLM_USE_V2_MODEL_RUNNER" in p.stdout
    assert "VLLM_USE_V2_MODEL_RUNNER=1" not in p.stdout
    assert 'speculative-config: {"method": "dflash"' in p.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["deploy", "nope", "--host", "a6000", "--dry-run"], "unknown profile 'nope'"),
    (["deploy", "dflash", "--host", "nohost", "--dry-run"], "unknown host 'nohost'"),
    (["stop", "--host", "nohost"], "unknown host 'nohost'"),
])
def test_unknown_names_get_a_short_error(args: list[str], message: str) -> None:
    p = run("--config", str(EXAMPLE), *args)
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr


def test_bad_config_file_from_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("hosts: {a: {address: h}}\nprofiles: {}\n")
    p = run("--config", str(path), "status", "--host", "a")
    assert p.returncode == 2 and "hosts.a.user" in p.stderr and "Traceback" not in p.stderr


def test_the_default_known_hosts_follows_xdg_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.config import HostConfig

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert HostConfig(address="127.0.0.1", user="u").known_hosts == tmp_path / "xdg" / "specops" / "known_hosts"


def test_config_check_knows_prometheus_instances_and_the_proxmox_host(tmp_path: Path) -> None:
    from bot.app.configuration.configcheck import check

    path = tmp_path / "c.yaml"
    path.write_text(
        "hosts:\n"
        "  a6000: {address: 127.0.0.1, user: u, proxmox: {host: pvee, ctid: 105}}\n"
        "  pve: {address: 127.0.0.2, user: root}\n"
        "profiles:\n"
        "  mtp: {model: /m, method: mtp, num_speculative_tokens: 3}\n"
        "prometheus:\n"
        "  url: http://127.0.0.1:9090\n"
        "  instances:\n"
        "    gpu-17: {selector: 'instance=\"127.0.0.1:8017\"', profile: mpt}\n"
        "watch:\n"
        "  hosts: [a6000, gpu-17, gpu-18]\n")
    result = check(path)
    text = "\n".join(result.problems)
    assert "unknown host 'pvee' (did you mean 'pve'?)" in text
    assert "unknown profile 'mpt' (did you mean 'mtp'?)" in text
    assert "unknown host 'gpu-18'" in text and "unknown host 'gpu-17'" not in text  # known through Prometheus


def test_config_check_warns_of_a_state_password_variable_that_is_not_set(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.app.configuration.configcheck import check

    path = tmp_path / "c.yaml"
    path.write_text("hosts: {a: {address: 127.0.0.1, user: u}}\nprofiles: {mtp: {model: /m}}\n"
                    "settings: {state: 'postgresql+psycopg://specops@127.0.0.1/specops', "
                    "state_password_env: SPECOPS_TEST_PG_PASSWORD}\n")
    monkeypatch.delenv("SPECOPS_TEST_PG_PASSWORD", raising=False)
    result = check(path)
    assert result.ok and any("SPECOPS_TEST_PG_PASSWORD is not set" in w for w in result.warnings), result.warnings
    monkeypatch.setenv("SPECOPS_TEST_PG_PASSWORD", "x")
    assert not any("SPECOPS_TEST_PG_PASSWORD" in w for w in check(path).warnings)
