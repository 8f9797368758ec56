"""Everything the bot sends to Slack goes through here, and is redacted here."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.redact import Redactor

log = logging.getLogger("specops.slack")


class SlackSink:
    def __init__(self, client: WebClient, redactor: Redactor) -> None:
        self.client = client
        self.redactor = redactor

    def _call(self, what: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        """A Web API call whose failure is logged and returns None: a job goes on without its message."""
        try:
            return fn(**kwargs)
        except SlackApiError as exc:
            log.warning("%s failed: %s", what, exc.response.get("error"))
        except Exception as exc:  # network trouble after slack_sdk's retries
            log.warning("%s failed: %s", what, exc)
        return None

    def post(self, channel: str, text: str, blocks: list[dict[str, Any]] | None = None,
             thread_ts: str | None = None) -> str | None:
        r = self.redactor
        resp = self._call(f"chat.postMessage to {channel}", self.client.chat_postMessage, channel=channel,
                          text=r.text(text)[:3900], blocks=r.obj(blocks) if blocks else None, thread_ts=thread_ts,
                          unfurl_links=False, unfurl_media=False)
        ts = resp.get("ts") if resp is not None else None
        return str(ts) if ts else None

    def update(self, channel: str, ts: str, text: str, blocks: list[dict[str, Any]] | None = None) -> bool:
        r = self.redactor
        return self._call(f"chat.update of {ts}", self.client.chat_update, channel=channel, ts=ts,
                          text=r.text(text)[:3900], blocks=r.obj(blocks) if blocks is not None else None) is not None

    def ephemeral(self, channel: str, user: str, text: str, thread_ts: str | None = None) -> None:
        self._call("chat.postEphemeral", self.client.chat_postEphemeral, channel=channel, user=user,
                   text=self.redactor.text(text)[:3900], thread_ts=thread_ts)

    def upload(self, channel: str, thread_ts: str | None, filename: str, content: bytes, title: str) -> bool:
        return self._call(f"files_upload_v2 of {filename}", self.client.files_upload_v2, channel=channel,
                          thread_ts=thread_ts, filename=filename, content=self.redactor.bytes(content),
                          title=self.redactor.text(title)) is not None

    def open_view(self, trigger_id: str, view: dict[str, Any]) -> bool:
        return self._call("views.open", self.client.views_open, trigger_id=trigger_id,
                          view=self.redactor.obj(view)) is not None

    def usergroup_members(self, group: str) -> set[str] | None:
        """The group's user ids; None if Slack did not say (the call failed, or no such group)."""
        resp = self._call(f"usergroups.users.list {group}", self.client.usergroups_users_list, usergroup=group)
        if resp is None:
            return None
        return {str(u) for u in resp.get("users") or []}


def blocks_of(rendered_slack: str) -> tuple[str, list[dict[str, Any]]]:
    payload = json.loads(rendered_slack)
    return str(payload.get("text", "")), list(payload.get("blocks", []))
