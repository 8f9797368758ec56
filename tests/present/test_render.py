"""Report renderings: golden Markdown and Slack, the JSON contract, Slack's limits, rich escaping."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from bot.app.diagnosis.diagnose import diagnose_parsed
from bot.core.logparse import parse_text
from bot.core.report import Report
from bot.core.triage.context import Flags
from bot.core.triage.findings import Finding
from bot.present.render import render
from bot.present.rendered import SLACK_MAX_BLOCKS, SLACK_MAX_SECTION

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
BRIEF = Flags(vllm_version="0.20.1", method="dflash", drafter="z-lab/Qwen3.6-27B-DFlash", num_speculative_tokens=15,
              baseline_tps=73.5, host="a6000")
MTP = Flags(method="mtp", baseline_tps=73.5, host="a6000")


def report_for(logs: Path, name: str, flags: Flags) -> Report:
    return diagnose_parsed(parse_text(logs.joinpath(name).read_text()), flags)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("SPECOPS_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with SPECOPS_UPDATE_GOLDEN=1"
    assert text == path.read_text()


@pytest.mark.parametrize(("log", "flags", "stem"), [
    ("brief-dflash-line.log", BRIEF, "brief"),
    ("mtp-0.20.1-healthy.log", MTP, "mtp-healthy"),
])
def test_golden_markdown_and_slack(logs: Path, log: str, flags: Flags, stem: str) -> None:
    report = report_for(logs, log, flags)
    check_golden(f"{stem}.md", render(report, "md").text)
    slack = render(report, "slack")
    check_golden(f"{stem}.slack.json", slack.text)
    payload = json.loads(slack.text)
    assert len(payload["blocks"]) <= SLACK_MAX_BLOCKS and payload["text"] == report.headline
    assert slack.attachments == []


def test_json_contract(logs: Path) -> None:
    data = json.loads(render(report_for(logs, "brief-dflash-line.log", BRIEF), "json").text)
    assert data["verdict"] in ("healthy", "degraded", "failing", "unknown")
    assert set(data["metrics"]) >= {"mean_acceptance_length", "per_position", "avg_draft_acceptance_rate",
                                    "accepted", "drafted", "samples"}
    for f in data["findings"]:
        assert set(f) >= {"id", "title", "severity", "confidence", "evidence", "upstream", "remediation"}
        assert f["severity"] in ("critical", "warning", "info") and f["confidence"] in ("high", "medium", "low")
        for u in f["upstream"]:
            assert set(u) >= {"repo", "number", "url", "state"}
            assert u["url"].startswith("https://github.com/")
    assert isinstance(data["context"], dict) and data["context"]["vllm_version"] == "0.20.1"


def test_slack_limits_move_overflow_to_an_attachment(logs: Path) -> None:
    report = report_for(logs, "brief-dflash-line.log", BRIEF)
    report.findings += [
        Finding(id=f"x{i}", title=f"extra {i}", severity="info", confidence="low", summary="s" * 3500,
                evidence=["e" * 100] * 5, remediation=["r"])
        for i in range(30)
    ]
    out = render(report, "slack")
    blocks = json.loads(out.text)["blocks"]
    assert len(blocks) == SLACK_MAX_BLOCKS
    for b in blocks:
        assert len(b.get("text", {}).get("text", "")) <= SLACK_MAX_SECTION
    assert out.attachments and out.attachments[0][0] == "specops-report.md"
    assert "extra 29" in out.attachments[0][1]


def test_slack_and_rich_escape_hostile_text(logs: Path) -> None:
    report = report_for(logs, "brief-dflash-line.log", BRIEF)
    report.findings[0].evidence.append("<!channel> [bold red]not markup[/] & `tick`")
    slack = json.loads(render(report, "slack").text)
    assert "<!channel>" not in json.dumps(slack) and "&lt;!channel&gt;" in json.dumps(slack)
    text = render(report, "text").text
    assert r"\[bold red]not markup" in text  # rich markup escaped


def test_a_failing_diagnosis_whose_steps_ran_does_not_say_ok_and_a_step_keeps_its_name_apart() -> None:
    # issue 38: `status` printed "Diagnose … : ok" under "Failing", and "drafter config layer_types mixed …"
    from bot.core.report import MetricsOut, OperationOut, Report, StepResult
    from bot.present.render import render

    op = OperationOut(kind="diagnose", host="a6000", profile="dflash-0.20.1", status="ok",
                      steps=[StepResult(index=5, name="drafter config", kind="run", status="ok",
                                     message="layer_types mixed sliding/full")])
    report = Report(verdict="failing", headline="Failing: the drafter", metrics=MetricsOut(), findings=[],
                    operation=op, context={"host": "a6000", "version_label": "0.20.1", "version_text": "0.20.1"})
    for fmt in ("text", "md", "slack"):
        text = render(report, fmt).text  # type: ignore[arg-type]
        assert "every step ran" in text and "a6000: ok" not in text and "a6000`: ok" not in text, fmt
    assert "drafter config [dim]— layer_types mixed" in render(report, "text").text  # plain text keeps the dash


@pytest.mark.parametrize("fmt", ["text", "md", "slack"])
def test_the_health_line_sets_the_reference_beside_one_requests_speed_not_the_batch_generation(fmt: str) -> None:
    """Issue 38: one server read "generation 2.0 tok/s while busy (reference 73.5)" beside 71.8 tok/s for one
    request: the reference (baseline_tps) is one request's speed, so it stands beside that one, whatever the
    log's partly idle intervals average to."""
    from bot.core.results.health import HealthOut, HealthReport

    health = HealthOut(period="the last 24 h", samples=22, up_now=True, up_fraction=1.0, requests=40, gen_tps=2.0,
                       single_tps=71.8, baseline_tps=73.5, mean_acceptance=3.5)
    report = HealthReport("h1", "Health report h1", health, diagnose_parsed(parse_text(""), Flags(method="mtp")))
    out = render(report, fmt)  # type: ignore[arg-type]
    text = out.text if fmt != "slack" else json.dumps(json.loads(out.text))
    assert "one request 71.8 tok/s (reference 73.5)" in text, text
    assert "while busy (reference" not in text and "while busy vs the reference" not in text
    no_single = replace(report, health=health.model_copy(update={"single_tps": None}))
    assert "the reference 73.5 tok/s is one request's" in render(no_single, fmt).text  # type: ignore[arg-type]


