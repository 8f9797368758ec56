"""Incidents and scheduled reports in Slack: one parent message per incident in the on-call channel,
mentioning the on-call group, with the diagnosis and every later alert in its thread."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from bot.adapters.slack.sink import SlackSink
from bot.config import Config
from bot.core.alerts import Alert
from bot.core.report import Report
from bot.core.results.health import HealthReport
from bot.core.results.records import Incident


class SpecopsBot(Protocol):
    """What the notifier needs of the bot (a Protocol, so this module does not import bot.py)."""

    config: Config
    sink: SlackSink

    def post_report(self, result: object, channel: str, thread_ts: str | None,
                    chart_png: bytes | None = None) -> str | None: ...

    def deliver_report(self, result: object, channel: str, chart_png: bytes | None = None,
                       resume_ts: str | None = None,
                       on_posted: Callable[[str, str], None] | None = None) -> bool: ...

log = logging.getLogger("specops.slack")


def incident_blocks(inc: Incident, lines: list[str], mention: str, open_: bool) -> list[dict[str, Any]]:
    state = {"open": ":rotating_light: *Incident*", "acknowledged": ":eyes: *Incident (acknowledged)*",
             "resolved": ":white_check_mark: *Incident (resolved)*"}.get(inc.state, "*Incident*")
    text = f"{state} #{inc.id} {mention}\n*{inc.title}*\n" + "\n".join(lines)
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": text[:2900]}}]
    if open_:
        value = str(inc.id)
        blocks.append({"type": "actions", "block_id": f"incident-{inc.id}", "elements": [
            {"type": "button", "action_id": "incident_ack", "value": value,
             "text": {"type": "plain_text", "text": "Acknowledge"}},
            {"type": "button", "action_id": "incident_rediagnose", "value": value,
             "text": {"type": "plain_text", "text": "Re-diagnose"}},
            {"type": "button", "action_id": "incident_rollback", "value": value, "style": "danger",
             "text": {"type": "plain_text", "text": "Roll back to MTP"}},
            {"type": "button", "action_id": "incident_resolve", "value": value, "style": "primary",
             "text": {"type": "plain_text", "text": "Resolve"}},
        ]})
    return blocks


class SlackNotifier:
    def __init__(self, bot: SpecopsBot) -> None:
        self.bot = bot
        self.watch = bot.config.watch

    @property
    def oncall_channel(self) -> str | None:
        return self.watch.oncall_channel or self.bot.config.slack.channel

    def mention(self) -> str:
        group = self.watch.oncall_usergroup
        return f"<!subteam^{group}>" if group else ""

    def incident_opened(self, inc: Incident, alerts: list[Alert]) -> tuple[str, str] | None:
        channel = self.oncall_channel
        if channel is None:
            log.warning("incident %s: no on-call channel configured (watch.oncall_channel)", inc.id)
            return None
        lines = [f"• {a.detail}" for a in alerts]
        ts = self.bot.sink.post(channel, f"Incident #{inc.id}: {inc.title}",
                                incident_blocks(inc, lines, self.mention(), True))
        return (channel, ts) if ts else None

    def incident_note(self, inc: Incident, text: str, report: Report | None = None) -> None:
        if not inc.channel or not inc.ts:
            return
        self.bot.sink.post(inc.channel, text, thread_ts=inc.ts)
        if report is not None:
            self.bot.post_report(report, inc.channel, inc.ts)

    def incident_closed(self, inc: Incident, text: str) -> None:
        if not inc.channel or not inc.ts:
            return
        self.bot.sink.update(inc.channel, inc.ts, f"Incident #{inc.id} resolved: {inc.title}",
                             incident_blocks(inc, [text], "", False))
        self.bot.sink.post(inc.channel, f":white_check_mark: {text}", thread_ts=inc.ts)

    def health_report(self, host: str, report: HealthReport, chart_png: bytes | None) -> bool:
        channel = self.watch.report_channel or self.bot.config.slack.channel
        if channel is None:
            log.warning("health report for %s: no report channel configured", host)
            return False
        return self.bot.post_report(report, channel, None, chart_png=chart_png) is not None

    def deliver_report(self, host: str, report: HealthReport, chart_png: bytes | None,
                       resume: tuple[str, str] | None, on_posted: Callable[[str, str], None]) -> bool:
        """health_report, resumable: `resume` is (channel, ts) of the message an earlier try posted (it is
        continued there, even if the configured channel changed since)."""
        if resume is not None:
            return self.bot.deliver_report(report, resume[0], chart_png, resume_ts=resume[1], on_posted=on_posted)
        channel = self.watch.report_channel or self.bot.config.slack.channel
        if channel is None:
            log.warning("health report for %s: no report channel configured", host)
            return False
        return self.bot.deliver_report(report, channel, chart_png, on_posted=on_posted)
