"""What every renderer returns, and the media it renders for (the renderers of each result type import this,
and present/render.py picks among them by type)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Format = Literal["md", "text", "slack", "json"]
SLACK_MAX_BLOCKS = 50
SLACK_MAX_SECTION = 3000


@dataclass
class Rendered:
    text: str
    attachments: list[tuple[str, str]] = field(default_factory=list)  # (file name, content)
