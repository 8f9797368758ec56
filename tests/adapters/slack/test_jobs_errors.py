"""A job that fails on what Slack (or a forger) handed it still replies and closes its audit row: an attached
file whose download address holds a control character, a files.info whose size is not a number. Signed Events
API requests through bolt, against the Slack Web API emulator."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.adapters.slack.test_bot import Harness, harness
from tests.adapters.slack.test_pasted import FLAGS, LINE, closed_row, mention, thread_with
from tests.support.served import wait_for


@pytest.fixture
def h() -> Iterator[Harness]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(var, None)
    yield from harness()


def _with_url(h: Harness, shared: dict[str, Any], url: str) -> None:
    with h.emu._cond:  # what files.info will say of the file from now on
        h.emu.shared_files[shared["id"]]["url_private_download"] = url


@pytest.mark.parametrize("char", ["\x01", "\x7f", "\n", " "])
def test_an_attached_file_whose_address_holds_a_control_character_gets_a_reply_and_a_closed_row(
        h: Harness, char: str) -> None:
    shared = h.emu.add_file("pasted.log", (LINE + "\n").encode())
    _with_url(h, shared, shared["url_private_download"] + f"x{char}y")
    mention(h, FLAGS, f"EvCtl{ord(char)}", files=[shared])
    reply = thread_with(h, "cannot read the attached file")
    assert "pasted.log" in reply["text"] and "Traceback" not in reply["text"]
    assert closed_row(h, FLAGS)[1] == "refused"
    assert h.emu.calls_to("file.download") == []  # refused before any request left


def test_a_files_info_answer_of_the_wrong_shape_still_replies_and_closes_the_row(h: Harness) -> None:
    shared = h.emu.add_file("weird.log", (LINE + "\n").encode())
    with h.emu._cond:
        h.emu.shared_files[shared["id"]]["size"] = "a lot"
    mention(h, FLAGS, "EvWeird1", files=[shared])
    reply = thread_with(h, "weird.log")
    assert "Traceback" not in reply["text"]
    assert closed_row(h, FLAGS)[1] in ("refused", "error")


def test_the_pasted_text_beside_a_bad_file_is_still_diagnosed(h: Harness) -> None:
    shared = h.emu.add_file("pasted.log", (LINE + "\n").encode())
    _with_url(h, shared, shared["url_private_download"] + "\x00")
    mention(h, f"{FLAGS}\n```{LINE}```", "EvCtlPaste", files=[shared])
    thread_with(h, "cannot read the attached file")
    thread_with(h, "40727")
    assert closed_row(h, FLAGS)[1] == "failing"


def test_whatever_a_job_raises_reaches_its_error_handler_and_frees_its_slot() -> None:
    import threading

    from bot.adapters.slack.jobs import Busy, Job, JobPool
    from bot.app.commands import Command

    pool = JobPool(workers=1, max_queue=0)
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def broken(job: Job) -> None:
        raise KeyError("a bug")

    def on_error(job: Job, exc: Exception) -> None:
        seen.append((job.command.verb, type(exc).__name__))
        done.set()

    try:
        pool.submit(broken, Command("status", "a6000"), "U1", on_error=on_error)
        assert done.wait(10)
        assert seen == [("status", "KeyError")]
        ran = threading.Event()

        def resubmitted() -> bool:  # the slot comes back once the failed job's thread is done with it
            try:
                pool.submit(lambda job: ran.set(), Command("status", "a6000"), "U1")
            except Busy:
                return False
            return True

        wait_for("the failed job's slot to be free again", resubmitted, timeout=10)
        assert ran.wait(10)
    finally:
        pool.shutdown(timeout=5)
