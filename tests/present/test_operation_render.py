"""A stop's own result (`OperationResult`): its steps in every medium from the same templates a diagnosis shows them
with, its notes, no verdict (a stop judges no server), a failed step's long output beside it, and a clear error for a
copy of the templates from before it had its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.core.report import OperationOut, StepResult
from bot.core.results.operation import OperationResult
from bot.present.render import files_of, render, short_text
from bot.present.summary import summary_of


def stopped(status: str = "changed", output: int = 0) -> OperationResult:
    step = StepResult(1, "stop the server", "stop", status,  # type: ignore[arg-type]
                      message="stopped PID 4242 (SIGTERM)" if status == "changed" else "PID 4242 survived SIGKILL",
                      output=[f"line {i}" for i in range(output)])
    op = OperationOut(kind="stop", host="a6000", profile="mtp", status=status,  # type: ignore[arg-type]
                      message=step.message, steps=[step], duration=1.5,
                      failed_step="1. stop the server" if status == "failed" else None)
    return OperationResult(op, f"Stop on a6000: {step.message}", notes=["took over the lock of a6000: holder gone"])


def test_a_stop_shows_its_steps_and_notes_and_no_verdict_in_every_medium() -> None:
    result = stopped()
    md = render(result, "md").text
    assert md.startswith("# ✅ Stop on a6000: stopped PID 4242") and "**Stop** `mtp` on `a6000`: **changed**" in md
    assert "| 1 | stop the server | changed |" in md and "> note: took over the lock of a6000" in md
    text = render(result, "text").text
    assert "Stop mtp on a6000: changed" in text and "note: took over the lock" in text
    for out in (md, text):
        assert "Verdict" not in out and "unknown" not in out
    payload = json.loads(render(result, "slack").text)
    assert payload["text"] == result.headline and payload["blocks"][0]["type"] == "header"
    assert payload["blocks"][1]["text"]["text"].startswith(":white_check_mark: *Stop `mtp` on `a6000`: changed*")
    assert any(b["type"] == "context" and "took over the lock" in b["elements"][0]["text"] for b in payload["blocks"])


def test_its_json_keeps_the_operation_and_an_empty_diagnosis_apart() -> None:
    data = json.loads(render(stopped(), "json").text)
    assert set(data) == {"headline", "operation", "notes", "diagnosis"} and data["diagnosis"] is None
    assert data["operation"]["kind"] == "stop" and data["operation"]["steps"][0]["status"] == "changed"


def test_a_failed_stop_says_so_everywhere_and_posts_its_long_output_beside_it() -> None:
    result = stopped("failed", output=20)
    assert result.failed and render(result, "md").text.startswith("# 🛑 ")
    assert summary_of(result) == (":x:", "failed at step 1: stop the server")
    files = files_of(result, render(result, "slack"))
    assert [name for name, _, _ in files] == ["step-output.log"]
    assert "Fix what the failed step reports" in short_text(result, "specops stop --host a6000")


def test_a_done_stop_reads_as_stopped() -> None:
    assert summary_of(stopped()) == (":white_check_mark:", "stopped")


def test_a_copy_of_the_templates_without_the_operations_own_takes_the_shipped_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "report.md.j2").write_text("{{ r.headline }}\n")
    monkeypatch.setenv("SPECOPS_TEMPLATES", str(tmp_path))
    assert "**Stop** `mtp` on `a6000`: **changed**" in render(stopped(), "md").text
    (tmp_path / "operation.md.j2").write_text("custom: {{ op.kind }}\n")  # the copy's own wins where it has one
    assert "custom: stop" in render(stopped(), "md").text


def test_a_failed_stops_long_lines_stay_within_slacks_limits_with_the_whole_attached() -> None:
    result = stopped("failed")
    result.operation.steps[0].output = ["x" * 400] * 12  # under the file threshold, over a section's limit
    out = render(result, "slack")
    payload = json.loads(out.text)
    assert all(len((b.get("text") or {}).get("text", "")) <= 3000 for b in payload["blocks"])
    assert [name for name, _ in out.attachments] == ["specops-report.md"]
