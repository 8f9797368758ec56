"""The Slack emulator and the Socket Mode WebSocket server, exercised with the real slack_sdk / slack_bolt clients."""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from tests.support.slack_emulator import (
    OP_PING,
    OP_PONG,
    OP_TEXT,
    SlackEmulator,
    WebSocketServer,
    close_socket_mode,
    ws_accept_key,
    ws_frame,
)

TOKEN = "xoxb-test"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # slack_sdk sends everything through HTTP(S)_PROXY when set, ignoring NO_PROXY.
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def emu() -> Iterator[SlackEmulator]:
    with SlackEmulator() as e:
        yield e
    assert not e.running


@pytest.fixture
def client(emu: SlackEmulator) -> WebClient:
    return WebClient(token=TOKEN, base_url=emu.base_url, timeout=5)


@pytest.fixture
def ws() -> Iterator[WebSocketServer]:
    server = WebSocketServer().start()
    try:
        yield server
    finally:
        server.stop()
        assert server.threads() == []


# ---------------------------------------------------------------------------------------------- Web API


def test_auth_test_and_recorded_call(emu: SlackEmulator, client: WebClient) -> None:
    r = client.auth_test()
    assert r["ok"] and r["team_id"] == "T0TEST" and r["user_id"] and r["bot_id"] and r["url"] and r["team"]
    (call,) = emu.wait_for("auth.test")
    assert call.token == TOKEN and call.headers["authorization"] == f"Bearer {TOKEN}"
    assert not call.rate_limited and call.at <= time.time()


def test_post_then_update_keeps_message_state(emu: SlackEmulator, client: WebClient) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*deploying*"}}]
    first = client.chat_postMessage(channel="C1", text="deploying", blocks=blocks)
    second = client.chat_postMessage(channel="C1", text="in thread", thread_ts=first["ts"])
    assert first["channel"] == "C1" and first["message"]["text"] == "deploying"
    assert first["message"]["blocks"] == blocks
    assert float(second["ts"]) > float(first["ts"]) and len(first["ts"].split(".")[1]) == 6

    upd = client.chat_update(channel="C1", ts=first["ts"], text="deployed",
                             blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "*deployed*"}}])
    assert (upd["channel"], upd["ts"], upd["text"]) == ("C1", first["ts"], "deployed")
    msg = emu.message(first["ts"])
    assert msg["text"] == "deployed" and msg["blocks"][0]["text"]["text"] == "*deployed*" and msg["updates"] == 1
    assert [m["text"] for m in emu.messages("C1")] == ["deployed", "in thread"]
    assert emu.messages("C2") == []
    assert [m["text"] for m in emu.thread(first["ts"])] == ["in thread"]
    assert emu.messages("C1")[1]["thread_ts"] == first["ts"]

    with pytest.raises(SlackApiError) as err:
        client.chat_update(channel="C1", ts="1.000001", text="nope")
    assert err.value.response["error"] == "message_not_found"


def test_other_methods(emu: SlackEmulator, client: WebClient) -> None:
    ts = client.chat_postMessage(channel="C1", text="hi")["ts"]
    assert client.chat_postEphemeral(channel="C1", user="U1", text="psst")["message_ts"]
    assert emu.ephemerals[0]["user"] == "U1"
    assert client.chat_getPermalink(channel="C1", message_ts=ts)["permalink"].endswith(ts.replace(".", ""))
    assert client.conversations_info(channel="C1")["channel"]["id"] == "C1"
    user = client.users_info(user="U1")["user"]
    assert (user["id"], user["team_id"]) == ("U1", "T0TEST") and user["name"]
    assert client.views_open(trigger_id="t", view={"type": "modal", "title": {"type": "plain_text", "text": "x"}})[
        "view"]["id"]
    assert client.reactions_add(channel="C1", timestamp=ts, name="eyes")["ok"]
    assert emu.reactions == [{"channel": "C1", "ts": ts, "name": "eyes"}]
    assert client.api_call("bots.info")["ok"]  # anything else: ok


