"""`specops config check` reports every problem of the file in one run, as promtool and amtool do: the schema's
(pydantic's, all of one validation) and the names that must refer to something (watch hosts, profiles,
playbooks, the default host, the Proxmox host) even when the schema step found problems — each as
`file:line: path: problem (did you mean …)`, then "N problems", exit 2 once. Through the CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# line numbers matter: each problem is asserted with its line
MANY = """\
hosts:
  a6000:
    address: 127.0.0.1
    usr: vllm
    port: 99999
    proxmox: {host: pve2, ctid: 101}
profiles:
  mtp:
    model: m
    method: mtp
    num_speculative_tokens: 1
  dflash:
    model: m
    method: dflash
    drafter: d
    num_speculative_tokens: 15
    playbook: deploy-dflsh
slack:
  default_host: a600
watch:
  hosts: [a6000, a600]
  report_cron: "0 25 * * *"
  timezone: Europe/Berln
  rollback_profile: mpt
"""


def run(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SPECOPS_CONFIG"}
    env.update(HOME=str(cfg.parent / "home"), XDG_CONFIG_HOME=str(cfg.parent / "xdg"))
    return subprocess.run([sys.executable, "-m", "bot", "config", "check", "--config", str(cfg), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)


def expected(cfg: Path) -> list[str]:
    return [
        f"{cfg}:4: hosts.a6000.usr: unknown key (did you mean 'user'?)",  # schema
        f"{cfg}:2: hosts.a6000.user: Field required",
        f"{cfg}:5: hosts.a6000.port: Input should be less than or equal to 65535",
        f"{cfg}:22: watch.report_cron: '0 25 * * *' is not a crontab line",
        f"{cfg}:23: watch.timezone: unknown time zone 'Europe/Berln' (did you mean 'Europe/Berlin'?)",
        f"{cfg}:21: watch.hosts.1: unknown host 'a600' (did you mean 'a6000'?)",  # names, beside the schema's
        f"{cfg}:24: watch.rollback_profile: unknown profile 'mpt' (did you mean 'mtp'?)",
        f"{cfg}:19: slack.default_host: unknown host 'a600' (did you mean 'a6000'?)",
        f"{cfg}:17: profiles.dflash.playbook: no playbook 'deploy-dflsh' (did you mean 'deploy-dflash'?)",
        f"{cfg}:6: hosts.a6000.proxmox.host: unknown host 'pve2'",
    ]


def test_every_problem_of_the_file_in_one_run(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(MANY)
    p = run(cfg)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.splitlines()
    for want in expected(cfg):
        assert any(line.startswith(want) for line in lines), f"missing {want!r} in:\n{p.stderr}"
    problems = [line for line in lines if line.startswith(f"{cfg}:") and not line.endswith("problems")]
    assert len(problems) == len(expected(cfg)), p.stderr
    assert lines[-1] == f"{cfg}: {len(expected(cfg))} problems", p.stderr  # the summary, last
    assert "Traceback" not in p.stderr


def test_json_lists_them_all(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(MANY)
    p = run(cfg, "--format", "json")
    assert p.returncode == 2, p.stderr
    doc = json.loads(p.stdout)
    assert doc["ok"] is False and len(doc["problems"]) == len(expected(cfg)), doc
    for want in expected(cfg):
        assert any(x.startswith(want) for x in doc["problems"]), (want, doc["problems"])


def test_names_are_checked_when_the_schema_is_fine(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(MANY.replace("    usr: vllm\n    port: 99999\n", "    user: vllm\n").replace(
        '"0 25 * * *"', '"0 8 * * *"').replace("Europe/Berln", "Europe/Berlin"))
    p = run(cfg)
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines()[-1] == f"{cfg}: 5 problems", p.stderr
    assert f"{cfg}:20: watch.hosts.1: unknown host 'a600' (did you mean 'a6000'?)" in p.stderr  # lines moved up


def test_a_good_file_is_ok_and_a_yaml_error_is_one_problem(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("hosts:\n  a6000: {address: 127.0.0.1, user: vllm}\nprofiles:\n  mtp: {model: m, method: mtp, "
                    "num_speculative_tokens: 1}\nwatch:\n  rollback_profile: mtp\n")
    p = run(good)
    assert p.returncode == 0 and p.stdout.startswith(f"{good}: ok"), p.stdout + p.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts:\n  a6000: [\n")
    p = run(bad)
    assert p.returncode == 2 and "not valid YAML" in p.stderr and p.stderr.splitlines()[-1] == f"{bad}: 1 problem", \
        p.stderr


def test_a_token_used_as_a_host_or_group_name_is_never_printed(tmp_path: Path) -> None:
    """`serve` runs the check at start: what it prints reaches the journal (issue 36)."""
    slack = "xo" + "xb-" + "1234567890-0987654321-" + "q7XkP2mV9nR4tW8yZ3bC6dFh"
    hf = "hf" + "_" + "Q7xK2mV9pL4nR8tW3yZ6bC1dE5"
    cfg = tmp_path / "specops.yaml"
    cfg.write_text(f"hosts:\n  {slack}:\n    address: 127.0.0.1\n    user: u\nprofiles:\n  mtp:\n    model: m\n"
                   f"    method: mtp\n    num_speculative_tokens: 1\ngroups:\n  {hf}: [nope]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_")}
    p = subprocess.run([sys.executable, "-m", "bot", "config", "check", "--config", str(cfg)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    said = p.stdout + p.stderr
    assert p.returncode == 2 and "unknown host 'nope'" in said, said
    assert slack[10:] not in said and hf[4:] not in said and "(redacted)" in said, said
