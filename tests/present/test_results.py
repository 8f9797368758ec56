"""The typed results of tune, fleet and doctor: their JSON is today's contract to the byte (pinned here from
the dict-building code they replaced), and each renders in every medium — text, Markdown, Slack Block Kit
within its limits, JSON — with its charts as PNG bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.core.doctor_facts import Check
from bot.core.report import MetricsOut, Report
from bot.core.results.doctor import DoctorReport
from bot.core.results.fleet import FleetLine, FleetMetrics, FleetReport, FleetTotals
from bot.core.results.tune import (
    Baseline,
    BestAt,
    Current,
    Failed,
    Measured,
    ProfileChange,
    Recommendation,
    Restored,
    Skipped,
    SpecSetting,
    TunePlan,
    TuneResult,
    WorkloadUsed,
)
from bot.core.triage.findings import Finding
from bot.core.upstream import Upstream
from bot.present.charts import acceptance_png, tune_png, write_png
from bot.present.doctor import render_doctor
from bot.present.fleet import render_fleet
from bot.present.rendered import SLACK_MAX_BLOCKS, SLACK_MAX_SECTION, Format, Rendered
from bot.present.tune import render_tune

FORMATS: tuple[Format, ...] = ("md", "text", "slack", "json")
PNG = b"\x89PNG\r\n\x1a\n"

FLEET_JSON = (
    '{"prometheus": "http://prom:9090", "selector": "job=\\"vllm\\"", "window": "1 h", "instances": [{"instance'
    '": "127.0.0.1:8000", "labels": {"job": "vllm", "model_name": "Qwen"}, "verdict": "failing", "host": "a600'
    '0", "profile": "dflash-0.20.1", "metrics": {"mean_acceptance_length": 1.07, "per_position": [0.07, 0.0, '
    '0.0], "num_drafts": 1235, "tokens_per_s": 12.35, "running": 1.0, "waiting": 0.0, "kv_cache_usage": 0.123'
    '5, "up": true}, "top_finding": {"id": "dflash-layer-offset", "title": "DFlash reads the wrong layers", "'
    'severity": "critical", "confidence": "high", "upstream": ["https://github.com/vllm-project/vllm/pull/407'
    '27"]}, "headline": "Failing: DFlash reads the wrong layers · mean acceptance length 1.07", "window": nul'
    'l}, {"instance":'
    ' "127.0.0.1:8001", "labels": {"job": "vllm"}, "verdict": "healthy", "host": null, "profile": null, "metri'
    'cs": {"mean_acceptance_length": 3.6, "per_position": [0.9, 0.8, 0.7, 0.6], "num_drafts": 500, "tokens_pe'
    'r_s": 80.0, "running": 2.0, "waiting": 1.0, "kv_cache_usage": null, "up": true}, "top_finding": {"id": "'
    'healthy", "title": "Speculative decoding is healthy", "severity": "info", "confidence": "high", "upstrea'
    'm": []}, "headline": "Healthy: mean acceptance length 3.60", "window": null}], "totals": {"instances": 2,'
    ' "by_verdict": '
    '{"failing": 1, "healthy": 1}, "tokens_per_s": 92.35, "mean_acceptance_length": 1.799, "drafts": 1735}, '
    '"omitted": {"instances": 0, "by_verdict": {}}}'
)

DOCTOR_JSON = (
    '{"host": "a6000", "profile": "dflash-0.20.1", "proxmox": "pve", "status": "failed", "checks": [{"id": "d'
    'evices", "title": "/dev/nvidia* present", "status": "failed", "seen": ["ls: cannot access \'/dev/nvidia0\''
    '"], "fix": "bind the GPUs to nvidia:\\necho 0000:01:00.0 > /sys/bus/pci/drivers/vfio-pci/unbind", "kb": "'
    'nvidia-smi-no-devices"}, {"id": "shm", "title": "/dev/shm large enough", "status": "warn", "seen": ["shm'
    ': 64 MiB"], "fix": "--shm-size 16g", "kb": "nccl-dev-shm-too-small"}, {"id": "port", "title": "port 8000'
    ' free", "status": "ok", "seen": ["free"], "fix": null, "kb": null}, {"id": "uvm", "title": "nvidia-uvm",'
    ' "status": "skipped", "seen": [], "fix": null, "kb": null}]}'
)

TUNE_JSON = (
    '{"host": "a6000", "profile": "mtp", "settings": ["mtp k=1", "mtp k=2", "mtp k=3", "none"], "skipped": [{'
    '"method": "dflash", "k": 1, "reason": "dflash needs a drafter; profile mtp names none"}, {"method": "dfl'
    'ash", "k": 2, "reason": "dflash needs a drafter; profile mtp names none"}], "concurrency": [1, 8], "requ'
    'ests": 4, "workload": {"source": "the shipped prompt set (bot/app/tuning/tune_prompts.yaml)", "prompts": 6, "ma'
    'x_tokens": 256}, "results": [{"k": 1, "method": "mtp", "profile": "mtp@mtp-k1", "concurrency": 1, "reque'
    'sts": 2, "tokens": 512, "seconds": 10.24, "tokens_per_s": 50.0, "mean_acceptance_length": 1.9, "per_posi'
    'tion": [0.9], "ttft_s": 0.1}, {"k": 1, "method": "mtp", "profile": "mtp@mtp-k1", "concurrency": 8, "requ'
    'ests": 8, "tokens": 2048, "seconds": 6.4, "tokens_per_s": 320.0, "mean_acceptance_length": 1.85, "per_po'
    'sition": [0.85], "ttft_s": null}, {"k": 2, "method": "mtp", "profile": "mtp@mtp-k2", "concurrency": null'
    ', "tokens_per_s": null, "error": "vLLM exited: <!channel>", "failed_step": "7. start vLLM"}, {"k": 3, "m'
    'ethod": "mtp", "profile": "mtp@mtp-k3", "concurrency": 1, "requests": 2, "tokens": 512, "seconds": 12.8,'
    ' "tokens_per_s": 40.0, "mean_acceptance_length": 2.1, "per_position": [0.7, 0.3, null], "ttft_s": 0.12},'
    ' {"k": null, "method": "none", "profile": "mtp@none", "concurrency": 1, "requests": 2, "tokens": 512, "s'
    'econds": 16.0, "tokens_per_s": 32.0, "mean_acceptance_length": null, "per_position": [], "ttft_s": 0.05}'
    '], "recommended": {"k": 1, "method": "mtp", "concurrency": 1, "tokens_per_s": 50.0, "gain": 1.25, "gain_'
    'over_none": 1.562, "gain_over_reference": null}, "best_under_load": [{"concurrency": 8, "method": "mtp", '
    '"k": 1, "tokens_per_s": 320.0}], "baseline": {"method": "none", "tokens_per_s": 32.0, "source": "measured'
    '", "label": "no speculation (measured)"}, "current": {"profile": '
    '"mtp", "method": "mtp", "k": 3, "tokens_per_s": 40.0}, "profile_change": {"profile": "mtp", "from": {"me'
    'thod": "mtp", "num_speculative_tokens": 3}, "to": {"method": "mtp", "num_speculative_tokens": 1}, "yaml"'
    ': "profiles:\\n  mtp:\\n    method: mtp\\n    num_speculative_tokens: 1"}, "previous": "mtp", "restored": {'
    '"profile": "mtp", "status": "redeployed", "message": "Deployed mtp"}, "cancelled": false, "interrupted":'
    ' false, "duration_s": 3.0, "reference": null, "by_concurrency": [], "per_load": null, "cautions": []}'
)

PLAN_JSON = (
    '{"host": "a6000", "profile": "mtp", "settings": ["mtp k=1", "mtp k=2", "mtp k=3", "none"], "skipped": [{'
    '"method": "dflash", "k": 1, "reason": "dflash needs a drafter; profile mtp names none"}, {"method": "dfl'
    'ash", "k": 2, "reason": "dflash needs a drafter; profile mtp names none"}], "concurrency": [1, 8], "requ'
    'ests": 4, "keep_best": false}'
)


SKIPPED = tuple(Skipped("dflash", k, "dflash needs a drafter; profile mtp names none") for k in (1, 2))
SHIPPED = "the shipped prompt set (bot/app/tuning/tune_prompts.yaml)"


def tune_result(**changes: Any) -> TuneResult:
    fields: dict[str, Any] = dict(
        host="a6000", profile="mtp", settings=("mtp k=1", "mtp k=2", "mtp k=3", "none"), skipped=SKIPPED,
        concurrency=(1, 8), requests=4, workload=WorkloadUsed(SHIPPED, 6, 256),
        results=(Measured("mtp", 1, "mtp@mtp-k1", 1, 2, 512, 10.24, 50.0, 1.9, (0.9,), 0.1),
                 Measured("mtp", 1, "mtp@mtp-k1", 8, 8, 2048, 6.4, 320.0, 1.85, (0.85,), None),
                 Failed("mtp", 2, "mtp@mtp-k2", "vLLM exited: <!channel>", "7. start vLLM"),
                 Measured("mtp", 3, "mtp@mtp-k3", 1, 2, 512, 12.8, 40.0, 2.1, (0.7, 0.3, None), 0.12),
                 Measured("none", None, "mtp@none", 1, 2, 512, 16.0, 32.0, None, (), 0.05)),
        recommended=Recommendation("mtp", 1, 1, 50.0, 1.25, 1.562), best_under_load=(BestAt(8, "mtp", 1, 320.0),),
        baseline=Baseline(32.0, "measured"), current=Current("mtp", "mtp", 3, 40.0),
        profile_change=ProfileChange("mtp", SpecSetting("mtp", 3), SpecSetting("mtp", 1),
                                     "profiles:\n  mtp:\n    method: mtp\n    num_speculative_tokens: 1"),
        previous="mtp", restored=Restored("mtp", "redeployed", "Deployed mtp"), cancelled=False, interrupted=False,
        duration_s=3.0)
    return TuneResult(**{**fields, **changes})


def tune_plan() -> TunePlan:
    return TunePlan("a6000", "mtp", ("mtp k=1", "mtp k=2", "mtp k=3", "none"), SKIPPED, (1, 8), 4, False)


def fleet_line(instance: str, verdict: str = "failing", title: str = "DFlash reads the wrong layers",
               host: str | None = "a6000", profile: str | None = "dflash-0.20.1") -> FleetLine:
    bad = verdict != "healthy"
    report = Report(
        verdict=verdict, headline=("Failing: DFlash reads the wrong layers · mean acceptance length 1.07" if bad
                                   else "Healthy: mean acceptance length 3.60"),
        metrics=MetricsOut(mean_acceptance_length=1.07 if bad else 3.6,
                           per_position=[0.07, 0.0, 0.0] if bad else [0.9, 0.8, 0.7, 0.6]),
        findings=[Finding(id="dflash-layer-offset", title=title, severity="critical", confidence="high",
                          upstream=[Upstream(repo="vllm-project/vllm", number=40727, state="merged",
                                             url="https://github.com/vllm-project/vllm/pull/40727")])] if bad else
        [Finding(id="healthy", title="Speculative decoding is healthy", severity="info", confidence="high")])
    metrics = (FleetMetrics(1.07, (0.07, 0.0, 0.0), 1235, 12.35, 1.0, 0.0, 0.1235, True) if bad else
               FleetMetrics(3.6, (0.9, 0.8, 0.7, 0.6), 500, 80.0, 2.0, 1.0, None, True))
    labels = {"job": "vllm", "model_name": "Qwen"} if bad else {"job": "vllm"}
    return FleetLine(instance, labels, report, metrics, host, profile)


def fleet_report(lines: tuple[FleetLine, ...] | None = None) -> FleetReport:
    lines = lines if lines is not None else (fleet_line("127.0.0.1:8000"),
                                             fleet_line("127.0.0.1:8001", "healthy", host=None, profile=None))
    return FleetReport("http://prom:9090", 'job="vllm"', 3600.0, "1 h", lines,
                       FleetTotals(2, {"failing": 1, "healthy": 1}, 92.35, 1.799, 1735))


def checks() -> tuple[Check, ...]:
    return (Check("devices", "/dev/nvidia* present", "failed", ["ls: cannot access \'/dev/nvidia0\'"],
                  "bind the GPUs to nvidia:\necho 0000:01:00.0 > /sys/bus/pci/drivers/vfio-pci/unbind",
                  "nvidia-smi-no-devices"),
            Check("shm", "/dev/shm large enough", "warn", ["shm: 64 MiB"], "--shm-size 16g", "nccl-dev-shm-too-small"),
            Check("port", "port 8000 free", "ok", ["free"]), Check("uvm", "nvidia-uvm", "skipped"))


def doctor_report(found: tuple[Check, ...] | None = None) -> DoctorReport:
    return DoctorReport("a6000", "dflash-0.20.1", checks() if found is None else found, "pve")


@pytest.mark.parametrize(("result", "pinned"), [
    (tune_result(), TUNE_JSON), (tune_plan(), PLAN_JSON), (fleet_report(), FLEET_JSON),
    (doctor_report(), DOCTOR_JSON),
], ids=["tune", "plan", "fleet", "doctor"])
def test_the_json_is_the_contract_to_the_byte(result: Any, pinned: str) -> None:
    assert json.dumps(result.as_json(), ensure_ascii=False) == pinned
    render = {TuneResult: render_tune, TunePlan: render_tune, FleetReport: render_fleet,
              DoctorReport: render_doctor}[type(result)]
    assert render(result, "json").text == json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n"


def slack_payload(rendered: Rendered) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads(rendered.text)
    assert set(payload) == {"text", "blocks"} and len(payload["blocks"]) <= SLACK_MAX_BLOCKS
    for block in payload["blocks"]:
        texts = [block.get("text") or {}, *block.get("elements", [])]
        assert all(len(t.get("text", "")) <= SLACK_MAX_SECTION for t in texts), block
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= 150
    return payload


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_result_renders_in_every_medium(fmt: Format) -> None:
    for result, render in ((tune_result(), render_tune), (tune_plan(), render_tune), (fleet_report(), render_fleet),
                           (doctor_report(), render_doctor)):
        out = render(result, fmt)
        assert isinstance(out, Rendered) and out.text.endswith("\n")
        if fmt == "slack":
            assert slack_payload(out)["text"] == result.headline


def test_tune_in_text_and_markdown() -> None:
    result = tune_result()
    text = render_tune(result, "text").text
    assert text.startswith("specops tune · mtp on a6000\n\nsetting               concurrency  tok/s ")
    assert "\nno speculation (k=0)  1            32.0 " in text  # k = 0 named for what it is
    assert "mtp k=2               —            failed  at 7. start vLLM" in text
    assert "skipped dflash k=1: dflash needs" in text and "Every row is measured in this sweep" in text
    assert "tok/s: generated tokens over the rounds' wall time; acceptance: the server's /metrics counters" in text
    assert ("Recommended: mtp k=1 — 50.0 tok/s at concurrency 1: 1.25x the current setting (mtp k=3: 40.0 tok/s, "
            "measured in this sweep at concurrency 1); 1.56x no speculation (measured: 32.0 tok/s in this sweep at "
            "concurrency 1)") in text
    assert "  under load (concurrency 8): best mtp k=1, 320.0 tok/s" in text
    assert "    num_speculative_tokens: 1" in text and text.endswith("Afterwards: redeployed mtp — Deployed mtp\n")
    md = render_tune(result, "md").text
    assert md.startswith("# specops tune · mtp on a6000")
    assert "| mtp k=3 | 1 | 40.0 | 2.10 | 0.70 0.30 — | 0.120 |" in md
    assert "**Recommended: mtp k=1" in md and "```yaml\nprofiles:" in md and "- skipped dflash k=2" in md
    kept = render_tune(tune_result(profile_change=None), "text").text
    assert "The profile already has the best setting: no change." in kept
    none = render_tune(tune_result(recommended=None, profile_change=None, cancelled=True), "text").text
    assert none.startswith("specops tune · mtp on a6000 · cancelled") and "No setting could be measured" in none


def test_tune_in_slack_has_the_table_the_change_and_no_markup_from_the_host() -> None:
    payload = slack_payload(render_tune(tune_result(), "slack"))
    kinds = [b["type"] for b in payload["blocks"]]
    assert kinds == ["header", "section", "section", "section", "section", "context"]
    summary, table, under_load, change = (b["text"]["text"] for b in payload["blocks"][1:5])
    assert under_load.startswith("  under load (concurrency 8)")
    assert summary.startswith("*Recommended: mtp k=1") and table.startswith("```setting")
    assert "vLLM exited: &lt;!channel&gt;" in table and "<!channel>" not in json.dumps(payload)
    assert change.startswith("*The profile change to make*\n```profiles:")
    long = tune_result(results=tuple(Failed("mtp", k, f"mtp@mtp-k{k}", "x" * 300, None) for k in range(1, 65)))
    slack_payload(render_tune(long, "slack"))  # cut to Slack's limits


def test_the_plan_says_what_would_run_and_that_nothing_did() -> None:
    plan = tune_plan()
    assert plan.headline == "Plan: tune mtp on a6000 — 4 settings, each deployed and measured"
    assert plan.steps[0] == "would deploy and measure mtp k=1" and plan.steps[-1].startswith("then restore")
    text = render_tune(plan, "text").text
    assert "nothing ran" in text and "  skipped dflash k=1: dflash needs a drafter" in text
    assert "- would deploy and measure none" in render_tune(plan, "md").text
    blocks = slack_payload(render_tune(plan, "slack"))["blocks"]
    assert blocks[1]["text"]["text"].startswith(":clipboard: *Plan* (nothing ran")


def test_the_fleet_worst_first_with_its_totals() -> None:
    result = fleet_report()
    assert result.verdict == "failing" and result.headline == "Fleet: 1 failing, 1 healthy (2 instances, last 1 h)"
    md = render_fleet(result, "md").text
    assert md.startswith("# Fleet · http://prom:9090 · last 1 h · {job=\"vllm\"}")
    assert ("| ✖ | 127.0.0.1:8000 | failing | 1.07 | 0.07, 0.00, 0.00 | 12.3 | DFlash reads the wrong layers "
            "(vLLM #40727) |") in md
    assert "2 instance(s): 1 failing, 1 healthy · mean acceptance length 1.80 over 1735 drafts · 92.3" in md
    text = render_fleet(result, "text").text
    assert "✔ 127.0.0.1:8001  healthy   mean 3.60  [0.90, 0.80, 0.70, …]  80.0 tok/s  Speculative" in text
    empty = FleetReport("http://p", "", 60.0, "1 min", (), FleetTotals(0, {}, None, None, 0))
    assert empty.verdict == "unknown" and "(no vLLM instance matches)" in render_fleet(empty, "text").text
    assert empty.headline == "Fleet: no vLLM instance (0 instances, last 1 min)"


def test_the_fleet_in_slack_fits_its_limits_and_escapes_labels() -> None:
    hostile = fleet_line("127.0.0.1:8009", title="<!here> & co")
    many = fleet_report((*(fleet_line(f"127.0.0.1:{10_000 + i}") for i in range(80)), hostile))
    payload = slack_payload(render_fleet(many, "slack"))
    assert len(payload["blocks"]) == SLACK_MAX_BLOCKS
    assert payload["blocks"][-1]["elements"][0]["text"].startswith("… and 34 more")
    shown = slack_payload(render_fleet(fleet_report((hostile,)), "slack"))
    assert "&lt;!here&gt; &amp; co" in json.dumps(shown) and "<!here>" not in json.dumps(shown)


def test_the_doctor_in_every_medium() -> None:
    result = doctor_report()
    assert result.status == "failed" and result.verdict == "failing"
    assert result.headline == "a6000: not ready — /dev/nvidia* present"
    text = render_doctor(result, "text").text
    assert text.startswith("specops doctor · a6000 (Proxmox host pve) · failed\n\n✖ failed  /dev/nvidia* present")
    assert "    fix:  bind the GPUs to nvidia:\n          echo 0000:01:00.0" in text
    assert "    more: specops kb show nvidia-smi-no-devices" in text and "· skipped nvidia-uvm" in text
    md = render_doctor(result, "md").text
    assert "- **warn** /dev/shm large enough (`shm`)" in md and "  - seen: `shm: 64 MiB`" in md
    payload = slack_payload(render_doctor(result, "slack"))
    body = json.dumps(payload, ensure_ascii=False)
    assert "echo 0000:01:00.0 &gt; /sys/bus/pci/drivers/vfio-pci/unbind" in body and "1 of 4 checks ok" in body
    ok = doctor_report((Check("port", "port 8000 free", "ok", ["free"]),))
    assert ok.status == "ok" and ok.headline == "a6000: ready (1 checks)" and ok.problems == ()
    warned = doctor_report((Check("shm", "shm", "warn", ["64 MiB"]),))
    assert warned.verdict == "degraded" and warned.headline == "a6000: ready (1 checks, with warnings)"


def test_the_doctor_in_slack_fits_however_many_checks_fail() -> None:
    many = doctor_report(tuple(Check(f"c{i}", f"check {i}", "failed", ["<seen>" * 100] * 8, "fix " * 500)
                               for i in range(40)))
    payload = slack_payload(render_doctor(many, "slack"))
    assert "… and 17 more problem(s)" in payload["blocks"][-1]["elements"][0]["text"]
    assert "<seen>" not in json.dumps(payload)


def test_charts_are_png_bytes_and_the_file_writers_wrap_them(logs: Path, tmp_path: Path) -> None:
    from bot.app.diagnosis.diagnose import diagnose_parsed
    from bot.core.logparse import parse_text
    from bot.core.triage.context import Flags

    report = diagnose_parsed(parse_text(logs.joinpath("brief-dflash-line.log").read_text()),
                             Flags(vllm_version="0.20.1", method="dflash", num_speculative_tokens=15))
    png = acceptance_png(report)
    assert png.startswith(PNG) and len(png) > 1000
    written = write_png(png, tmp_path / "sub" / "acceptance")  # exactly the name given, its folder made
    assert written == tmp_path / "sub" / "acceptance" and written.read_bytes().startswith(PNG)
    tune = tune_png(tune_result())
    assert tune.startswith(PNG) and len(tune) > 1000
    assert tune_png(tune_result(results=(), recommended=None)).startswith(PNG)  # nothing measured: an empty chart