def test_usergroups_users_list(emu: SlackEmulator, client: WebClient) -> None:
    emu.usergroups["S0OPS"] = ["U1", "U2"]
    assert client.usergroups_users_list(usergroup="S0OPS")["users"] == ["U1", "U2"]
    with pytest.raises(SlackApiError) as err:
        client.usergroups_users_list(usergroup="S0NONE")
    assert err.value.response["error"] == "no_such_subteam"


def test_files_upload_v2_content(emu: SlackEmulator, client: WebClient) -> None:
    data = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    r = client.files_upload_v2(channel="C1", thread_ts="1700000000.000100", content=data, filename="chart.png",
                               title="Acceptance", initial_comment="here")
    file_id = r["file"]["id"]
    assert r["files"] == [{"id": file_id, "title": "Acceptance", "name": "chart.png", "size": len(data)}]
    assert emu.uploads[file_id] == data
    assert emu.completed_uploads[0]["channel_id"] == "C1"
    assert emu.completed_uploads[0]["thread_ts"] == "1700000000.000100"
    assert emu.completed_uploads[0]["initial_comment"] == "here"
    assert emu.files[file_id]["length"] == len(data) and emu.files[file_id]["filename"] == "chart.png"
    assert [c.method for c in emu.calls] == ["files.getUploadURLExternal", "upload", "files.completeUploadExternal"]


def test_files_upload_v2_file_path(emu: SlackEmulator, client: WebClient, tmp_path) -> None:
    path = tmp_path / "report.md"
    path.write_text("# report\n")
    r = client.files_upload_v2(channel="C1", file=str(path), title="Report")
    assert emu.uploads[r["file"]["id"]] == b"# report\n"
    assert emu.files[r["file"]["id"]]["filename"] == "report.md"


def test_files_info_and_download_with_the_bearer_token(emu: SlackEmulator, client: WebClient) -> None:
    import httpx

    emu.file_token = TOKEN
    shared = emu.add_file("vllm.log", b"INFO line one\n", mimetype="text/plain")
    info = client.files_info(file=shared["id"])["file"]
    assert info["size"] == 14 and info["mimetype"] == "text/plain" and info["name"] == "vllm.log"
    url = info["url_private_download"]
    assert url.startswith(emu.root_url)
    ok = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, trust_env=False)
    assert ok.status_code == 200 and ok.content == b"INFO line one\n"
    # like Slack: a wrong or missing token gets the login page, not the file
    for headers in ({"Authorization": "Bearer xoxb-other"}, {}):
        page = httpx.get(url, headers=headers, trust_env=False)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert b"INFO line one" not in page.content
    assert [c.args["authorized"] for c in emu.calls_to("file.download")] == [True, False, False]
    with pytest.raises(SlackApiError) as err:
        client.files_info(file="F0NOPE")
    assert err.value.response["error"] == "file_not_found"
    assert emu.add_file("big.log", b"x", size=30_000_000)["size"] == 30_000_000


def test_multipart_body_is_parsed(emu: SlackEmulator, client: WebClient) -> None:
    client.api_call("files.upload", files={"file": io.BytesIO(b"raw\x00bytes")}, data={"channels": "C1"})
    (call,) = emu.wait_for("files.upload")
    assert call.headers["content-type"].startswith("multipart/form-data")
    assert call.args["file"] == b"raw\x00bytes" and call.args["channels"] == "C1"


def test_rate_limit_retried_by_handler(emu: SlackEmulator) -> None:
    client = WebClient(token=TOKEN, base_url=emu.base_url, timeout=5)
    client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))
    emu.rate_limit("chat.postMessage", times=1, retry_after=1)
    start = time.monotonic()
    r = client.chat_postMessage(channel="C1", text="hello")
    elapsed = time.monotonic() - start
    assert r["ok"]
    calls = emu.calls_to("chat.postMessage")
    assert [c.rate_limited for c in calls] == [True, False]
    assert calls[0].status == 429 and calls[0].response == {"ok": False, "error": "ratelimited"}
    assert 1.0 <= elapsed < 3.5  # Retry-After plus slack_sdk's random jitter below 1 s
    assert calls[1].at - calls[0].at >= 1.0
    assert len(emu.messages("C1")) == 1


