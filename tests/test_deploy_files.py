"""The deployment files: Slack manifests, the systemd unit, the Containerfile and deploy/README.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.adapters.slack.settings import SlackSecrets
from bot.config import SlackSettings

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
MANIFESTS = {"socket-mode": DEPLOY / "slack-manifest.socket-mode.yaml", "http": DEPLOY / "slack-manifest.http.yaml"}
SCOPES = {"commands", "chat:write", "files:write", "files:read", "app_mentions:read", "usergroups:read"}
EVENTS_URL_PATH = "/slack/events"


def _manifest(mode: str) -> dict[str, Any]:
    data = yaml.safe_load(MANIFESTS[mode].read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _slash(manifest: dict[str, Any]) -> dict[str, Any]:
    commands = manifest["features"]["slash_commands"]
    assert [c["command"] for c in commands] == ["/specops"]
    command: dict[str, Any] = commands[0]
    return command


def _directives(text: str) -> dict[str, list[str]]:
    """`Key=value` lines of a systemd unit (comments skipped)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out.setdefault(key.strip(), []).append(value.strip())
    return out


@pytest.mark.parametrize("mode", sorted(MANIFESTS))
def test_manifest_has_the_command_scopes_event_and_buttons(mode: str) -> None:
    m = _manifest(mode)
    assert m["display_information"]["name"]
    assert m["features"]["bot_user"]["display_name"]
    slash = _slash(m)
    assert slash["description"] and slash["usage_hint"]
    assert slash["should_escape"] is False
    assert set(m["oauth_config"]["scopes"]["bot"]) == SCOPES  # chat:write.public stays optional (commented out)
    from bot.adapters.slack.shortcut import CALLBACK_ID

    assert [(s["type"], s["callback_id"], s["name"]) for s in m["features"]["shortcuts"]] == [
        ("message", CALLBACK_ID, "Diagnose with specops")]
    assert all(len(s["description"]) <= 80 for s in m["features"]["shortcuts"])  # Slack's limit
    settings = m["settings"]
    assert settings["event_subscriptions"]["bot_events"] == ["app_mention"]
    assert settings["interactivity"]["is_enabled"] is True
    assert settings["org_deploy_enabled"] is False
    assert settings["token_rotation_enabled"] is False


def test_socket_mode_manifest_has_no_request_urls() -> None:
    m = _manifest("socket-mode")
    assert m["settings"]["socket_mode_enabled"] is True
    assert "url" not in _slash(m)
    assert "request_url" not in m["settings"]["event_subscriptions"]
    assert "request_url" not in m["settings"]["interactivity"]


def test_http_manifest_sends_everything_to_slack_events() -> None:
    m = _manifest("http")
    assert m["settings"]["socket_mode_enabled"] is False
    urls = [_slash(m)["url"], m["settings"]["event_subscriptions"]["request_url"],
            m["settings"]["interactivity"]["request_url"]]
    for url in urls:
        assert url.startswith("https://") and url.endswith(EVENTS_URL_PATH), url
    assert len(set(urls)) == 1


def test_http_server_serves_the_manifest_path() -> None:
    """The path the manifest gives Slack is the one the server hands to bolt (an unsigned request: 401)."""
    import httpx
    from slack_bolt import App

    from bot.adapters.slack.http_server import SlackHTTPServer

    app = App(token="xoxb-manifest-test", signing_secret="manifest-test-secret", token_verification_enabled=False)
    server = SlackHTTPServer(app, "127.0.0.1", 0).start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=5, trust_env=False) as http:
            assert http.post(EVENTS_URL_PATH, content=b"command=%2Fspecops").status_code == 401
            assert http.post("/not-the-manifest-path", content=b"x").status_code == 404
    finally:
        server.stop()


