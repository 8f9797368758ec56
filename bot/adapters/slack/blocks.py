"""Block Kit pieces that are not reports: plan buttons, progress messages."""

from __future__ import annotations

from typing import Any

from bot.adapters.slack.jobs import Plan

MAX_BLOCKS = 50


def plan_blocks(plan: Plan, report_blocks: list[dict[str, Any]], ttl: float) -> list[dict[str, Any]]:
    cmd = plan.command
    what = f"`{cmd.text()}`"
    head = {"type": "section", "text": {"type": "mrkdwn", "text": (
        f":clipboard: *Plan for {what}*, requested by <@{plan.user}>. Nothing has run yet. "
        f"<@{plan.user}> or an approver can confirm within {ttl / 60:.0f} min.")}}
    actions = {"type": "actions", "block_id": f"plan-{plan.id}", "elements": [
        {"type": "button", "action_id": "plan_confirm", "style": "primary", "value": plan.id,
         "text": {"type": "plain_text", "text": f"Confirm {cmd.verb}"},
         "confirm": {"title": {"type": "plain_text", "text": f"Run {cmd.verb}?"},
                     "text": {"type": "mrkdwn", "text": f"This runs {what} on `{cmd.host or cmd.selector}` for real."},
                     "confirm": {"type": "plain_text", "text": f"Yes, {cmd.verb}"},
                     "deny": {"type": "plain_text", "text": "No"}}},
        {"type": "button", "action_id": "plan_cancel", "value": plan.id,
         "text": {"type": "plain_text", "text": "Cancel"}},
    ]}
    body = [b for b in report_blocks if b.get("type") != "header"][: MAX_BLOCKS - 2]
    return [head, *body, actions]


def refused_plan_blocks(plan: Plan, report_blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A deploy whose checks before launch refuse it: the checks and the fix, and no button to confirm (a refused
    deploy would not start); `--force` is the way past, asked for in words."""
    cmd = plan.command
    head = {"type": "section", "text": {"type": "mrkdwn", "text": (
        f":octagonal_sign: *`{cmd.text()}` is refused before launch*, requested by <@{plan.user}>. Nothing ran. "
        f"Fix what refuses it, or ask again with `--force` to deploy anyway (written to the audit).")}}
    body = [b for b in report_blocks if b.get("type") != "header"][: MAX_BLOCKS - 1]
    return [head, *body]


def settled_blocks(plan: Plan, line: str) -> list[dict[str, Any]]:
    return [{"type": "section", "text": {"type": "mrkdwn", "text": f"{line}\n`{plan.command.text()}`"}}]


def progress_blocks(title: str, line: str, cancel_job: str | None) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"{title}\n{line}"[:2900]}},
    ]
    if cancel_job:
        blocks.append({"type": "actions", "elements": [
            {"type": "button", "action_id": "job_cancel", "style": "danger", "value": cancel_job,
             "text": {"type": "plain_text", "text": "Cancel"},
             "confirm": {"title": {"type": "plain_text", "text": "Cancel it?"},
                         "text": {"type": "mrkdwn", "text": "It stops at the next safe point and stops what it "
                                                            "started (by its PID). A deploy past its stop step has "
                                                            "already stopped the old server: the report says so."},
                         "confirm": {"type": "plain_text", "text": "Cancel it"},
                         "deny": {"type": "plain_text", "text": "Keep going"}}}]})
    return blocks