def test_rate_limit_without_handler_raises(emu: SlackEmulator, client: WebClient) -> None:
    emu.rate_limit("chat.postMessage", retry_after=7)
    with pytest.raises(SlackApiError) as err:
        client.chat_postMessage(channel="C1", text="hello")
    assert err.value.response.status_code == 429
    assert err.value.response["error"] == "ratelimited"
    assert err.value.response.headers.get("Retry-After", err.value.response.headers.get("retry-after")) == "7"
    assert client.chat_postMessage(channel="C1", text="again")["ok"]  # only once


def test_fail_on_demand(emu: SlackEmulator, client: WebClient) -> None:
    emu.fail("chat.postMessage", error="channel_not_found", times=2)
    for _ in range(2):
        with pytest.raises(SlackApiError) as err:
            client.chat_postMessage(channel="C1", text="x")
        assert err.value.response.status_code == 200 and err.value.response["error"] == "channel_not_found"
    assert client.chat_postMessage(channel="C1", text="x")["ok"]


def test_respond_overrides_an_answer(emu: SlackEmulator, client: WebClient) -> None:
    emu.respond("conversations.info", {"ok": True, "channel": {"id": "C9", "name": "ops", "is_private": True}})
    assert client.conversations_info(channel="C9")["channel"]["is_private"] is True
    emu.respond("users.info", lambda call: {"ok": True, "user": {"id": call.args["user"], "name": "bob"}})
    assert client.users_info(user="U7")["user"] == {"id": "U7", "name": "bob"}
    emu.respond("users.info", None)
    assert client.users_info(user="U7")["user"]["team_id"] == "T0TEST"


def test_invalid_blocks_and_long_text(emu: SlackEmulator, client: WebClient) -> None:
    block = {"type": "section", "text": {"type": "mrkdwn", "text": "x"}}
    with pytest.raises(SlackApiError) as err:
        client.chat_postMessage(channel="C1", text="x", blocks=[block] * 51)
    assert err.value.response["error"] == "invalid_blocks"
    assert client.chat_postMessage(channel="C1", text="x", blocks=[block] * 50)["ok"]

    long_section = {"type": "section", "text": {"type": "mrkdwn", "text": "y" * 3001}}
    with pytest.raises(SlackApiError) as err:
        client.chat_postMessage(channel="C1", text="x", blocks=[long_section])
    assert err.value.response["error"] == "invalid_blocks"
    ts = emu.messages("C1")[0]["ts"]
    with pytest.raises(SlackApiError) as err:
        client.chat_update(channel="C1", ts=ts, text="x", blocks=[long_section])
    assert err.value.response["error"] == "invalid_blocks"
    with pytest.raises(SlackApiError) as err:
        client.chat_postMessage(channel="C1", text="z" * 40001)
    assert err.value.response["error"] == "msg_too_long"
    assert len(emu.calls_to("chat.postMessage")) == 4 and len(emu.messages()) == 1  # recorded anyway

    # form-encoded requests carry blocks as a JSON string
    with pytest.raises(SlackApiError) as err:
        client.api_call("chat.postMessage", params={"channel": "C1", "blocks": json.dumps([block] * 51)})
    assert err.value.response["error"] == "invalid_blocks"
    assert emu.calls[-1].headers["content-type"] == "application/x-www-form-urlencoded"


def test_wait_for_times_out_with_calls_seen(emu: SlackEmulator, client: WebClient) -> None:
    client.auth_test()
    start = time.monotonic()
    with pytest.raises(AssertionError, match=r"auth\.test"):
        emu.wait_for("chat.postMessage", timeout=0.2)
    assert time.monotonic() - start < 1.0
    threading.Timer(0.1, lambda: client.chat_postMessage(channel="C1", text="late")).start()
    assert emu.wait_for("chat.postMessage", timeout=3)[0].args["text"] == "late"


