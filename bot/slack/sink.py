"""Everything the bot sends to Slack goes through here, and is redacted here."""

from __future__ import annotations

import json
import logging
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.redact import Redactor

log = logging.getLogger("specops.slack")


class SlackSink:
    def __init__(self, client: WebClient, redactor: Redactor) -> None:
        self.client = client
        self.redactor = redactor

    def post(self, channel: str, text: str, blocks: list[dict[str, Any]] | None = None,
             thread_ts: str | None = None) -> str | None:
        r = self.redactor
        try:
            resp = self.client.chat_postMessage(channel=channel, text=r.text(text)[:3900],
                                                blocks=r.obj(blocks) if blocks else None, thread_ts=thread_ts,
                                                unfurl_links=False, unfurl_media=False)
        except SlackApiError as exc:
            log.warning("chat.postMessage to %s failed: %s", channel, exc.response.get("error"))
            return None
        except Exception as exc:  # network trouble after slack_sdk's retries: the job goes on
            log.warning("chat.postMessage to %s failed: %s", channel, exc)
            return None
        ts = resp.get("ts")
        return str(ts) if ts else None

    def update(self, channel: str, ts: str, text: str, blocks: list[dict[str, Any]] | None = None) -> bool:
        r = self.redactor
        try:
            self.client.chat_update(channel=channel, ts=ts, text=r.text(text)[:3900],
                                    blocks=r.obj(blocks) if blocks is not None else None)
        except SlackApiError as exc:
            log.warning("chat.update of %s failed: %s", ts, exc.response.get("error"))
            return False
        except Exception as exc:
            log.warning("chat.update of %s failed: %s", ts, exc)
            return False
        return True

    def ephemeral(self, channel: str, user: str, text: str, thread_ts: str | None = None) -> None:
        try:
            self.client.chat_postEphemeral(channel=channel, user=user, text=self.redactor.text(text)[:3900],
                                           thread_ts=thread_ts)
        except SlackApiError as exc:
            log.warning("chat.postEphemeral failed: %s", exc.response.get("error"))
        except Exception as exc:
            log.warning("chat.postEphemeral failed: %s", exc)

    def upload(self, channel: str, thread_ts: str | None, filename: str, content: bytes, title: str) -> bool:
        try:
            self.client.files_upload_v2(channel=channel, thread_ts=thread_ts, filename=filename,
                                        content=self.redactor.bytes(content), title=self.redactor.text(title))
        except SlackApiError as exc:
            log.warning("files_upload_v2 of %s failed: %s", filename, exc.response.get("error"))
            return False
        except Exception as exc:
            log.warning("files_upload_v2 of %s failed: %s", filename, exc)
            return False
        return True

    def usergroup_members(self, group: str) -> set[str]:
        try:
            resp = self.client.usergroups_users_list(usergroup=group)
        except SlackApiError as exc:
            log.warning("usergroups.users.list %s failed: %s", group, exc.response.get("error"))
            return set()
        except Exception as exc:
            log.warning("usergroups.users.list %s failed: %s", group, exc)
            return set()
        users = resp.get("users") or []
        return {str(u) for u in users}


def blocks_of(rendered_slack: str) -> tuple[str, list[dict[str, Any]]]:
    payload = json.loads(rendered_slack)
    return str(payload.get("text", "")), list(payload.get("blocks", []))
