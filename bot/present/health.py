"""A health report (`HealthReport`) in every medium: its JSON contract keeps the period's numbers and the diagnosis of
the watches apart; Markdown, rich text and Slack are the diagnosis templates with the period above the diagnosis."""

from __future__ import annotations

import json

from bot.core.results.health import HealthReport
from bot.present import diagnosis
from bot.present.presenter import Presenter
from bot.present.rendered import Format, Rendered


def render_health(result: HealthReport, fmt: Format) -> Rendered:
    if fmt == "json":
        return Rendered(json.dumps(result.contract(), indent=2, ensure_ascii=False) + "\n")
    # the templates head the message with the report's headline: the health report's own
    shown = result.diagnosis.model_copy(update={"headline": result.headline})
    return diagnosis.render_templates(shown, fmt, result.health)


_SHOWN = diagnosis.PRESENTER  # the diagnosis under the period: its chart, its files, its first step

PRESENTER: Presenter[HealthReport] = Presenter(
    render_health, chart=lambda r: _SHOWN.chart(r.diagnosis),
    chart_file=lambda r, now: diagnosis.chart_file(r.diagnosis, now),
    next_step=lambda r: _SHOWN.next_step(r.diagnosis), files=lambda r: _SHOWN.files(r.diagnosis),
    host=lambda r: r.host)
