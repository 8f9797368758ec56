"""`specops check` in every medium — text, Markdown, Slack Block Kit, JSON: each pre-launch check's verdict, its
evidence, the fix and its sources."""

from __future__ import annotations

import json
from typing import Any

from bot.core.prelaunch import Check
from bot.core.results.prelaunch import PrelaunchReport
from bot.present.presenter import Presenter
from bot.present.rendered import SLACK_MAX_BLOCKS, SLACK_MAX_SECTION, Format, Rendered

MARK = {"refuse": "✖", "unknown": "?", "warn": "▲", "ok": "✔"}
SLACK_MARK = {"refuse": ":octagonal_sign:", "unknown": ":grey_question:", "warn": ":warning:",
              "ok": ":white_check_mark:"}


def _lines(c: Check, md: bool) -> list[str]:
    head = f"- **{c.verdict}** {c.title} (`{c.id}`)" if md else f"{MARK[c.verdict]} {c.verdict:<7} {c.title}"
    pad = "  - " if md else "    "
    out = [head, *(f"{pad}seen: {e}" for e in (c.evidence if c.verdict != "ok" else c.evidence[:1]))]
    if c.fix and c.verdict != "ok":
        out.append(f"{pad}fix:  {c.fix}")
    out += [f"{pad}source: {s}" for s in c.sources[:3] if c.verdict != "ok"]
    return out


def render_prelaunch(result: PrelaunchReport, fmt: Format) -> Rendered:
    if fmt == "json":
        return Rendered(json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n")
    if fmt == "slack":
        return _slack(result)
    md = fmt == "md"
    title = f"specops check · {result.profile} on {result.host} · {result.status}"
    out = [f"# {title}" if md else title, result.headline, ""]
    for c in result.checks:
        out += _lines(c, md)
    return Rendered("\n".join(out) + "\n")


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack(result: PrelaunchReport) -> Rendered:
    head = {"type": "section", "text": {"type": "mrkdwn", "text": f"*{_esc(result.headline)}*"}}
    blocks: list[dict[str, Any]] = [head]
    for c in [c for c in result.checks if c.verdict != "ok"][:SLACK_MAX_BLOCKS - 2]:
        text = "\n".join([f"{SLACK_MARK[c.verdict]} *{_esc(c.title)}*  _{c.verdict}_",
                          *(f"• {_esc(e)}" for e in c.evidence[:4]),
                          *([f"→ *fix:* {_esc(c.fix)}"] if c.fix else []),
                          *(f"<{s}|source>" for s in c.sources[:2] if s.startswith("https://"))])
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text[:SLACK_MAX_SECTION]}})
    passed = sum(1 for c in result.checks if c.verdict == "ok")
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"{passed} check(s) passed"}]})
    payload = {"text": result.headline[:SLACK_MAX_SECTION], "blocks": blocks}
    return Rendered(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


PRESENTER: Presenter[PrelaunchReport] = Presenter(render_prelaunch)
