"""`specops tune` on the simulated host: each setting deployed through the normal deploy path and measured
(tok/s, acceptance from /metrics deltas, TTFT), the recommendation among them, and the deployment serving
before restored afterwards (or the best kept, or the server stopped when nothing served)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.app import ops
from bot.app import tune as tuning
from bot.app.chat import _run_command
from bot.app.commands import parse
from bot.config import Config, VllmInstall
from bot.engine.playbook import Progress
from bot.errors import InputError
from bot.present.tune import render_tune, tune_chart
from bot.sim.fake_vllm import GEOMETRIC_RATES, step_cost
from bot.sim.host import SimHost
from bot.store import Store
from tests.support.sshd import free_port

ROOT = Path(__file__).resolve().parents[2]
FAST: dict[str, Any] = {"concurrency": [1, 2], "requests": 2, "include_current": False}


@pytest.fixture(scope="module")
def sim() -> Iterator[tuple[SimHost, Config]]:
    host = SimHost(stats_interval=0.2, startup_seconds=0.3, base_tps=200.0, max_request_seconds=5.0).start()
    try:
        yield host, host.config(port=free_port())
    finally:
        try:
            host.stop_server()
        finally:
            host.cleanup()


def latest(cfg: Config) -> tuple[str, str] | None:
    with closing(Store(cfg.settings.state)) as store:
        dep = store.latest_deployment("a6000")
    return (dep.profile, dep.status) if dep else None


def health(cfg: Config) -> int:
    return httpx.get(f"http://127.0.0.1:{cfg.profiles['mtp'].port}/health", timeout=5).status_code


def deploy(cfg: Config, profile: str = "mtp") -> None:
    report = ops.deploy(ops.HostRequest(cfg, "a6000", profile))
    assert report.operation is not None and report.operation.status in ("changed", "unchanged"), report.headline


def stopped(cfg: Config) -> None:
    ops.stop(ops.HostRequest(cfg, "a6000"))


def ok_rows(result: dict[str, Any], concurrency: int = 1) -> dict[int | None, dict[str, Any]]:
    return {r["k"]: r for r in result["results"] if not r.get("error") and r["concurrency"] == concurrency}


def test_the_fake_vllm_puts_the_best_mtp_k_inside_the_sweep() -> None:
    first, ratio = GEOMETRIC_RATES["mtp"]

    def tps(k: int) -> float:
        return (1 + sum(first * ratio**i for i in range(k))) / step_cost("mtp", k)

    best = max((1, 2, 4, 8), key=tps)
    assert best not in (1, 8)
    assert step_cost("mtp", 3) == pytest.approx(1.4)  # the published step cost at k = 3 holds
    assert step_cost("dflash", 1) == step_cost("dflash", 15) == 2.0  # one pass drafts the block


def test_tune_measures_each_k_and_restores_the_deployment_serving_before(sim: tuple[SimHost, Config]) -> None:
    _, cfg = sim
    deploy(cfg, "mtp")
    seen: list[Progress] = []
    result = tuning.tune(tuning.TuneRequest(cfg, "a6000", "mtp", ks=[1, 2, 4, 8], methods=["mtp", "dflash"],
                                            progress=seen.append, **FAST))
    rows = ok_rows(result)
    assert set(rows) == {1, 2, 4, 8}
    for k, row in rows.items():
        assert row["tokens_per_s"] > 0 and row["ttft_s"] is not None and row["ttft_s"] > 0
        assert row["mean_acceptance_length"] is not None and 1.0 < row["mean_acceptance_length"] <= 1 + k
        assert len(row["per_position"]) == k
    assert set(ok_rows(result, 2)) == {1, 2, 4, 8}
    assert rows[4]["mean_acceptance_length"] > rows[1]["mean_acceptance_length"]
    rec = result["recommended"]
    assert rec["method"] == "mtp" and rec["k"] in (2, 4)  # the sim's optimum is inside 1..8
    assert result["profile_change"]["yaml"].endswith(f"num_speculative_tokens: {rec['k']}")
    assert all(s["method"] == "dflash" and "drafter" in s["reason"] for s in result["skipped"])
    assert result["previous"] == "mtp"
    assert result["restored"]["status"] == "redeployed" and result["restored"]["profile"] == "mtp"
    assert latest(cfg) == ("mtp", "serving") and health(cfg) == 200
    assert [p.status for p in seen if p.status != "running"] == ["ok"] * 4
    text = render_tune(result, "text").text
    assert "Recommended: mtp k=" in text and "num_speculative_tokens:" in text and "skipped dflash" in text
    md = render_tune(result, "md").text
    assert "| mtp k=4 | 1 |" in md and "```yaml" in md


def test_the_cli_tunes_with_json_and_leaves_the_previous_deployment(sim: tuple[SimHost, Config],
                                                                    tmp_path: Path) -> None:
    _, cfg = sim
    deploy(cfg, "mtp")
    path = tmp_path / "config.json"
    path.write_text(cfg.model_dump_json())
    chart = tmp_path / "tune.png"
    p = subprocess.run([sys.executable, "-m", "bot", "--config", str(path), "tune", "mtp", "--host", "a6000",
                        "--k", "1,2,4", "--methods", "mtp", "--concurrency", "1", "--requests", "2",
                        "--chart", str(chart), "--format", "json"],
                       capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    rows = ok_rows(result)
    assert set(rows) == {1, 2, 3, 4}  # the profile's own k = 3 is measured too: the gain over it is real
    assert all(r["tokens_per_s"] > 0 and r["mean_acceptance_length"] > 1 for r in rows.values())
    assert result["recommended"]["k"] in rows and result["recommended"]["gain"] is not None
    assert result["current"] == {"profile": "mtp", "method": "mtp", "k": 3,
                                 "tokens_per_s": rows[3]["tokens_per_s"]}
    assert "[1/4] mtp k=1" in p.stderr  # progress per setting
    assert chart.stat().st_size > 1000
    assert latest(cfg) == ("mtp", "serving") and health(cfg) == 200


def test_keep_best_leaves_the_best_setting_serving(sim: tuple[SimHost, Config]) -> None:
    _, cfg = sim
    stopped(cfg)
    result = tuning.tune(tuning.TuneRequest(cfg, "a6000", "mtp", ks=[1, 4], methods=["mtp"], keep_best=True,
                                            **FAST))
    assert result["previous"] is None
    best = f"mtp@mtp-k{result['recommended']['k']}"
    assert result["restored"]["status"] == "kept-best" and result["restored"]["profile"] == best
    assert latest(cfg) == (best, "serving") and health(cfg) == 200


def test_with_nothing_serving_before_the_server_is_stopped_after(sim: tuple[SimHost, Config]) -> None:
    _, cfg = sim
    stopped(cfg)
    result = tuning.tune(tuning.TuneRequest(cfg, "a6000", "mtp", ks=[2], methods=["mtp"], **FAST))
    assert result["restored"]["status"] == "stopped"
    with pytest.raises(httpx.HTTPError):
        health(cfg)


def test_a_cancelled_tune_restores_the_previous_deployment(sim: tuple[SimHost, Config]) -> None:
    _, cfg = sim
    deploy(cfg, "mtp")
    cancel = threading.Event()

    def progress(p: Progress) -> None:
        if p.status == "ok":
            cancel.set()  # the Cancel button, pressed after the first setting

    result = tuning.tune(tuning.TuneRequest(cfg, "a6000", "mtp", ks=[1, 2, 4], methods=["mtp"], progress=progress,
                                            cancel=cancel, **FAST))
    assert result["cancelled"] is True
    assert {r["k"] for r in result["results"]} == {1}
    assert result["restored"] == {**result["restored"], "status": "redeployed", "profile": "mtp"}
    assert latest(cfg) == ("mtp", "serving") and health(cfg) == 200


def test_a_failed_deploy_is_that_settings_failure_and_the_sweep_goes_on(sim: tuple[SimHost, Config],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _, cfg = sim
    deploy(cfg, "mtp")
    real = ops.deploy

    def broken_k2(req: ops.HostRequest) -> Any:
        if req.profile == "mtp@mtp-k2":
            profiles = dict(req.config.profiles)
            profiles["mtp@mtp-k2"] = profiles["mtp@mtp-k2"].model_copy(
                update={"vllm": VllmInstall(bin="/nonexistent/vllm", version="0.20.1")})
            req.config = req.config.model_copy(update={"profiles": profiles})
        return real(req)

    monkeypatch.setattr(tuning.ops, "deploy", broken_k2)
    result = tuning.tune(tuning.TuneRequest(cfg, "a6000", "mtp", ks=[1, 2], methods=["mtp"], **FAST))
    failed = [r for r in result["results"] if r.get("error")]
    assert len(failed) == 1 and failed[0]["k"] == 2 and failed[0]["failed_step"]
    assert set(ok_rows(result)) == {1}
    assert "failed" in render_tune(result, "text").text
    assert latest(cfg) == ("mtp", "serving") and health(cfg) == 200


def test_chat_tune_is_destructive_planned_and_reported(sim: tuple[SimHost, Config], tmp_path: Path) -> None:
    _, cfg = sim
    cmd = parse("tune mtp a6000", cfg)
    assert cmd.verb == "tune" and cmd.profile == "mtp" and cmd.destructive and cmd.destructive_verb
    with pytest.raises(Exception, match="needs a profile"):
        parse("tune", cfg)
    before = latest(cfg)
    plan = _run_command(parse("tune mtp a6000 --dry-run", cfg), cfg, owner="test")
    assert plan.operation is not None and plan.operation.status == "planned"
    assert any("mtp k=2" in n for n in plan.notes) and any("skipped dflash" in n for n in plan.notes)
    assert latest(cfg) == before  # nothing ran: the plan deploys nothing
    report = tuning.tune_report_for_chat({
        "host": "a6000", "profile": "mtp", "settings": ["mtp k=1", "mtp k=2"], "skipped": [],
        "results": [{"k": 1, "method": "mtp", "concurrency": 1, "tokens_per_s": 50.0, "mean_acceptance_length": 1.9,
                     "ttft_s": 0.1}, {"k": 2, "method": "mtp", "concurrency": None, "tokens_per_s": None,
                                      "error": "boom", "failed_step": "7. start vLLM"}],
        "recommended": {"k": 1, "method": "mtp", "tokens_per_s": 50.0, "gain": 1.2, "gain_over_none": 1.5,
                        "concurrency": 1},
        "profile_change": {"yaml": "profiles:\n  mtp:\n    num_speculative_tokens: 1"},
        "restored": {"status": "redeployed", "profile": "mtp"}, "cancelled": False, "duration_s": 3.0})
    assert "best mtp k=1" in report.headline and "1.20x the current setting" in report.headline
    assert any("failed at 7. start vLLM" in n for n in report.notes) and "tune" in report.context
    assert report.plan and "num_speculative_tokens: 1" in report.plan[0]  # the change to make, first
    slack = json.loads(render_tune(report.context["tune"], "slack").text)
    assert "best" not in slack["text"] and any("```" in b.get("text", {}).get("text", "") for b in slack["blocks"])
    assert tune_chart(report.context["tune"], tmp_path / "c.png").stat().st_size > 1000


@pytest.mark.parametrize(("args", "needle"), [
    (["--k", "1,x"], "not a whole number"),
    (["--k", "0"], "out of range"),
    (["--k", ""], "whole numbers separated by commas"),
    (["--methods", "mtp,magic"], "unknown method"),
    (["--concurrency", "0"], "out of range"),
    (["--requests", "0"], "--requests 0"),
    (["--prompts", "/nonexistent/prompts.yaml"], "cannot read --prompts"),
    (["--host", "nope"], "unknown host"),
])
def test_bad_input_is_a_short_error_with_exit_2(sim: tuple[SimHost, Config], tmp_path: Path, args: list[str],
                                                needle: str) -> None:
    _, cfg = sim
    path = tmp_path / "config.json"
    path.write_text(cfg.model_dump_json())
    argv = [sys.executable, "-m", "bot", "--config", str(path), "tune", "mtp", "--host", "a6000", *args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert needle in p.stderr and "Traceback" not in p.stderr


def test_unknown_profile_and_bad_prompt_files(sim: tuple[SimHost, Config], tmp_path: Path) -> None:
    _, cfg = sim
    with pytest.raises(Exception, match=r"unknown profile|nope"):
        tuning.tune(tuning.TuneRequest(cfg, "a6000", "nope"))
    bad = tmp_path / "p.yaml"
    bad.write_text("prompts: []\n")
    with pytest.raises(InputError, match="list of prompts"):
        tuning.load_prompts(bad)
    bad.write_text("prompts: [{text: hi}]\nmax_tokens: 0\n")
    with pytest.raises(InputError, match="max_tokens"):
        tuning.load_prompts(bad)
    shipped = tuning.load_prompts()
    assert len(shipped.prompts) >= 4 and {p.kind for p in shipped.prompts} == {"chat", "code"}
    with pytest.raises(InputError, match="nothing to measure"):
        tuning.tune(tuning.TuneRequest(cfg, "a6000", "mtp", methods=["dflash"]))


def test_ctrl_c_in_the_cli_restores_the_previous_deployment(sim: tuple[SimHost, Config], tmp_path: Path) -> None:
    import signal
    import time

    _, cfg = sim
    deploy(cfg, "mtp")
    path = tmp_path / "config.json"
    path.write_text(cfg.model_dump_json())
    proc = subprocess.Popen([sys.executable, "-m", "bot", "--config", str(path), "tune", "mtp", "--host", "a6000",
                             "--k", "1,2,4", "--methods", "mtp", "--concurrency", "1", "--requests", "2",
                             "--no-current", "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 120
        seen = []
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            seen.append(line)
            if line.startswith("[1/3] mtp k=1: ok"):
                break
            assert line, "".join(seen)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "restoring the previous deployment" in err and "Traceback" not in err
    result = json.loads(out)
    assert result["cancelled"] is True and result["restored"]["status"] == "redeployed"
    assert latest(cfg) == ("mtp", "serving") and health(cfg) == 200
