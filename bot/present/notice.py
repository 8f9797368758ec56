"""A one-line answer (`Notice`) in every medium: the text as it is."""

from __future__ import annotations

import json

from bot.core.results.notice import Notice
from bot.present.presenter import Presenter
from bot.present.rendered import Format, Rendered


def render_notice(result: Notice, fmt: Format) -> Rendered:
    text = result.text
    if fmt == "json":
        return Rendered(json.dumps({"notice": text}, ensure_ascii=False) + "\n")
    if fmt == "slack":
        return Rendered(json.dumps({"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn",
                                                                                         "text": text}}]}) + "\n")
    return Rendered(text + "\n")


PRESENTER: Presenter[Notice] = Presenter(render_notice)
