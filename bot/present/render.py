"""Renderings of a use case's result: Markdown, rich text, Slack Block Kit (with its limits) and JSON.

`render(result, fmt)` finds the result type's presenter in one table, so the console, the CLI and Slack show the
same thing: a diagnosis `Report` in present/diagnosis.py (Jinja2 templates), a health report in present/health.py
(the same templates, its period above the diagnosis), a tune, rollout, fleet, doctor or
pre-launch result in present/tune.py, rollout.py, fleet.py, doctor.py, prelaunch.py, a stop's steps in
present/operation.py, a one-line notice in present/notice.py. A new result type is its presenter module and one
line of `PRESENTERS`.
"""

from __future__ import annotations

import importlib
from datetime import UTC, datetime
from typing import Any

from bot.present.names import history_file_name
from bot.present.presenter import File, Presenter
from bot.present.rendered import Format, Rendered

# result type (module.Class) -> the module whose PRESENTER shows it, imported when such a result is shown: a
# diagnosis, the common case, loads none of the others
PRESENTERS: dict[str, str] = {
    "bot.core.report.Report": "bot.present.diagnosis",
    "bot.core.results.health.HealthReport": "bot.present.health",
    "bot.core.results.tune.TuneResult": "bot.present.tune",
    "bot.core.results.tune.TunePlan": "bot.present.tune",
    "bot.core.results.rollout.RolloutResult": "bot.present.rollout",
    "bot.core.results.rollout.RolloutPlan": "bot.present.rollout",
    "bot.core.results.fleet.FleetReport": "bot.present.fleet",
    "bot.core.results.doctor.DoctorReport": "bot.present.doctor",
    "bot.core.results.prelaunch.PrelaunchReport": "bot.present.prelaunch",
    "bot.core.results.notice.Notice": "bot.present.notice",
    "bot.core.results.operation.OperationResult": "bot.present.operation",
}


def presenter_of(result: object) -> Presenter[Any]:
    kind = type(result)
    module = PRESENTERS.get(f"{kind.__module__}.{kind.__qualname__}")
    if module is None:
        raise TypeError(f"no renderer for {kind.__name__}")
    presenter: Presenter[Any] = importlib.import_module(module).PRESENTER
    return presenter


def render(result: object, fmt: Format) -> Rendered:
    """Any use case's result in `fmt`, by its type."""
    return presenter_of(result).render(result, fmt)


def short_text(result: object, more: str) -> str:
    """A few lines, not the whole report (`status` at a prompt): the headline, the first thing to do, and the
    command (`more`) that shows the rest."""
    lines = [str(getattr(result, "headline", ""))]
    step = presenter_of(result).next_step(result)
    if step is not None:
        lines.append(f"  next: {step}")
    lines.append(f"  (`{more}` for the whole report)".replace("`", "'"))
    return "\n".join(lines)


def chart_of(result: object) -> bytes | None:
    """The result's chart as PNG bytes, if it has one (a diagnosis: per-position acceptance; a tune: tok/s
    against k; a rollout: before and after on each host it measured — none when it measured nothing)."""
    return presenter_of(result).chart(result)


def trend_file(result: object) -> tuple[str, str]:
    """The (name, title) of the trend chart posted beside a health report (`history-a6000.png`)."""
    host = presenter_of(result).host(result) or getattr(result, "host", None) or "host"
    return history_file_name(str(host)), f"Acceptance and throughput: {host}"


def files_of(result: object, rendered: Rendered, now: datetime | None = None) -> list[File]:
    """What goes beside a posted result as files: (name, content, title) — its chart, the full report when the
    message had to be cut, a failed step's long output. `now` (UTC) stamps a diagnosis chart's name."""
    presenter = presenter_of(result)
    files: list[File] = []
    chart = presenter.chart(result)
    if chart is not None and presenter.chart_file is not None:
        name, title = presenter.chart_file(result, now or datetime.now(UTC))
        files.append((name, chart, title))
    files += [(name, content.encode(), "Full report") for name, content in rendered.attachments]
    return files + presenter.files(result)