def test_a_health_report_is_its_own_result_with_the_diagnosis_under_its_period() -> None:
    from bot.core.results.health import HealthOut, HealthReport

    health = HealthOut(period="the last 24 h", samples=3, up_now=False)
    dx = diagnose_parsed(parse_text(""), Flags(method="mtp"))
    report = HealthReport("h1", "Health report h1 (the last 24 h): DOWN", health, dx)
    data = json.loads(render(report, "json").text)
    assert set(data) == {"host", "headline", "health", "diagnosis"}
    assert data["health"]["samples"] == 3 and data["diagnosis"]["verdict"] == dx.verdict
    assert "health" not in data["diagnosis"]  # a diagnosis has no health field
    md = render(report, "md").text
    assert md.index("Health over the last 24 h") < md.index("Verdict")
    assert "Health report h1" in md and "Health over" not in render(dx, "md").text


def test_every_result_type_has_one_presenter() -> None:
    """The table names each result type of core/results and the diagnosis once, and each module it names holds
    a PRESENTER: a new result is its presenter module and one line there."""
    import importlib
    import inspect
    import pkgutil

    import bot.core.results as results
    from bot.present.presenter import Presenter
    from bot.present.render import PRESENTERS

    shown = set(PRESENTERS)
    for info in pkgutil.iter_modules(results.__path__):
        module = importlib.import_module(f"bot.core.results.{info.name}")
        for name, obj in inspect.getmembers(module, inspect.isclass):
            if obj.__module__ == module.__name__ and f"{module.__name__}.{name}" in shown:
                shown.discard(f"{module.__name__}.{name}")
    assert shown == {"bot.core.report.Report"}
    for module_name in set(PRESENTERS.values()):
        assert isinstance(importlib.import_module(module_name).PRESENTER, Presenter)
    with pytest.raises(TypeError, match="no renderer for"):
        render(object(), "md")


def test_a_health_report_posts_its_diagnosis_chart_and_files_and_an_old_template_says_what_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC, datetime

    from bot.app.chat import outcome_of
    from bot.core.results.health import HealthOut, HealthReport
    from bot.errors import ConfigError
    from bot.present.render import files_of

    line = ("INFO 01-08 23:07:23 [metrics.py:100] SpecDecoding metrics: Mean acceptance length: 1.50, Accepted: 50 "
            "tokens, Drafted: 300 tokens, Per-position acceptance rate: 0.300, 0.150, 0.050\n")
    dx = diagnose_parsed(parse_text(line * 3), Flags(method="mtp"))
    report = HealthReport("h1", "Health report h1", HealthOut(period="p", samples=3), dx)
    now = datetime(2026, 12, 6, tzinfo=UTC)
    names = [f[0] for f in files_of(report, render(report, "slack"), now)]
    assert names == [f[0] for f in files_of(dx, render(dx, "slack"), now)] and names
    assert outcome_of(report) == (dx.verdict, "Health report h1")
    old = tmp_path / "templates"
    old.mkdir()
    for f in (Path(__file__).resolve().parents[2] / "templates").glob("report.*.j2"):
        (old / f.name).write_text(f.read_text().replace("{% if h %}", "{% if r.health %}"))
    monkeypatch.setenv("SPECOPS_TEMPLATES", str(old))
    with pytest.raises(ConfigError, match="now `h`"):
        render(dx, "md")
