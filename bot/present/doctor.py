"""`specops doctor` in every medium — text, Markdown, Slack Block Kit, JSON: each check's status, what was
seen, the fix, and the knowledge-base entry behind it."""

from __future__ import annotations

import json
from typing import Any

from bot.core.doctor_facts import Check
from bot.core.results.doctor import DoctorReport
from bot.present.presenter import Presenter
from bot.present.rendered import SLACK_MAX_BLOCKS, SLACK_MAX_SECTION, Format, Rendered

MARK = {"failed": "✖", "warn": "▲", "ok": "✔", "skipped": "·"}
SLACK_DOCTOR = {"ok": ":white_check_mark:", "warn": ":warning:", "failed": ":octagonal_sign:"}
SLACK_STATUS = {"failed": ":red_circle:", "warn": ":large_orange_circle:"}


def _shown(c: Check) -> list[str]:
    """The lines seen: all that matter (up to six) for a problem, the first for a check that passed."""
    return c.seen[:6] if c.status in ("failed", "warn") else c.seen[:1]


def _more(c: Check) -> str | None:
    return f"specops kb show {c.kb}" if c.kb and c.status in ("failed", "warn") else None


def _text(c: Check) -> list[str]:
    out = [f"{MARK.get(c.status, ' ')} {c.status:<7} {c.title}", *(f"    seen: {line}" for line in _shown(c))]
    if c.fix:
        out.append("    fix:  " + c.fix.replace("\n", "\n          "))
    more = _more(c)
    return [*out, f"    more: {more}"] if more else out


def _md(c: Check) -> list[str]:
    out = [f"- **{c.status}** {c.title} (`{c.id}`)", *(f"  - seen: `{line}`" for line in _shown(c))]
    if c.fix:
        out.append(f"  - **fix:** {c.fix}")
    more = _more(c)
    return [*out, f"  - more: `{more}`"] if more else out


def render_doctor(result: DoctorReport, fmt: Format) -> Rendered:
    if fmt == "json":
        return Rendered(json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n")
    if fmt == "slack":
        return _slack(result)
    where = result.host + (f" (Proxmox host {result.proxmox})" if result.proxmox else "")
    title = f"specops doctor · {where} · {result.status}"
    md = fmt == "md"
    out = [f"# {title}" if md else title, ""]
    for c in result.checks:
        out += _md(c) if md else _text(c)
    return Rendered("\n".join(out) + "\n")


def _esc(s: str) -> str:
    """Slack's mrkdwn reads &, < and > as markup: what a probe printed must not be (`<!channel>`)."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _slack_check(c: Check) -> dict[str, Any]:
    """One problem in one section (what was seen, the fix, where to read more), so that every check fits."""
    parts = [f"{SLACK_STATUS.get(c.status, '•')} *{_esc(c.title)}*  _{c.status}_ (`{c.id}`)"]
    if c.seen:
        parts.append("```" + _esc("\n".join(c.seen[:8])) + "```")
    if c.fix:
        parts.append("→ *fix:*\n```" + _esc(c.fix) + "```")
    more = _more(c)
    if more:
        parts.append(f"more: `{more}`")
    text = "\n".join(parts)
    if len(text) > SLACK_MAX_SECTION:
        text = _cut(text, SLACK_MAX_SECTION - 40) + "\n… (cut: `specops doctor --format md`)"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _slack(result: DoctorReport) -> Rendered:
    """Block Kit: the headline and doctor's status (its own words: ok, warn, failed), then each check that failed
    or warned (what was seen, the fix), and the count of those that passed."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(result.headline, 150), "emoji": True}},
        {"type": "section", "text": {"type": "mrkdwn", "text": (
            f"{SLACK_DOCTOR.get(result.status, ':grey_question:')} *Doctor:* `{result.status}` · "
            + _esc(result.source))}},
    ]
    problems = result.problems
    room = (SLACK_MAX_BLOCKS - len(blocks) - 2) // 2  # a divider and a section a check; two context lines left
    for c in problems[:room]:
        blocks += [{"type": "divider"}, _slack_check(c)]
    passed = [c.title for c in result.checks if c.status == "ok"]
    tail = f"{len(passed)} of {len(result.checks)} checks ok" + (f": {', '.join(passed)}" if passed else "")
    if len(problems) > room:
        tail = f"… and {len(problems) - room} more problem(s): `specops doctor --format md` · " + tail
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _cut(_esc(tail), 2900)}]})
    payload = {"text": _cut(result.headline, SLACK_MAX_SECTION), "blocks": blocks}
    return Rendered(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


PRESENTER: Presenter[DoctorReport] = Presenter(render_doctor)
