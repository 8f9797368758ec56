"""What every renderer returns, and the media it renders for (the renderers of each result type import this,
and present/render.py picks among them by type)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Format = Literal["md", "text", "slack", "json"]
SLACK_MAX_BLOCKS = 50
SLACK_MAX_SECTION = 3000


@dataclass
class Rendered:
    text: str
    attachments: list[tuple[str, str]] = field(default_factory=list)  # (file name, content)


def within_slack_limits(blocks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """Block Kit blocks cut to Slack's limits (a section's text, the number of blocks), and whether anything was cut
    (then the whole goes beside the message as a file)."""
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
    return blocks, cut
