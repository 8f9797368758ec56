"""One report period is one Slack message (issue 21, item 5): a post that fails partway is continued where it
stopped by the next try, never posted again.

Real parts: the bot's Web API client against the local Slack emulator, a real SQLite file, the scheduler's jobs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.adapters import scheduler
from bot.adapters.slack.bot import SpecopsBot
from bot.adapters.slack.settings import SlackSecrets
from bot.config import Config, HostConfig, Profile, Settings, SlackSettings, WatchSettings
from tests.support.slack_emulator import SlackEmulator

REPORTS = "CREPORTS"
PERIOD = "2026-12-01 08:00"
KEY = "report:h1"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[SpecopsBot, SlackEmulator]]:
    cfg = Config(hosts={"h1": HostConfig(address="127.0.0.1", user="u", known_hosts=tmp_path / "kh")},
                 profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3)},
                 settings=Settings(state=tmp_path / "s.db"),
                 watch=WatchSettings(interval=60, report_channel=REPORTS),
                 slack=SlackSettings(team_id="T0TEST"))
    emu = SlackEmulator().start()
    bot = SpecopsBot(cfg, SlackSecrets(slack_bot_token="xoxb-test-token-123456",
                                       slack_signing_secret="s3cret-signing-abcdef",
                                       specops_slack_api_url=emu.base_url))
    now = time.time()
    for i in range(3):  # enough watches for the trend chart
        bot.services.store.samples.add("h1", True, {"profile": "mtp", "mean": 2.5, "gen_tps": 70.0},
                                       at=now - 600 + 60 * i)
    scheduler.install(bot.services)
    try:
        yield bot, emu
    finally:
        bot.shutdown()
        emu.stop()


def _reports(emu: SlackEmulator) -> list[dict[str, Any]]:
    return [m for m in emu.messages(REPORTS) if not m.get("thread_ts") and "Health report h1" in m["text"]]


def test_a_post_that_fails_after_its_message_is_continued_not_posted_again(
        world: tuple[SpecopsBot, SlackEmulator]) -> None:
    bot, emu = world
    store = bot.services.store
    # the post's second Web API call (the chart's files.getUploadURLExternal) fails once
    emu.fail("files.getUploadURLExternal", error="internal_error")
    assert scheduler.report_job("h1", period=PERIOD) is False
    assert not store.reports.posted(KEY, PERIOD)
    [first] = _reports(emu)
    assert store.reports.message(KEY, PERIOD) == (REPORTS, first["ts"])
    assert not emu.completed_uploads
    # two catch-up runs (what two restarts do)
    assert scheduler.retry_unposted() == [f"{KEY} {PERIOD}"]
    assert scheduler.retry_unposted() == []
    assert [m["ts"] for m in _reports(emu)] == [first["ts"]]  # one message for the period
    assert len(emu.calls_to("chat.postMessage")) == 1
    assert len(emu.calls_to("chat.update")) == 1  # the retry edited the message it had
    [chart] = emu.completed_uploads  # the chart once, in the message's thread
    assert chart["thread_ts"] == first["ts"]
    assert store.reports.posted(KEY, PERIOD)
    assert scheduler.report_job("h1", period=PERIOD) is False  # posted: never twice


def test_a_failed_first_call_posts_once_on_the_retry(world: tuple[SpecopsBot, SlackEmulator]) -> None:
    bot, emu = world
    emu.fail("chat.postMessage", error="internal_error")
    assert scheduler.report_job("h1", period=PERIOD) is False
    assert bot.services.store.reports.message(KEY, PERIOD) is None  # nothing was posted to continue
    assert scheduler.retry_unposted() == [f"{KEY} {PERIOD}"]
    assert len(_reports(emu)) == 1 and len(emu.completed_uploads) == 1
    assert not emu.calls_to("chat.update")


def test_a_failed_edit_on_the_retry_leaves_it_unposted_without_a_copy(
        world: tuple[SpecopsBot, SlackEmulator]) -> None:
    bot, emu = world
    emu.fail("files.getUploadURLExternal", error="internal_error")
    assert scheduler.report_job("h1", period=PERIOD) is False
    emu.fail("chat.update", error="internal_error")
    assert scheduler.retry_unposted() == []  # still not all there: tried again at the next start
    assert not bot.services.store.reports.posted(KEY, PERIOD)
    assert scheduler.retry_unposted() == [f"{KEY} {PERIOD}"]
    assert len(_reports(emu)) == 1 and len(emu.completed_uploads) == 1
