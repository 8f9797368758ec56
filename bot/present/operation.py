"""What an operation did (`OperationResult`: a stop) in every medium: its steps from the templates the diagnosis also
shows them with (templates/operation.*.j2), then the diagnosis when it judged the server; no verdict of its own."""

from __future__ import annotations

import json
from typing import Any

from bot.core.results.operation import OperationResult
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
    if fmt == "md":
        head = f"# {_ICON.get(status, '✅')} {result.headline}\n\n"
    else:
        colour = "red" if result.failed else "green"
        head = f"[bold {colour}]{env.filters['rich'](result.headline)}[/]\n"
    rich = env.filters["rich"]
    notes = "".join(f"> note: {n}\n" if fmt == "md" else f"[dim]note: {rich(n)}[/]\n" for n in result.notes)
    tail = render_report(result.diagnosis, fmt).text if result.diagnosis is not None else ""
    return Rendered(head + steps + ("\n" + notes if notes else "") + ("\n" + tail if tail else ""))


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
    icon = _SLACK_ICON.get(result.operation.status, ":white_check_mark:")
    blocks[1]["text"]["text"] = f"{icon} " + blocks[1]["text"]["text"]
    blocks, cut = within_slack_limits(blocks)
    attachments = [("specops-report.md", render_operation(result, "md").text)] if cut else []
    return Rendered(json.dumps({"text": result.headline, "blocks": blocks}, indent=2, ensure_ascii=False) + "\n",
                    attachments)


def _next_step(result: OperationResult) -> str | None:
    return "Fix what the failed step reports, then run the same command again." if result.failed else None


PRESENTER: Presenter[OperationResult] = Presenter(render_operation, next_step=_next_step,
                                                  files=lambda r: failed_step_files(r.operation),
                                                  host=lambda r: r.operation.host)
