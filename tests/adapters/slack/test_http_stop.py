"""Stopping the HTTP front when its loop's wake-up pipe was closed under it (seen once in CI: the stop
raised EBADF from waitress's trigger and the test failed in teardown). Real sockets on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import time

from slack_bolt import App

from bot.adapters.slack.http_server import SlackHTTPServer


def _app() -> App:
    return App(token="xoxb-stop-test", signing_secret="stop-test-secret", token_verification_enabled=False)


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


def test_stop_closes_the_server_when_the_wake_up_pipe_is_gone() -> None:
    server = SlackHTTPServer(_app(), "127.0.0.1", 0).start()
    trigger = server.httpd.trigger
    for fd in list(trigger._fds):  # what a double close elsewhere in the process does to them
        os.close(fd)
    server.stop()  # no OSError
    deadline = time.monotonic() + 10
    while not _refused(server.port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _refused(server.port)
    assert server._thread is not None and not server._thread.is_alive()


def test_stop_twice_is_quiet() -> None:
    server = SlackHTTPServer(_app(), "127.0.0.1", 0).start()
    server.stop()
    server.stop()
    assert _refused(server.port)
