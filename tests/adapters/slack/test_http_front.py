"""The HTTP front under hostile clients: slow senders, a whole-request deadline, keep-alive, size limits,
and signed interactive payloads of the wrong shape. Real sockets on 127.0.0.1, the real bolt App."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator

import pytest

from bot.adapters.slack import http_server
from tests.adapters.slack.test_bot import Harness, harness


@pytest.fixture
def h() -> Iterator[Harness]:
    yield from harness()


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    return s


def _request(s: socket.socket, raw: bytes, timeout: float = 5.0) -> bytes:
    """Sends one request and reads one response (headers and a Content-Length body)."""
    s.settimeout(timeout)
    s.sendall(raw)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


class _Trickler:
    """Clients that send one header line every `every` seconds and never finish their request."""

    def __init__(self, port: int, count: int, every: float = 3.0) -> None:
        self.socks = [_connect(port) for _ in range(count)]
        self.closed_at: dict[int, float] = {}
        self.started = time.monotonic()
        self.every = every
        self._stop = threading.Event()
        for s in self.socks:
            s.setblocking(False)
            s.send(b"POST /slack/events HTTP/1.1\r\nHost: x\r\n")
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(self.every):
            n += 1
            for i, s in enumerate(self.socks):
                if i in self.closed_at:
                    continue
                try:
                    s.send(f"X-Slow-{n}: {'a' * 10}\r\n".encode())
                except OSError:
                    self.closed_at[i] = time.monotonic() - self.started

    def poll_closed(self) -> None:
        for i, s in enumerate(self.socks):
            if i in self.closed_at:
                continue
            try:
                if s.recv(1024) == b"":
                    self.closed_at[i] = time.monotonic() - self.started
            except BlockingIOError:
                pass
            except OSError:
                self.closed_at[i] = time.monotonic() - self.started

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for s in self.socks:
            s.close()


def test_seventy_slow_clients_do_not_delay_a_signed_command_or_healthz(h: Harness) -> None:
    slow = _Trickler(h.server.port, 70)
    try:
        time.sleep(0.5)  # let every slow client's first line reach the server
        t0 = time.monotonic()
        resp = h.command("help")
        acked = time.monotonic() - t0
        assert resp.status_code == 200 and "deploy PROFILE" in resp.text
        assert acked < 3.0, f"the slash command was acked after {acked:.2f}s"
        t0 = time.monotonic()
        health = h.http.get("/healthz", timeout=5)
        answered = time.monotonic() - t0
        # a front blocked by the slow clients would answer only at their 10 s request deadline
        assert health.status_code == 200 and answered < 3.0, f"/healthz: {health.status_code} in {answered:.2f}s"
        slow.poll_closed()
        assert not slow.closed_at, "slow clients were closed before their deadline"
    finally:
        slow.close()


def test_a_client_that_keeps_trickling_is_closed_by_the_whole_request_deadline(h: Harness) -> None:
    slow = _Trickler(h.server.port, 3, every=1.0)  # well inside the inactivity timeout, every time
    try:
        deadline = time.monotonic() + http_server.REQUEST_DEADLINE + 5
        while len(slow.closed_at) < 3 and time.monotonic() < deadline:
            slow.poll_closed()
            time.sleep(0.1)
        assert len(slow.closed_at) == 3, "a trickling client outlived the whole-request deadline"
        assert all(at >= http_server.REQUEST_DEADLINE - 0.5 for at in slow.closed_at.values()), slow.closed_at
        assert all(at < http_server.REQUEST_DEADLINE + 3 for at in slow.closed_at.values()), slow.closed_at
    finally:
        slow.close()


def test_keep_alive_serves_two_requests_on_one_connection(h: Harness) -> None:
    s = _connect(h.server.port)
    try:
        for _ in range(2):
            out = _request(s, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert out.startswith(b"HTTP/1.1 200"), out[:80]
    finally:
        s.close()


def test_an_idle_keep_alive_connection_is_closed(h: Harness) -> None:
    s = _connect(h.server.port)
    try:
        assert _request(s, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 200")
        s.settimeout(http_server.CHANNEL_TIMEOUT + http_server.CLEANUP_INTERVAL + 5)
        t0 = time.monotonic()
        assert s.recv(1024) == b""
        assert time.monotonic() - t0 < http_server.CHANNEL_TIMEOUT + http_server.CLEANUP_INTERVAL + 3
    finally:
        s.close()


def test_a_body_over_the_limit_is_413_and_a_bad_content_length_is_400(h: Harness) -> None:
    s = _connect(h.server.port)
    try:
        out = _request(s, b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                       % (http_server.MAX_BODY + 1))
        assert out.startswith(b"HTTP/1.1 413"), out[:80]
    finally:
        s.close()
    for bad in (b"abc", b"-5"):
        s = _connect(h.server.port)
        try:
            out = _request(s, b"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Length: " + bad + b"\r\n\r\n")
            assert out.startswith(b"HTTP/1.1 400"), (bad, out[:80])
        finally:
            s.close()


_GOOD = {"type": "block_actions", "user": {"id": "UDEPLOY", "team_id": "T0TEST"}, "team": {"id": "T0TEST"},
         "channel": {"id": "C0CHAN"}, "api_app_id": "A0TEST", "token": "legacy", "trigger_id": "1.2.3",
         "container": {"type": "message", "message_ts": "1.1", "channel_id": "C0CHAN"},
         "actions": [{"action_id": "incident_ack", "block_id": "b", "value": "1", "type": "button"}]}

FORGED = {
    "user a string": json.dumps({**_GOOD, "user": "UDEPLOY"}),
    "channel a string": json.dumps({**_GOOD, "channel": "C0CHAN"}),
    "actions empty": json.dumps({**_GOOD, "actions": []}),
    "actions strings": json.dumps({**_GOOD, "actions": ["a", "b"]}),
    "actions null": json.dumps({**_GOOD, "actions": None}),
    "team a list": json.dumps({**_GOOD, "team": [1]}),
    "view a string": json.dumps({**_GOOD, "type": "view_submission", "view": "v"}),
    "not json": "{not json",
    "a json list": json.dumps([1, 2]),
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_signed_interactive_payload_of_the_wrong_shape_is_400_without_a_traceback(
        h: Harness, caplog: pytest.LogCaptureFixture, name: str) -> None:
    resp = h.post(urllib.parse.urlencode({"payload": FORGED[name]}), "application/x-www-form-urlencoded")
    assert resp.status_code == 400, (name, resp.status_code, resp.text[:200])
    assert not [r for r in caplog.records if r.levelname == "ERROR" or r.exc_info or "Traceback" in r.getMessage()]


def test_a_signed_slash_command_without_its_fields_is_400(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    resp = h.post(urllib.parse.urlencode({"command": "/specops", "text": "help"}), "application/x-www-form-urlencoded")
    assert resp.status_code == 400, resp.text
    assert not [r for r in caplog.records if r.levelname == "ERROR" or r.exc_info]


def test_both_content_length_and_transfer_encoding_is_refused_and_the_connection_closed(h: Harness) -> None:
    """The request-smuggling shape (RFC 9112 §6.1): 400, then the connection closes (issue 36)."""
    s = _connect(h.server.port)
    try:
        raw = (b"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        answer = _request(s, raw)
        assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
        s.settimeout(5)
        rest = b""
        while chunk := s.recv(65536):  # closed by the server: recv returns b"" (a timeout would fail the test)
            rest += chunk
        assert b"HTTP/1.1" not in rest
    finally:
        s.close()
