"""The fleet at scale (issue 23): a stand-in of Prometheus' query API (tests/support/prometheus_api.py, the real
JSON shape) serves a mixed fleet — healthy, slow, useless acceptance, restarted inside the window, down, not
speculating; some placed on a configured DFlash profile — and the CLI runs as a user runs it. What the new code
lists is compared with what the code before the change (commit 0039de1, from git) says of the same fleet."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.app.fleet import fleet
from bot.config import Config, PrometheusSettings
from tests.support.prometheus_api import FIRST_PORT, PrometheusAPI

ROOT = Path(__file__).resolve().parents[2]
BEFORE = "0039de1"  # the tree before issue 23's fleet work: every instance through judge(), a Report apiece
N = 300


@pytest.fixture(scope="module")
def api() -> Iterator[PrometheusAPI]:
    with PrometheusAPI(N) as server:
        yield server


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 of the instances (127.0.0.1:10000 – 10019) are the config's one host's DFlash profiles of vLLM 0.20.1
    (one port each): judged with the method, the version and the drafter known."""
    tmp = tmp_path_factory.mktemp("config")
    data: dict[str, Any] = {
        "hosts": {"h0": {"address": "127.0.0.1", "user": "ops"}},
        "profiles": {f"dflash-0.20.1-{i}": {"model": "Qwen/Qwen3.6-27B", "method": "dflash",
                                            "drafter": "z-lab/Qwen3.6-27B-DFlash", "num_speculative_tokens": 4,
                                            "port": FIRST_PORT + i,
                                            "vllm": {"bin": "/opt/vllm/bin/vllm", "version": "0.20.1"}}
                     for i in range(20)},
        "settings": {"state": str(tmp / "specops.db")},
    }
    path = tmp / "specops.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def before(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree of commit BEFORE, from the checkout's git."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    probe = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{BEFORE}^{{commit}}"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"commit {BEFORE} is not in this checkout")
    tree = tmp_path_factory.mktemp("before")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE, "bot", "templates", "playbooks"],
                             capture_output=True, check=True, timeout=120).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, timeout=120)
    return tree


def specops(tree: Path, config: Path, api: PrometheusAPI, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(config.parent), "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-m", "bot", "--config", str(config), "fleet", "--prometheus", api.url,
                           "--since", "1h", *args], capture_output=True, text=True, timeout=180, cwd=tree, env=env)


# the words changed on purpose since BEFORE (issue 22 item 11: a Prometheus read is not "this log")
RENAMED = {"No SpecDecoding metrics in this log": "No SpecDecoding metrics in Prometheus for this instance"}


def _as_now(text: str) -> str:
    for was, now in RENAMED.items():
        text = text.replace(was, now)
    return text


def test_every_listed_instance_is_judged_as_before(api: PrometheusAPI, config_file: Path, before: Path) -> None:
    old = specops(before, config_file, api, "--format", "json")
    assert old.returncode == 0, old.stderr
    new = specops(ROOT, config_file, api, "--format", "json")
    assert new.returncode == 0, new.stderr
    was, now = json.loads(_as_now(old.stdout)), json.loads(new.stdout)
    verdicts = {line["verdict"] for line in was["instances"]}
    assert verdicts == {"failing", "degraded", "unknown", "healthy"}, verdicts  # a mixed fleet
    assert sum(1 for line in was["instances"] if line["profile"]) == 20
    assert now["instances"] == was["instances"]  # every line, in the same order, to the byte of its JSON
    assert now["totals"] == was["totals"]
    assert now["omitted"] == {"instances": 0, "by_verdict": {}}
    # the text and Markdown are the same to the byte when nothing is left out
    for fmt in ("text", "md"):
        old_text = specops(before, config_file, api, "--format", fmt)
        assert old_text.returncode == 0, old_text.stderr
        assert specops(ROOT, config_file, api, "--format", fmt).stdout == _as_now(old_text.stdout)

    limited = json.loads(specops(ROOT, config_file, api, "--format", "json", "--limit", "25").stdout)
    assert limited["instances"] == was["instances"][:25] and limited["totals"] == was["totals"]
    rest = was["instances"][25:]
    assert limited["omitted"]["instances"] == len(rest) == N - 25
    assert limited["omitted"]["by_verdict"].get("healthy") == sum(1 for line in rest if line["verdict"] == "healthy")

    problems = json.loads(specops(ROOT, config_file, api, "--format", "json", "--only-problems").stdout)
    assert problems["instances"] == [line for line in was["instances"] if line["verdict"] != "healthy"]
    assert problems["omitted"] == {"instances": was["totals"]["by_verdict"]["healthy"],
                                   "by_verdict": {"healthy": was["totals"]["by_verdict"]["healthy"]}}


