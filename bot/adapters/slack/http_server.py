"""HTTP mode: Slack's signed requests at /slack/events, and /healthz for probes.

A small threaded server in front of `App.dispatch` (what bolt's framework adapters do). bolt
verifies the signature and the timestamp; the bot itself drops event retries it already handled.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from slack_bolt import App, BoltRequest

log = logging.getLogger("specops.http")
MAX_BODY = 1 << 20
Route = Callable[[dict[str, str], bytes], tuple[int, dict[str, str], bytes]]


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default backlog of 5 resets connections when Slack sends a burst
    daemon_threads = True


class SlackHTTPServer:
    def __init__(self, app: App, host: str = "127.0.0.1", port: int = 3000,
                 extra_routes: dict[str, Route] | None = None, slack_events: bool = True) -> None:
        self.app = app
        self.slack_events = slack_events
        self.routes = dict(extra_routes or {})
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 15  # a client that stops sending does not hold a thread forever

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("%s " + format, self.address_string(), *args)

            def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.split("?")[0] == "/healthz":
                    self._send(200, {"Content-Type": "text/plain"}, b"ok\n")
                else:
                    self._send(404, {"Content-Type": "text/plain"}, b"not found\n")

            def do_POST(self) -> None:
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    self._send(400, {"Content-Type": "text/plain"}, b"bad Content-Length\n")
                    return
                if length < 0 or length > MAX_BODY:
                    self._send(413, {"Content-Type": "text/plain"}, b"too large\n")
                    return
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                path = self.path.split("?")[0]
                if path in server.routes:
                    self._send(*server.routes[path](headers, body))
                    return
                if path != "/slack/events" or not server.slack_events:
                    self._send(404, {"Content-Type": "text/plain"}, b"not found\n")
                    return
                self._send(*server.dispatch(headers, body))

        self.httpd = _Server((host, port), Handler)
        self.port: int = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    def dispatch(self, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        text = body.decode("utf-8", errors="replace")
        resp = self.app.dispatch(BoltRequest(body=text, headers={k: [v] for k, v in headers.items()}))
        out_headers = {k: (v[0] if isinstance(v, list) else str(v)) for k, v in resp.headers.items()}
        out_headers.pop("content-length", None)
        return resp.status, out_headers, (resp.body or "").encode()

    def start(self) -> SlackHTTPServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="slack-http", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