# ---------------------------------------------------------------------------------------------- WebSocket


def test_websocket_raw_client(ws: WebSocketServer) -> None:
    with socket.create_connection(("127.0.0.1", ws.port), timeout=3) as sock:
        key = "dGhlIHNhbXBsZSBub25jZQ=="
        sock.sendall(f"GET /link/?ticket=test HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                     f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
        reader = sock.makefile("rb")
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += reader.read(1)
        assert head.startswith(b"HTTP/1.1 101") and ws_accept_key(key).encode() in head
        assert ws_accept_key(key) == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455's example

        def read_frame() -> tuple[int, bytes]:
            b1, b2 = reader.read(2)
            assert not b2 & 0x80  # server frames are unmasked
            n = b2 & 0x7F
            if n == 126:
                n = int.from_bytes(reader.read(2), "big")
            return b1 & 0x0F, reader.read(n)

        opcode, data = read_frame()
        assert opcode == OP_TEXT and json.loads(data)["type"] == "hello"
        ws.wait_connected(1)
        sock.sendall(ws_frame(OP_PING, b"p1", mask=True))
        assert read_frame() == (OP_PONG, b"p1")
        eid = ws.send_envelope({"text": "x" * 300})
        opcode, data = read_frame()
        assert json.loads(data)["envelope_id"] == eid and json.loads(data)["accepts_response_payload"] is True
        sock.sendall(ws_frame(OP_TEXT, json.dumps({"envelope_id": eid}).encode(), mask=True))
        assert ws.wait_ack(eid, timeout=2) == {"envelope_id": eid}
    with pytest.raises(AssertionError):
        ws.wait_ack("nope", timeout=0.1)


def test_socket_mode_slash_command(emu: SlackEmulator, ws: WebSocketServer) -> None:
    from slack_bolt import App
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    threads_before = set(threading.enumerate())
    emu.wss_url = ws.url
    app = App(client=WebClient(base_url=emu.base_url, token=TOKEN))
    seen: list[str] = []
    ran = threading.Event()

    @app.command("/specops")
    def specops(ack, command) -> None:  # bolt injects arguments by name
        seen.append(command["text"])
        ack("got it")
        ran.set()

    handler = SocketModeHandler(app, app_token="xapp-test")
    try:
        handler.connect()
        ws.wait_connected(3)
        (opened,) = emu.wait_for("apps.connections.open")
        assert opened.token == "xapp-test"
        assert ws.handshakes[0]["path"] == "/link/?ticket=test"
        eid = ws.send_envelope({
            "token": "legacy", "team_id": "T0TEST", "team_domain": "test", "channel_id": "C1",
            "channel_name": "ops", "user_id": "U1", "user_name": "alice", "command": "/specops", "text": "help",
            "api_app_id": "A0TEST", "is_enterprise_install": "false",
            "response_url": f"{emu.root_url}commands/response", "trigger_id": "13345224609.738474920.8088930838d88f",
        })
        ack = ws.wait_ack(eid, timeout=5)
        assert ran.wait(5) and seen == ["help"]
        assert ack["envelope_id"] == eid and ack["payload"] == {"text": "got it"}
        assert ws.pings  # the client pings right after connecting and gets its pong
    finally:
        start = time.monotonic()
        close_socket_mode(handler, ws)
        app.listener_runner.listener_executor.shutdown(wait=True)
    assert time.monotonic() - start < 1.0
    assert ws.connection_count == 0 and not ws.connected.is_set()
    assert not handler.client.current_session_runner.is_alive() and not handler.client.message_processor.is_alive()
    assert len(emu.calls_to("apps.connections.open")) == 1  # no reconnect
    leaked = [t for t in set(threading.enumerate()) - threads_before if t.is_alive() and not t.name.startswith("ws-")
              and "process_request" not in t.name]
    assert leaked == []
