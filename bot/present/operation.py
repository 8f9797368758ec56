"""What an operation did (`OperationResult`: a deploy, a stop) in every medium: its steps from the templates
(templates/operation.*.j2), then the diagnosis when it judged the server (a deploy's triage); no verdict of its own."""

from __future__ import annotations

import json
from typing import Any

from bot.core.results.operation import OperationResult
from bot.present import diagnosis as judged
from bot.present.chat_syntax import chat_syntax
from bot.present.diagnosis import failed_step_files, render_report, template_env
from bot.present.presenter import Presenter
from bot.present.rendered import Format, Rendered, within_slack_limits

_ICON = {"failed": "🛑", "refused": "🛑", "planned": "📋"}
_SLACK_ICON = {"failed": ":octagonal_sign:", "refused": ":octagonal_sign:", "planned": ":clipboard:"}


def render_operation(result: OperationResult, fmt: Format) -> Rendered:
    if fmt == "json":
        return Rendered(json.dumps(result.contract(), indent=2, ensure_ascii=False) + "\n")
    env = template_env()  # an operator's copy without the operation's templates takes the shipped ones
    if fmt == "slack":
        return _slack(result, env)
    steps = env.get_template(f"operation.{'md' if fmt == 'md' else 'txt'}.j2").render(op=result.operation)
    status = result.operation.status
    # a deploy that ran is judged by its diagnosis: up with a failing speculation never reads as a green tick
    verdict = result.diagnosis.verdict if result.diagnosis is not None and status in ("changed", "unchanged") else None
    if fmt == "md":
        head = f"# {_VERDICT_ICON[verdict] if verdict else _ICON.get(status, '✅')} {result.headline}\n\n"
    else:
        colour = _VERDICT_COLOUR[verdict] if verdict else ("red" if result.failed else "green")
        head = f"[bold {colour}]{env.filters['rich'](result.headline)}[/]\n"
    rich = env.filters["rich"]
    notes = "".join(f"> note: {n}\n" if fmt == "md" else f"[dim]note: {rich(n)}[/]\n" for n in result.notes)
    tail = _below_headline(render_report(result.diagnosis, fmt).text) if result.diagnosis is not None else ""
    return Rendered(head + steps + ("\n" + notes if notes else "") + ("\n" + tail if tail else ""))


_VERDICT_ICON = {"healthy": "✅", "degraded": "⚠️", "failing": "🛑", "unknown": "❔"}
_SLACK_VERDICT = {"healthy": ":white_check_mark:", "degraded": ":warning:", "failing": ":octagonal_sign:",
                  "unknown": ":grey_question:"}
_VERDICT_COLOUR = {"healthy": "green", "degraded": "yellow", "failing": "red", "unknown": "blue"}


def _below_headline(text: str) -> str:
    """The diagnosis under the operation's own headline: its first line (the same headline) once is enough."""
    return text.split("\n", 1)[1].lstrip("\n") if "\n" in text else ""


def _slack(result: OperationResult, env: Any) -> Rendered:
    raw = chat_syntax(env.get_template("operation.slack.j2").render(op=result.operation)).strip()
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "emoji": True,
                                    "text": result.headline[:147] + ("…" if len(result.headline) > 147 else "")}},
        *json.loads("[" + raw.removeprefix(",") + "]")]
    if result.notes:
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": "\n".join(env.filters["slack"](n) for n in result.notes)[:2900]}]})
    if result.diagnosis is not None:
        blocks += json.loads(render_report(result.diagnosis, "slack").text)["blocks"][1:]  # its own header: ours
    status = result.operation.status
    verdict = result.diagnosis.verdict if result.diagnosis is not None and status in ("changed", "unchanged") else None
    icon = _SLACK_VERDICT[verdict] if verdict else _SLACK_ICON.get(status, ":white_check_mark:")
    blocks[1]["text"]["text"] = f"{icon} " + blocks[1]["text"]["text"]
    blocks, cut = within_slack_limits(blocks)
    attachments = [("specops-report.md", render_operation(result, "md").text)] if cut else []
    return Rendered(json.dumps({"text": result.headline, "blocks": blocks}, indent=2, ensure_ascii=False) + "\n",
                    attachments)


def _next_step(result: OperationResult) -> str | None:
    if result.failed:
        return "Fix what the failed step reports, then run the same command again."
    return judged.PRESENTER.next_step(result.diagnosis) if result.diagnosis is not None else None


def _chart(result: OperationResult) -> bytes | None:
    """The acceptance chart of the server a deploy left behind, as its diagnosis has one."""
    return judged.PRESENTER.chart(result.diagnosis) if result.diagnosis is not None else None


def _chart_file(result: OperationResult, now: Any) -> tuple[str, str]:
    assert result.diagnosis is not None  # a chart comes only from a diagnosis
    return judged.chart_file(result.diagnosis, now, result.operation)


PRESENTER: Presenter[OperationResult] = Presenter(render_operation, chart=_chart, chart_file=_chart_file,
                                                  next_step=_next_step,
                                                  files=lambda r: failed_step_files(r.operation),
                                                  host=lambda r: r.operation.host)
