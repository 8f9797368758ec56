"""A log pasted or attached in Slack, and the message shortcut "Diagnose with specops": signed Events API requests
and interactivity payloads through bolt, against the Slack Web API emulator (files.info and the download too)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bot.app.chat import Who
from tests.adapters.slack.test_bot import CHANNEL, TEAM, TOKEN, Harness, harness
from tests.support.served import wait_for

LINE = ("(APIServer pid=13026) INFO 05-08 16:26:29 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
        "1.18, Accepted throughput: 3.30 tokens/s, Drafted throughput: 271.50 tokens/s, Accepted: 33 tokens, "
        "Drafted: 2715 tokens, Per-position acceptance rate: 0.166, 0.017, 0.000, 0.000, 0.000, 0.000, 0.000, "
        "0.000, 0.000, 0.000, 0.000, 0.000, 0.000, 0.000, 0.000, Avg Draft acceptance rate: 1.2%")
FLAGS = "diagnose --method dflash --vllm-version 0.20.1"
MESSAGE_TS = "1700000000.000001"
HF = "hf_" + "Q7x" * 12
XOXB = "xoxb-1234567890-" + "s3cr3t" * 4


@pytest.fixture
def h() -> Iterator[Harness]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(var, None)
    yield from harness()


def mention(h: Harness, text: str, event_id: str, files: list[dict[str, Any]] | None = None) -> httpx.Response:
    event: dict[str, Any] = {"type": "app_mention", "user": "USOMEONE", "text": f"<@U0BOT> {text}", "ts": MESSAGE_TS,
                             "channel": CHANNEL, "event_ts": MESSAGE_TS, "team": TEAM}
    if files:
        event["files"] = [{k: f[k] for k in ("id", "name", "mimetype", "size")} for f in files]
    body = json.dumps({"token": "legacy", "team_id": TEAM, "api_app_id": "A0TEST", "type": "event_callback",
                       "event_id": event_id, "event_time": int(time.time()), "event": event})
    t0 = time.monotonic()
    resp = h.post(body, "application/json")
    assert resp.status_code == 200 and time.monotonic() - t0 < 3.0
    return resp


def interactive(h: Harness, payload: dict[str, Any]) -> httpx.Response:
    return h.post(urllib.parse.urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded")


def thread_with(h: Harness, needle: str, ts: str = MESSAGE_TS, timeout: float = 30.0) -> dict[str, Any]:
    found: list[dict[str, Any]] = wait_for(f"a reply with {needle!r} in the thread of {ts}", lambda: [
        m for m in h.emu.thread(ts) if needle in json.dumps(m)], timeout=timeout)
    return found[0]


def audit_on_disk(h: Harness) -> list[tuple[Any, ...]]:
    h.bot.services.store.audit.flush()
    db = sqlite3.connect(h.cfg.settings.state)
    try:
        return db.execute("SELECT text, result, detail FROM audit ORDER BY id").fetchall()
    finally:
        db.close()


def closed_row(h: Harness, needle: str) -> tuple[Any, ...]:
    rows: list[tuple[Any, ...]] = wait_for(f"the closed audit row of {needle!r}", lambda: [
        r for r in audit_on_disk(h) if needle in r[0] and r[1] != "started"], timeout=30)
    return rows[0]


def test_a_log_pasted_in_a_code_block_is_diagnosed_in_the_messages_thread(h: Harness) -> None:
    t0 = time.monotonic()
    mention(h, f"{FLAGS}\n```{LINE}```", "EvPaste1")
    report = thread_with(h, "40727")
    assert time.monotonic() - t0 < 15.0
    blocks = json.dumps(report["blocks"])
    assert "failing" in blocks and "text pasted in Slack (a fragment: 1 line)" in blocks
    uploads = wait_for("the chart", lambda: h.emu.completed_uploads)
    assert uploads[0]["thread_ts"] == MESSAGE_TS
    assert next(iter(h.emu.uploads.values())).startswith(b"\x89PNG")
    text, result, detail = closed_row(h, FLAGS)
    assert result == "failing" and "sha256" in text and "1 line" in text
    assert "APIServer" not in text + detail  # the audit keeps the command and a size and hash, not the log
    assert h.sim.server is not None and h.sim.server.commands == []  # no host was touched


def test_plain_lines_after_the_command_are_a_pasted_log_and_diagnose_host_is_still_a_host(h: Harness) -> None:
    mention(h, f"{FLAGS}\n{LINE}\n{LINE}", "EvPaste2")
    assert "a fragment: 2 lines" in json.dumps(thread_with(h, "40727")["blocks"])
    decision = h.bot.chat.decide("diagnose a6000", Who("mention", "USOMEONE", TEAM, CHANNEL))
    assert decision.next == "run" and decision.command is not None and decision.command.paste is None
    assert decision.command.host == "a6000"
    h.bot.chat.end(decision.audit, "ok")


def test_the_same_line_in_an_attached_file(h: Harness) -> None:
    h.emu.file_token = TOKEN
    shared = h.emu.add_file("vllm-server.log", (LINE + "\n").encode())
    mention(h, FLAGS, "EvFile1", files=[shared])
    report = thread_with(h, "40727")
    assert "`vllm-server.log` attached in Slack (1 line)" in json.dumps(report["blocks"])
    assert [c.args["authorized"] for c in h.emu.calls_to("file.download")] == [True]
    assert h.emu.calls_to("files.info")[0].args["file"] == shared["id"]
    text, result, detail = closed_row(h, FLAGS)
    assert result == "failing" and "1 attached file" in text and "vllm-server.log" in detail
    assert "APIServer" not in text + detail


def shortcut_payload(text: str, files: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "message", "user": "UOTHER", "ts": "1700000000.000500", "text": text}
    if files:
        message["files"] = files
    return {"type": "message_action", "callback_id": "diagnose_message", "trigger_id": "13345.224.abc",
            "action_ts": str(time.time()), "token": "legacy", "team": {"id": TEAM, "domain": "test"},
            "user": {"id": "USOMEONE", "username": "someone", "team_id": TEAM},
            "channel": {"id": CHANNEL, "name": "incident"}, "message_ts": message["ts"], "message": message,
            "response_url": "https://hooks.slack.invalid/1"}


def submission(view: dict[str, Any], **values: str) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for block_id, value in values.items():
        state[block_id] = {"value": {"type": "static_select", "selected_option": {"value": value}}
                           if block_id == "method" else {"type": "plain_text_input", "value": value}}
    return {"type": "view_submission", "team": {"id": TEAM, "domain": "test"},
            "user": {"id": "USOMEONE", "username": "someone", "team_id": TEAM}, "api_app_id": "A0TEST",
            "token": "legacy", "trigger_id": "13345.224.def",
            "view": {**view, "state": {"values": state}}}


def test_the_message_shortcut_asks_for_the_context_then_diagnoses_in_the_messages_thread(h: Harness) -> None:
    t0 = time.monotonic()
    resp = interactive(h, shortcut_payload(f"vllm says:\n```{LINE}```"))
    assert resp.status_code == 200 and time.monotonic() - t0 < 1.0
    view = wait_for("the modal", lambda: h.emu.views)[0]
    assert view["callback_id"] == "diagnose_message" and h.emu.calls_to("views.open")[0].args["trigger_id"]
    assert "2 lines of text" in json.dumps(view["blocks"])
    # a bad value is answered in the modal, nothing runs
    bad = interactive(h, submission(view, method="dflash", vllm_version="zero.twenty"))
    assert bad.status_code == 200 and bad.json()["response_action"] == "errors"
    assert "vllm_version" in bad.json()["errors"]
    t0 = time.monotonic()
    ok = interactive(h, submission(view, method="dflash", vllm_version="0.20.1"))
    assert ok.status_code == 200 and time.monotonic() - t0 < 1.0
    report = thread_with(h, "40727", ts="1700000000.000500")
    assert "a fragment: 2 lines" in json.dumps(report["blocks"])
    text, result, _ = closed_row(h, "diagnose --method dflash --vllm-version 0.20.1")
    assert result == "failing" and "APIServer" not in text


def test_the_shortcut_reads_the_messages_files_and_prefills_its_own_flags(h: Harness) -> None:
    shared = h.emu.add_file("tail.log", (LINE + "\n").encode())
    interactive(h, shortcut_payload(f"<@U0BOT> {FLAGS}", files=[{"id": shared["id"], "name": "tail.log"}]))
    view = wait_for("the modal", lambda: h.emu.views)[0]
    fields = {b["block_id"]: b["element"] for b in view["blocks"] if b["type"] == "input"}
    assert fields["method"]["initial_option"]["value"] == "dflash"
    assert fields["vllm_version"]["initial_value"] == "0.20.1"
    interactive(h, submission(view, method="dflash", vllm_version="0.20.1"))
    report = thread_with(h, "40727", ts="1700000000.000500")
    assert "`tail.log` attached in Slack" in json.dumps(report["blocks"])


def test_a_bad_flag_gets_a_usage_error_in_the_thread(h: Harness) -> None:
    mention(h, f"diagnose --method dflash --frobnicate 3\n```{LINE}```", "EvBad1")
    reply = thread_with(h, "unknown option")
    assert "--frobnicate" in reply["text"] and "Traceback" not in reply["text"]
    for text, needle, event in ((f"diagnose --vllm-version 0.2x\n```{LINE}```", "not a version", "EvBad2"),
                                (f"diagnose --num-speculative-tokens 999\n```{LINE}```", "from 1 to 64", "EvBad3"),
                                (f"diagnose --method sorcery\n```{LINE}```", "is not one of", "EvBad4"),
                                (f"diagnose a6000\n```{LINE}```", "options only", "EvBad5")):
        mention(h, text, event)
        thread_with(h, needle)
    rows = [r for r in audit_on_disk(h) if r[1] == "usage"]
    assert len(rows) == 5 and not any("APIServer" in r[0] for r in rows)
    assert h.bot.pool.jobs == {}


def test_an_oversized_file_is_refused_clearly(h: Harness) -> None:
    huge = h.emu.add_file("huge.log", b"x", size=25 * 1024 * 1024)
    mention(h, FLAGS, "EvBig1", files=[huge])
    refusal = thread_with(h, "huge.log")
    assert "25.0 MB" in refusal["text"] and "up to 20.0 MB" in refusal["text"]
    assert h.emu.calls_to("file.download") == []  # refused on what files.info said: nothing downloaded
    # a file larger than Slack said is cut off at the cap while it downloads
    h.bot.files.max_bytes = 4096
    liar = h.emu.add_file("liar.log", (LINE + "\n").encode() * 20, size=100)
    mention(h, FLAGS, "EvBig2", files=[liar])
    assert "over 4096 bytes" in thread_with(h, "liar.log")["text"]
    assert closed_row(h, FLAGS)[1] == "refused"


def test_a_binary_file_is_refused_clearly_and_the_pasted_text_is_still_read(h: Harness) -> None:
    png = h.emu.add_file("screenshot.png", b"\x89PNG\r\n\x1a\n" + bytes(64), mimetype="image/png", filetype="png")
    mention(h, FLAGS, "EvBin1", files=[png])
    assert "is not a text file (image/png)" in thread_with(h, "screenshot.png")["text"]
    disguised = h.emu.add_file("server.log", b"INFO ok\x00\x01\x02" * 10, mimetype="text/plain")
    mention(h, f"{FLAGS}\n```{LINE}```", "EvBin2", files=[disguised])
    assert "binary data" in thread_with(h, "server.log")["text"]
    thread_with(h, "40727")  # the pasted line beside it is diagnosed all the same


def test_a_file_slack_will_not_hand_over_is_refused(h: Harness) -> None:
    h.emu.file_token = "xoxb-some-other-installation"
    shared = h.emu.add_file("vllm.log", (LINE + "\n").encode())
    mention(h, FLAGS, "EvAuth1", files=[shared])
    assert "files:read" in thread_with(h, "vllm.log")["text"]


def test_secrets_in_the_pasted_text_reach_neither_slack_nor_the_audit(h: Harness) -> None:
    h.bot.files.max_bytes = 10_000
    shared = h.emu.add_file("with-token.log", f"HF_TOKEN={HF} {LINE}\n".encode())
    mention(h, f"{FLAGS}\n```{XOXB} {HF} {LINE}```", "EvSecret1", files=[shared])
    thread_with(h, "40727")
    report = thread_with(h, "(redacted)")  # the quoted line is there, masked
    assert "SpecDecoding metrics" in json.dumps(report)
    wait_for("the chart", lambda: h.emu.completed_uploads)
    closed_row(h, FLAGS)
    posted = json.dumps([{"method": c.method, "args": {k: v.decode("utf-8", "replace") if isinstance(v, bytes)
                                                       else v for k, v in c.args.items()}}
                         for c in h.emu.calls if c.method != "file.download"], default=str)
    posted += "".join(b.decode("utf-8", "replace") for b in h.emu.uploads.values())
    assert "chat.postMessage" in posted
    for secret in (HF, XOXB, XOXB[:20]):
        assert secret not in posted
        assert secret not in json.dumps(audit_on_disk(h))
