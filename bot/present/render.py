"""Renderings of a use case's result: Markdown, rich text, Slack Block Kit (with its limits) and JSON.

`render(result, fmt)` picks the renderer by the result's type, so the console, the CLI and Slack show the
same thing: a diagnosis `Report` here (via Jinja2; its JSON form is the stable contract of
`Report.contract()`, the other forms come from `templates/`, which operators may edit — SPECOPS_TEMPLATES
points elsewhere), a tune, fleet or doctor result in present/tune.py, fleet.py, doctor.py.
"""

from __future__ import annotations

import json
from typing import Any

from bot.core.report import Report
from bot.present.chat_syntax import chat_syntax
from bot.present.rendered import SLACK_MAX_BLOCKS, SLACK_MAX_SECTION, Format, Rendered

__all__ = ["SLACK_MAX_BLOCKS", "SLACK_MAX_SECTION", "Format", "Rendered", "chart_of", "files_of", "render",
           "render_report", "short_text", "verdict_of"]


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


def render(result: object, fmt: Format) -> Rendered:
    """Any use case's result in `fmt`, by its type. A new result type adds its line here."""
    if isinstance(result, Report):
        return render_report(result, fmt)
    # the other result types are imported when one is shown: a diagnosis (the common case) loads none of them
    from bot.core.results.doctor import DoctorReport
    from bot.core.results.fleet import FleetReport
    from bot.core.results.notice import Notice
    from bot.core.results.tune import TunePlan, TuneResult

    if isinstance(result, TuneResult | TunePlan):
        from bot.present.tune import render_tune

        return render_tune(result, fmt)
    if isinstance(result, FleetReport):
        from bot.present.fleet import render_fleet

        return render_fleet(result, fmt)
    if isinstance(result, DoctorReport):
        from bot.present.doctor import render_doctor

        return render_doctor(result, fmt)
    if isinstance(result, Notice):
        return _render_notice(result.text, fmt)
    raise TypeError(f"no renderer for {type(result).__name__}")


def short_text(result: object, more: str) -> str:
    """A few lines, not the whole report (`status` at a prompt): the headline, the first thing to do, and the
    command (`more`) that shows the rest."""
    from bot.present.chat_syntax import chat_syntax

    headline = str(getattr(result, "headline", ""))
    lines = [headline]
    if isinstance(result, Report):
        first = result.findings[0] if result.findings else None
        if first is not None and first.remediation:
            lines.append(f"  next: {chat_syntax(first.remediation[0], prefix='')}")
    lines.append(f"  (`{more}` for the whole report)".replace("`", "'"))
    return "\n".join(lines)


def chart_of(result: object) -> bytes | None:
    """The result's chart as PNG bytes, if it has one (a diagnosis: per-position acceptance; a tune: tok/s
    against k)."""
    from bot.present import charts

    if isinstance(result, Report):
        return charts.acceptance_png(result) if result.metrics.per_position else None
    from bot.core.results.tune import TuneResult

    if isinstance(result, TuneResult):
        return charts.tune_png(result)
    return None


def verdict_of(result: object) -> str:
    """healthy | degraded | failing | unknown: a diagnosis's verdict, else the result's own, else unknown."""
    return str(getattr(result, "verdict", None) or "unknown")


def files_of(result: object, rendered: Rendered) -> list[tuple[str, bytes, str]]:
    """What goes beside a posted result as files: (name, content, title) — its chart, the full report when the
    message had to be cut, a failed step's long output."""
    files: list[tuple[str, bytes, str]] = []
    chart = chart_of(result)
    if chart is not None:
        name, title = ("acceptance.png", "Per-position acceptance") if isinstance(result, Report) else (
            "tune.png", "tok/s by setting")
        files.append((name, chart, title))
    files += [(name, content.encode(), "Full report") for name, content in rendered.attachments]
    op = result.operation if isinstance(result, Report) else None
    failed = next((s for s in op.steps if s.status == "failed"), None) if op else None
    if failed and len(failed.output) > 15:
        files.append(("step-output.log", "\n".join(failed.output).encode(), f"Output of step {failed.index}"))
    return files


def _render_notice(text: str, fmt: Format) -> Rendered:
    if fmt == "json":
        return Rendered(json.dumps({"notice": text}, ensure_ascii=False) + "\n")
    if fmt == "slack":
        return Rendered(json.dumps({"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn",
                                                                                         "text": text}}]}) + "\n")
    return Rendered(text + "\n")


def render_report(report: Report, fmt: Format) -> Rendered:
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
    attachments = [("specops-report.md", render_report(report, "md").text)] if cut else []
    return Rendered(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", attachments)
