"""A button pressed on a resolved incident changes nothing and posts nothing into its closed thread
(issue 21, item 9): signed block_actions through bolt, the Web API emulator recording every call."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.adapters.slack.test_bot import Harness, harness
from tests.support.served import wait_for


@pytest.fixture
def h() -> Iterator[Harness]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(var, None)
    yield from harness()


@pytest.mark.parametrize("action", ["incident_ack", "incident_resolve", "incident_rollback", "incident_rediagnose"])
def test_a_button_on_a_resolved_incident_is_refused_and_the_thread_stays_closed(h: Harness, action: str) -> None:
    store = h.bot.services.store
    inc, _ = store.incidents.open("a6000:acceptance", "a6000", "acceptance collapsed", {"event": "opened"})
    store.incidents.update(inc.id, channel="C0ONCALL", ts="1700000000.000100")
    h.bot.incidents.resolve_incident(inc.id, "recovered", "test")
    before = store.incidents.get(inc.id)
    assert before is not None and before.state == "resolved"
    posted = len(h.emu.calls_to("chat.postMessage"))

    assert h.press(action, str(inc.id), "UDEPLOY", "1700000000.000100").status_code == 200
    [ephemeral] = h.emu.wait_for("chat.postEphemeral")
    assert "already resolved" in str(ephemeral.args.get("text"))
    wait_for("the audit row closed", lambda: store.audit.recent(1)[0].finished_at is not None)
    entry = store.audit.recent(1)[0]
    assert entry.result == "refused"
    after = store.incidents.get(inc.id)
    assert after is not None and after.state == "resolved" and after.timeline == before.timeline
    assert len(h.emu.calls_to("chat.postMessage")) == posted  # nothing into the closed thread
