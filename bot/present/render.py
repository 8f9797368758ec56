"""Renderings of a Report: Markdown, rich text, Slack Block Kit (with its limits) and JSON, via Jinja2.

The JSON form is the stable contract of `Report.contract()`; the other forms come from the templates
in `templates/`, which operators may edit (SPECOPS_TEMPLATES points elsewhere).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.core.report import Report
from bot.present.chat_syntax import chat_syntax

Format = Literal["md", "text", "slack", "json"]
SLACK_MAX_BLOCKS = 50
SLACK_MAX_SECTION = 3000


@dataclass
class Rendered:
    text: str
    attachments: list[tuple[str, str]] = field(default_factory=list)  # (file name, content)


def _rich_escape(s: object) -> str:
    from rich.markup import escape  # ~15 ms of imports that only the text template's `rich` filter needs

    return escape(str(s))


def _env() -> Any:
    import jinja2

    from bot.paths import templates_dir

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined, autoescape=False, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["rich"] = _rich_escape
    env.filters["slack"] = lambda s: str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    env.filters["rates"] = lambda xs: ", ".join(f"{x:.3f}" for x in xs)
    env.filters["num"] = lambda x, d=2: "n/a" if x is None else f"{x:.{d}f}"
    env.filters["upstream_ref"] = lambda u: f"{u.repo}#{u.number}"
    return env


def render(report: Report, fmt: Format) -> Rendered:
    if fmt == "json":
        return Rendered(json.dumps(report.contract(), indent=2, ensure_ascii=False) + "\n")
    env = _env()
    if fmt == "slack":
        return _render_slack(report, env)
    name = {"md": "report.md.j2", "text": "report.txt.j2"}[fmt]
    return Rendered(env.get_template(name).render(r=report))


def _render_slack(report: Report, env: Any) -> Rendered:
    raw = chat_syntax(env.get_template("report.slack.j2").render(r=report))
    blocks: list[dict[str, Any]] = json.loads(raw)
    cut = False
    for block in blocks:
        text = block.get("text")
        if isinstance(text, dict) and len(text.get("text", "")) > SLACK_MAX_SECTION:
            text["text"] = text["text"][: SLACK_MAX_SECTION - 40].rstrip() + "\n… (cut: full report attached)"
            cut = True
    if len(blocks) > SLACK_MAX_BLOCKS:
        dropped = len(blocks) - (SLACK_MAX_BLOCKS - 1)
        blocks = blocks[: SLACK_MAX_BLOCKS - 1]
        blocks.append({"type": "context", "elements": [
            {"type": "mrkdwn", "text": f"{dropped} more block(s) in the attached report"}]})
        cut = True
    payload = {"text": report.headline, "blocks": blocks}
    attachments = [("specops-report.md", render(report, "md").text)] if cut else []
    return Rendered(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", attachments)
