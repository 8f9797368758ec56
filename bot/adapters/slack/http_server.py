"""HTTP mode: Slack's signed requests at /slack/events, and /healthz for probes.

A small threaded server in front of `App.dispatch` (what bolt's framework adapters do). bolt
verifies the signature and the timestamp; the bot itself drops event retries it already handled.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from slack_bolt import App, BoltRequest
from slack_sdk.signature import SignatureVerifier

log = logging.getLogger("specops.http")


def _last_error() -> str:
    exc = sys.exc_info()[1]
    return f"{type(exc).__name__}: {exc}" if exc else "unknown"
MAX_BODY = 1 << 20
Route = Callable[[dict[str, str], bytes], tuple[int, dict[str, str], bytes]]


MAX_CONNECTIONS = 64  # requests in flight at once; more get a 503 at once instead of a thread each
HEADER_TIMEOUT = 5.0  # a client that sends its request this slowly is dropped, freeing its thread


class _Server(HTTPServer):
    """Connections are handed to a pool of handler threads, kept between requests.

    A thread per connection (ThreadingHTTPServer) costs the accepting thread a Thread to build and a
    wait for it to start: under a burst of slash commands that thread queues for the GIL behind the
    handlers and the jobs, and every connection behind it waits in the backlog (measured: up to 35 ms
    between two accepts). Here the accepting thread only queues the socket; an idle worker takes it."""

    request_queue_size = 256  # the default backlog of 5 resets connections when Slack sends a burst

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._pending: queue.SimpleQueue[tuple[Any, Any] | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # one token per worker waiting for a connection
        self._workers = 0
        self._workers_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            try:
                request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\nConnection: close\r\n"
                                b"\r\nbusy\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        self._pending.put((request, client_address))
        if self._idle.acquire(blocking=False):
            return  # a waiting worker takes it
        with self._workers_lock:
            if self._workers >= MAX_CONNECTIONS:
                return  # every worker is busy: the next one free takes it (at most MAX_CONNECTIONS in flight)
            self._workers += 1
        threading.Thread(target=self._work, name="slack-http", daemon=True).start()

    def _work(self) -> None:
        while True:
            item = self._pending.get()
            if item is None:
                return
            request, client_address = item
            try:
                self.finish_request(request, client_address)
            except Exception:
                self.handle_error(request, client_address)
            finally:
                self.shutdown_request(request)
                self._slots.release()
            self._idle.release()

    def server_close(self) -> None:
        super().server_close()
        with self._workers_lock:
            workers = self._workers
        for _ in range(workers):
            self._pending.put(None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.warning("request from %s failed: %s", client_address[0], _last_error())


class SlackHTTPServer:
    def __init__(self, app: App, host: str = "127.0.0.1", port: int = 3000,
                 extra_routes: dict[str, Route] | None = None, slack_events: bool = True,
                 signing_secret: str | None = None, get_routes: dict[str, Route] | None = None) -> None:
        self.app = app
        # checked here, before bolt parses the body: a malformed unsigned body gets 401, not a traceback
        self._verifier = SignatureVerifier(signing_secret) if signing_secret else None
        self.slack_events = slack_events
        self.routes = dict(extra_routes or {})
        self.get_routes = dict(get_routes or {})
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = HEADER_TIMEOUT  # a client that stops sending does not hold a thread
            wbufsize = -1  # the status line, the headers and the body leave in one send (flushed per request)

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
                path = self.path.split("?")[0]
                if path in server.get_routes:
                    self._send(*server.get_routes[path]({k.lower(): v for k, v in self.headers.items()}, b""))
                elif path == "/healthz":  # a server built without the bot's health checks
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
        plain = {"Content-Type": "text/plain"}
        if self._verifier is not None:
            ts, sig = headers.get("x-slack-request-timestamp", ""), headers.get("x-slack-signature", "")
            if not ts.isdigit() or not self._verifier.is_valid(body=body, timestamp=ts, signature=sig):
                log.info("rejected an unsigned or wrongly signed request (%d bytes)", len(body))
                return 401, plain, b"invalid request signature\n"
        text = body.decode("utf-8", errors="replace")
        try:
            resp = self.app.dispatch(BoltRequest(body=text, headers={k: [v] for k, v in headers.items()}))
        except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
            log.warning("rejected a malformed Slack request (%s)", type(exc).__name__)
            return 400, plain, b"malformed request\n"
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
