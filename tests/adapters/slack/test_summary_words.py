"""Issue 22 item 11: the words of a finished job's summary in Slack agree with the report under it — a deploy
that is up but whose speculation fails never reads "ok"; doctor's statuses keep doctor's words."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from bot.app.operations import ops
from tests.adapters.slack.test_bot import Harness, ack_text, harness
from tests.support.graph import graph


@pytest.fixture
def h() -> Iterator[Harness]:
    yield from harness()


def _final(h: Harness, text: str) -> str:
    progress = h.wait(lambda: h.posts_with(text), what="the progress message")[0]
    done = h.wait(lambda: "report in the thread" in h.emu.message(progress["ts"])["text"]
                  and h.emu.message(progress["ts"]), timeout=60, what="the final edit")
    return str(done["text"])


def test_status_of_a_failing_deployment_does_not_say_ok(h: Harness) -> None:
    ops.deploy(ops.HostRequest(h.cfg, "a6000", "dflash-0.20.1", force=True, **graph(h.cfg)))
    ack_text(h.command("status a6000"))
    final = _final(h, "status a6000")
    assert final.startswith(":octagonal_sign: status a6000: verdict *failing* (") and "failing" in final


def test_doctor_in_slack_keeps_doctors_words(h: Harness) -> None:
    ack_text(h.command("doctor a6000"))  # the simulated host as it comes: checks that warn, none that fail
    final = _final(h, "doctor a6000")
    thread = h.wait(lambda: [m for m in h.emu.messages() if "checks ok" in json.dumps(m)], timeout=60,
                    what="the doctor report")
    blocks = json.dumps(thread[0]["blocks"])
    assert "*warn*: " in final and "to look at" in final and "*Doctor:* `warn`" in blocks
    assert "degraded" not in final and "degraded" not in json.dumps(thread[0]["blocks"])


def test_a_mistyped_command_is_one_question_not_a_question_and_a_period(h: Harness) -> None:
    text = ack_text(h.command("depoy dflash a6000"))
    assert "did you mean `deploy`? Commands:" in text and "?." not in text
