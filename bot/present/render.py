"""Renderings of a use case's result: Markdown, rich text, Slack Block Kit (with its limits) and JSON.

`render(result, fmt)` picks the renderer by the result's type, so the console, the CLI and Slack show the
same thing: a diagnosis `Report` here (via Jinja2; its JSON form is the stable contract of
`Report.contract()`, the other forms come from `templates/`, which operators may edit — SPECOPS_TEMPLATES
points elsewhere), a tune, rollout, fleet or doctor result in present/tune.py, rollout.py, fleet.py, doctor.py.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from bot.core.report import Report
from bot.present.chat_syntax import chat_syntax
from bot.present.rendered import SLACK_MAX_BLOCKS, SLACK_MAX_SECTION, Format, Rendered

__all__ = ["SLACK_MAX_BLOCKS", "SLACK_MAX_SECTION", "Format", "Rendered", "chart_of", "file_name", "files_of",
           "history_file_name", "render", "render_report", "short_text", "trend_file", "verdict_of"]

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._]+")


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
    from bot.core.results.rollout import RolloutPlan, RolloutResult
    from bot.core.results.tune import TunePlan, TuneResult

    if isinstance(result, TuneResult | TunePlan):
        from bot.present.tune import render_tune

        return render_tune(result, fmt)
    if isinstance(result, RolloutResult | RolloutPlan):
        from bot.present.rollout import render_rollout

        return render_rollout(result, fmt)
    if isinstance(result, FleetReport):
        from bot.present.fleet import render_fleet

        return render_fleet(result, fmt)
    if isinstance(result, DoctorReport):
        from bot.present.doctor import render_doctor

        return render_doctor(result, fmt)
    from bot.core.results.prelaunch import PrelaunchReport

    if isinstance(result, PrelaunchReport):
        from bot.present.prelaunch import render_prelaunch

        return render_prelaunch(result, fmt)
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
    against k; a rollout: before and after on each host it measured — none when it measured nothing)."""
    from bot.present import charts

    if isinstance(result, Report):
        return charts.acceptance_png(result) if result.metrics.per_position else None
    from bot.core.results.rollout import RolloutResult
    from bot.core.results.tune import TuneResult

    if isinstance(result, TuneResult):
        return charts.tune_png(result)
    if isinstance(result, RolloutResult):
        return charts.rollout_png(result) if any(h.before or h.after for h in result.hosts) else None
    return None


def verdict_of(result: object) -> str:
    """healthy | degraded | failing | unknown: a diagnosis's verdict, else the result's own, else unknown."""
    return str(getattr(result, "verdict", None) or "unknown")


def file_name(kind: str, *parts: object, ext: str = "png") -> str:
    """`kind-part-part.ext` from letters, digits, dots and underscores only (a host or profile name's other
    characters become one `-`): a name that says what the file is and for whom in Slack's file list and
    in a download folder, safe in any file system and URL."""
    safe = (_UNSAFE_NAME.sub("-", str(p)).strip("-.")[:40].strip("-.") for p in parts if p)
    return "-".join([kind, *(p for p in safe if p)]) + "." + ext


def history_file_name(host: str) -> str:
    """The trend chart of `host` (history, the daily health report) as a file: `history-a6000.png`."""
    return file_name("history", host)


def trend_file(result: object) -> tuple[str, str]:
    """The (name, title) of the trend chart posted beside a health report (`history-a6000.png`)."""
    context = result.context if isinstance(result, Report) else {}
    host = context.get("host") or getattr(result, "host", None) or "host"
    return history_file_name(str(host)), f"Acceptance and throughput: {host}"


def _chart_file(result: object, now: datetime) -> tuple[str, str]:
    """The (name, title) of a result's chart: a diagnosis by host, method and when (a channel holds many),
    a tune by host and profile, a rollout by profile and its id."""
    from bot.core.results.rollout import RolloutResult

    if isinstance(result, RolloutResult):
        return (file_name("rollout", result.profile, result.rollout_id),
                f"Before and after on each host: rollout of {result.profile}")
    if isinstance(result, Report):
        op = result.operation
        host = (op.host if op else None) or result.context.get("host")
        method = result.context.get("method") or (op.profile if op else None)
        title = "Per-position acceptance" + (f": {host}" if host else "") + (f", {method}" if method else "")
        return file_name("acceptance", host, method, now.strftime("%Y%m%dT%H%M")), title
    host, profile = getattr(result, "host", None), getattr(result, "profile", None)
    return file_name("tune", host, profile), f"tok/s by setting: {profile} on {host}"


def files_of(result: object, rendered: Rendered, now: datetime | None = None) -> list[tuple[str, bytes, str]]:
    """What goes beside a posted result as files: (name, content, title) — its chart, the full report when the
    message had to be cut, a failed step's long output. `now` (UTC) stamps a diagnosis chart's name."""
    files: list[tuple[str, bytes, str]] = []
    chart = chart_of(result)
    if chart is not None:
        name, title = _chart_file(result, now or datetime.now(UTC))
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