def test_systemd_unit_verifies_and_starts_a_real_subcommand() -> None:
    """`systemd-analyze verify` where systemd is installed; everywhere, ExecStart names a command specops has."""
    import shutil
    import subprocess
    import sys

    unit = DEPLOY / "specops.service"
    d = _directives(unit.read_text(encoding="utf-8"))
    [exec_start] = d["ExecStart"]
    argv = exec_start.split()
    assert argv[0].endswith("/specops")
    p = subprocess.run([sys.executable, "-m", "bot", *argv[1:], "--help"], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed here; ExecStart was checked against the CLI")
    out = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    problems = [line for line in (out.stdout + out.stderr).splitlines()
                if "specops.service" in line and "is not executable" not in line]  # not installed here
    assert not problems, problems


def test_containerfile_copies_only_what_exists_and_runs_unprivileged() -> None:
    text = (DEPLOY / "Containerfile").read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    for line in lines:
        if line.startswith("COPY ") and "--from" not in line:
            *sources, _dest = line.split()[1:]
            for src in sources:
                assert (ROOT / src).exists(), f"Containerfile copies {src}, which the repository does not have"
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("root", "0")


def test_readme_documents_every_environment_variable() -> None:
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    names = {name.upper() for name in SlackSecrets.model_fields} | {"SPECOPS_CONFIG"}
    assert {"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "SPECOPS_SLACK_API_URL"} <= names
    missing = sorted(name for name in names if f"`{name}`" not in readme)
    assert not missing, f"deploy/README.md does not document {missing}"


def test_readme_slack_example_is_a_valid_slack_section() -> None:
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", readme, re.S)]
    examples = [b["slack"] for b in blocks if isinstance(b, dict) and "slack" in b]
    assert examples, "deploy/README.md has no ```yaml block with a slack: section"
    for example in examples:
        settings = SlackSettings.model_validate(example)
        assert settings.deployers.users and settings.approvers.users and settings.team_id


def test_readme_names_the_manifests_and_service_files() -> None:
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    for name in ("slack-manifest.socket-mode.yaml", "slack-manifest.http.yaml", "specops.service", "Containerfile"):
        assert name in readme and (DEPLOY / name).is_file(), name


def test_prometheus_rules_use_vllms_metric_names() -> None:
    import re

    rules = yaml.safe_load((DEPLOY / "prometheus-rules.yml").read_text())
    exprs = " ".join(r["expr"] for g in rules["groups"] for r in g["rules"])
    names = set(re.findall(r"vllm:[a-z_:0-9]+", exprs))
    known = {"vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_drafts_total",
             "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "vllm:num_preemptions_total",
             "vllm:spec_decode_mean_acceptance_length:rate10m"}
    assert names <= known, names - known
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    assert all("specops_host" in r["annotations"]["summary"] for r in alerts)


def test_prometheus_rules_pass_promtool() -> None:
    """Debian's prometheus ships promtool (.ci/run installs it): the rules check, and their unit tests pass."""
    import shutil
    import subprocess

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed here (.ci/run installs Debian's prometheus)")
    check = subprocess.run([promtool, "check", "rules", "prometheus-rules.yml"], cwd=DEPLOY, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run([promtool, "test", "rules", "prometheus-rules.test.yml"], cwd=DEPLOY, capture_output=True,
                          text=True, timeout=60)
    assert test.returncode == 0 and "SUCCESS" in test.stdout, test.stdout + test.stderr


def test_the_unit_stops_restarting_on_a_bad_config_and_gives_up_on_a_crash_loop() -> None:
    d = _directives((DEPLOY / "specops.service").read_text(encoding="utf-8"))
    assert d["RestartPreventExitStatus"] == ["2"]  # exit 2: the config; restarting cannot fix it
    assert int(d["StartLimitBurst"][0]) >= 1 and int(d["StartLimitIntervalSec"][0]) > 0


def test_the_unit_scores_ok_in_systemd_analyze_security(tmp_path: Path) -> None:
    import shutil
    import subprocess

    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (.ci/run installs systemd)")
    unit = tmp_path / "specops.service"
    unit.write_bytes((DEPLOY / "specops.service").read_bytes())
    p = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(unit)], capture_output=True,
                       text=True, timeout=60)
    m = re.search(r"Overall exposure level for specops\.service: (\d+\.\d+)", p.stdout + p.stderr)
    assert m, p.stdout + p.stderr
    assert float(m.group(1)) <= 2.0, p.stdout


def test_the_container_runs_as_a_numeric_user() -> None:
    users = re.findall(r"^USER\s+(\S+)", (DEPLOY / "Containerfile").read_text(encoding="utf-8"), re.M)
    assert users and users[-1].split(":")[0].isdigit()  # Kubernetes' runAsNonRoot needs a number
