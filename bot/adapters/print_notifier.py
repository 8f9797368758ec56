"""A Notifier for the terminal: `specops schedule run` without Slack says it on stdout."""

from __future__ import annotations

from typing import Any

from bot.core.alerts import Alert
from bot.core.report import Report
from bot.core.results.health import HealthReport
from bot.core.results.records import Incident
from bot.present.render import render


class PrintNotifier:
    """For `specops schedule run` without Slack: say it in the terminal."""

    def __init__(self, say: Any = print) -> None:
        self.say = say

    def incident_opened(self, inc: Incident, alerts: list[Alert]) -> tuple[str, str] | None:
        self.say(f"INCIDENT #{inc.id} opened: {inc.title}")
        for a in alerts:
            self.say(f"  {a.kind}: {a.detail}")
        return None

    def incident_note(self, inc: Incident, text: str, report: Report | None = None) -> None:
        self.say(f"incident #{inc.id}: {text}" + (f" — {report.headline}" if report else ""))

    def incident_closed(self, inc: Incident, text: str) -> None:
        self.say(f"incident #{inc.id} resolved: {text}")

    def health_report(self, host: str, report: HealthReport, chart_png: bytes | None) -> bool:
        self.say(render(report, "md").text)
        return True