def test_limit_and_only_problems_on_the_command_line(api: PrometheusAPI, config_file: Path) -> None:
    p = specops(ROOT, config_file, api, "--limit", "5", "--format", "text")
    assert p.returncode == 0, p.stderr
    rows = [line for line in p.stdout.splitlines() if line[:1] in "✖▲?✔" and "127.0.0.1:" in line]
    assert len(rows) == 5 and all(r.startswith("✖") for r in rows), p.stdout  # worst first
    assert f"… and {N - 5} more (healthy: " in p.stdout, p.stdout
    assert f"{N} instance(s)" in p.stdout  # the totals count every instance
    # an instance left out still fails the run: --limit hides nothing from --fail-on
    p = specops(ROOT, config_file, api, "--limit", "0", "--fail-on", "failing", "--format", "text")
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "(none listed)" in p.stdout and f"… and {N} more (healthy: " in p.stdout
    p = specops(ROOT, config_file, api, "--only-problems", "--format", "md")
    assert p.returncode == 0 and "| ✔ |" not in p.stdout and "| ✖ |" in p.stdout, p.stdout
    assert "more (healthy: " in p.stdout
    p = specops(ROOT, config_file, api, "--limit", "-1")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr


def test_a_fleet_in_slack_stays_within_50_blocks_and_says_how_many_more(api: PrometheusAPI) -> None:
    """`/specops fleet` through the bot (bolt in HTTP mode, signed requests, the Slack emulator): the worst
    instances that fit one message, then "… and N more (healthy: M)"."""
    from tests.adapters.slack.test_bot import ack_text, harness

    def configure(cfg: Config) -> None:
        cfg.prometheus = PrometheusSettings(url=api.url)

    h = next(gen := harness(configure))
    try:
        assert "fleet" in ack_text(h.command("fleet", user="USOMEONE"))
        posted = h.wait(lambda: h.posts_with("more (healthy: "), timeout=120, what="the fleet report")[0]
        blocks = posted["blocks"]
        assert len(blocks) <= 50, len(blocks)
        listed = [b for b in blocks if b["type"] == "section"]
        expected = fleet(None, PrometheusSettings(url=api.url), "", 3600.0)
        healthy = sum(1 for line in expected.lines[len(listed):] if line.verdict == "healthy")
        last = blocks[-1]["elements"][0]["text"]
        assert last.startswith(f"… and {N - len(listed)} more (healthy: {healthy})"), last
        shown = [b["text"]["text"].split("*")[1] for b in listed]
        assert shown == [line.instance for line in expected.lines[:len(listed)]]  # the worst, worst first
    finally:
        gen.close()


def test_the_json_written_line_by_line_is_the_json_of_the_whole(api: PrometheusAPI) -> None:
    from bot.present.render import render

    for result in (fleet(None, PrometheusSettings(url=api.url), "", 3600.0),
                   fleet(None, PrometheusSettings(url=api.url), 'job="vllm"', 3600.0, limit=0)):
        text = render(result, "json").text
        assert text == json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n"
