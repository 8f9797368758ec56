"""Who may deploy, stop and confirm: configured Slack user ids and user groups, per workspace.

A user group's members come from `usergroups.users.list`, cached: membership older than
GROUP_CACHE_SECONDS never authorizes anyone. The configured groups are re-read in a background
thread every GROUP_REFRESH_SECONDS, so a command's acknowledgement finds them cached instead of
waiting on Slack (a cold lookup is a Web API round trip on the ack path, once a minute per group).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

from bot.adapters.slack.sink import SlackSink
from bot.config import Access, SlackSettings

log = logging.getLogger("specops.slack")

GROUP_CACHE_SECONDS = 60.0  # the oldest membership used to authorize
GROUP_REFRESH_SECONDS = 30.0  # how often the background thread re-reads the configured groups (Tier 2: 20+/min)


class Authorizer:
    def __init__(self, settings: SlackSettings, sink: SlackSink, extra_groups: Iterable[str | None] = ()) -> None:
        self.settings = settings
        self.sink = sink
        self.groups = sorted({*settings.deployers.usergroups, *settings.approvers.usergroups,
                              *(g for g in extra_groups if g)})
        self._groups: dict[str, tuple[float, set[str]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Authorizer:
        """Read the configured groups now and keep them fresh, in a daemon thread (none without groups)."""
        if self.groups and self._thread is None:
            self._thread = threading.Thread(target=self._refresh, name="specops-usergroups", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _refresh(self) -> None:
        while not self._stop.is_set():
            for group in self.groups:
                if self._stop.is_set():
                    return
                try:
                    self._fetch(group)
                except Exception:  # the next round tries again; a stale entry ages out meanwhile
                    log.exception("refreshing user group %s failed", group)
            self._stop.wait(GROUP_REFRESH_SECONDS)

    def _fetch(self, group: str) -> set[str] | None:
        asked = time.monotonic()  # the answer is as old as the question
        members = self.sink.usergroup_members(group)
        if members is not None:  # a failed call keeps what we had, which ages out after GROUP_CACHE_SECONDS
            with self._lock:
                self._groups[group] = (asked, members)
        return members

    def team_ok(self, team: str | None) -> bool:
        return self.settings.team_id is None or team == self.settings.team_id

    def _in(self, access: Access, team: str | None, user: str | None) -> bool:
        if not user or not self.team_ok(team):
            return False
        if user in access.users:
            return True
        return any(user in self._members(group) for group in access.usergroups)

    def _members(self, group: str) -> set[str]:
        with self._lock:
            cached = self._groups.get(group)
        if cached and time.monotonic() - cached[0] < GROUP_CACHE_SECONDS:
            return cached[1]
        return self._fetch(group) or set()  # not known (Slack failed): nobody is in it

    def may_deploy(self, team: str | None, user: str | None) -> bool:
        return self._in(self.settings.deployers, team, user) or self._in(self.settings.approvers, team, user)

    def may_approve(self, team: str | None, user: str | None) -> bool:
        return self._in(self.settings.approvers, team, user)

    def may_handle_incidents(self, team: str | None, user: str | None, oncall_group: str | None) -> bool:
        if self.may_deploy(team, user):
            return True
        return bool(oncall_group) and self.team_ok(team) and user in self._members(str(oncall_group))
