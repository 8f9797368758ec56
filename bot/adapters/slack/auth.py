"""Who may deploy, stop and confirm: configured Slack user ids and user groups, per workspace."""

from __future__ import annotations

import threading
import time

from bot.adapters.slack.sink import SlackSink
from bot.config import Access, SlackSettings

GROUP_CACHE_SECONDS = 60.0


class Authorizer:
    def __init__(self, settings: SlackSettings, sink: SlackSink) -> None:
        self.settings = settings
        self.sink = sink
        self._groups: dict[str, tuple[float, set[str]]] = {}
        self._lock = threading.Lock()

    def team_ok(self, team: str | None) -> bool:
        return self.settings.team_id is None or team == self.settings.team_id

    def _in(self, access: Access, team: str | None, user: str | None) -> bool:
        if not user or not self.team_ok(team):
            return False
        if user in access.users:
            return True
        return any(user in self._members(group) for group in access.usergroups)

    def _members(self, group: str) -> set[str]:
        now = time.monotonic()
        with self._lock:
            cached = self._groups.get(group)
            if cached and now - cached[0] < GROUP_CACHE_SECONDS:
                return cached[1]
        members = self.sink.usergroup_members(group)
        with self._lock:
            self._groups[group] = (now, members)
        return members

    def may_deploy(self, team: str | None, user: str | None) -> bool:
        return self._in(self.settings.deployers, team, user) or self._in(self.settings.approvers, team, user)

    def may_approve(self, team: str | None, user: str | None) -> bool:
        return self._in(self.settings.approvers, team, user)

    def may_handle_incidents(self, team: str | None, user: str | None, oncall_group: str | None) -> bool:
        if self.may_deploy(team, user):
            return True
        return bool(oncall_group) and self.team_ok(team) and user in self._members(str(oncall_group))
