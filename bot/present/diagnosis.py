"""A diagnosis (`Report`) in every medium: JSON is its stable contract (`Report.contract()`); Markdown, rich text and
Slack Block Kit come from the Jinja2 templates in templates/ (operators may edit them; SPECOPS_TEMPLATES points
elsewhere). Slack's limits cut a long report: the whole goes beside it as a file."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from bot.core.report import OperationOut, Report
from bot.core.results.health import HealthOut
from bot.errors import ConfigError
from bot.present.chat_syntax import chat_syntax
from bot.present.names import file_name
from bot.present.presenter import File, Presenter
from bot.present.rendered import Format, Rendered, within_slack_limits


def _rich_escape(s: object) -> str:
    from rich.markup import escape  # ~15 ms of imports that only the text template's `rich` filter needs

    return escape(str(s))


def template_env() -> Any:
    import jinja2

    from bot.paths import shipped_templates_dir, templates_dir

    # an operator's copy (SPECOPS_TEMPLATES) first; a template it lacks (one a newer release added) is the shipped one
    loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(templates_dir())),
                                  jinja2.FileSystemLoader(str(shipped_templates_dir()))])
    env = jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined, autoescape=False, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["rich"] = _rich_escape
    env.filters["slack"] = lambda s: str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    env.filters["rates"] = lambda xs: ", ".join(f"{x:.3f}" for x in xs)
    env.filters["num"] = lambda x, d=2: "n/a" if x is None else f"{x:.{d}f}"
    env.filters["upstream_ref"] = lambda u: f"{u.repo}#{u.number}"
    return env


def render_report(report: Report, fmt: Format) -> Rendered:
    if fmt == "json":
        return Rendered(json.dumps(report.contract(), indent=2, ensure_ascii=False) + "\n")
    return render_templates(report, fmt, None)


def render_templates(report: Report, fmt: Format, health: HealthOut | None) -> Rendered:
    """The templates' rendering; with `health`, a health report's period above the diagnosis of its watches."""
    import jinja2

    env = template_env()
    try:
        if fmt == "slack":
            return _render_slack(report, env, health)
        name = {"md": "report.md.j2", "text": "report.txt.j2"}[fmt]
        return Rendered(env.get_template(name).render(r=report, h=health))
    except jinja2.UndefinedError as exc:
        if "health" in str(exc):  # a copy of the templates from before the health report had a type of its own
            raise ConfigError("the report templates read `r.health`, which is now `h` (a health report's period): "
                              "rename it in the copy SPECOPS_TEMPLATES points at (README, Report JSON)") from None
        raise


def _render_slack(report: Report, env: Any, health: HealthOut | None) -> Rendered:
    raw = chat_syntax(env.get_template("report.slack.j2").render(r=report, h=health))
    blocks, cut = within_slack_limits(json.loads(raw))
    payload = {"text": report.headline, "blocks": blocks}
    attachments = [("specops-report.md", render_templates(report, "md", health).text)] if cut else []
    return Rendered(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", attachments)


def _chart(report: Report) -> bytes | None:
    from bot.present import charts

    return charts.acceptance_png(report) if report.metrics.per_position else None


def chart_file(report: Report, now: datetime, op: OperationOut | None = None) -> tuple[str, str]:
    """A diagnosis chart by host, method and when: a channel holds many (`op`: the deploy that judged it)."""
    op = op or report.operation
    host = (op.host if op else None) or report.context.get("host")
    method = report.context.get("method") or (op.profile if op else None)
    title = "Per-position acceptance" + (f": {host}" if host else "") + (f", {method}" if method else "")
    return file_name("acceptance", host, method, now.strftime("%Y%m%dT%H%M")), title


def _next_step(report: Report) -> str | None:
    first = report.findings[0] if report.findings else None
    return chat_syntax(first.remediation[0], prefix="") if first is not None and first.remediation else None


def failed_step_files(op: OperationOut | None) -> list[File]:
    """A failed step's output when it is too long for the message (a deploy's report and a stop's result)."""
    failed = next((s for s in op.steps if s.status == "failed"), None) if op else None
    if failed and len(failed.output) > 15:
        return [("step-output.log", "\n".join(failed.output).encode(), f"Output of step {failed.index}")]
    return []


def _files(report: Report) -> list[File]:
    return failed_step_files(report.operation)


def _host(report: Report) -> str | None:
    host = report.context.get("host")
    return str(host) if host else None


PRESENTER: Presenter[Report] = Presenter(render_report, chart=_chart, chart_file=chart_file, next_step=_next_step,
                                         files=_files, host=_host)
