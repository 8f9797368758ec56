"""HTTP mode: Slack's signed requests at /slack/events, and /healthz for probes.

waitress in front of `App.dispatch` (what bolt's framework adapters do). Its event loop reads each
request whole before a worker thread sees it, so a slow client holds a socket, never a worker. bolt
verifies the signature and the timestamp; the bot itself drops event retries it already handled.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from slack_bolt import App, BoltRequest
from slack_sdk.signature import SignatureVerifier

# waitress ships no type information (no types-waitress in the dev dependencies): its names are Any here
from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser, ParsingError
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

log = logging.getLogger("specops.http")

MAX_BODY = 1 << 20
Route = Callable[[dict[str, str], bytes], tuple[int, dict[str, str], bytes]]

MAX_CONNECTIONS = 256  # open sockets; past it the longest-idle unserved one is dropped, else a 503
THREADS = 16  # requests served at once; a hung /metrics scrape holds one, not the front
REQUEST_DEADLINE = 10.0  # a request not complete this long after its first byte closes its connection
CHANNEL_TIMEOUT = 5.0  # an idle keep-alive connection (or one that sends nothing) is closed after this
CLEANUP_INTERVAL = 0.5  # how often the deadlines are checked; also the loop's poll timeout

_PHRASES = {s.value: s.phrase for s in HTTPStatus}
_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\nConnection: close\r\n\r\nbusy\n"


class _Parser(HTTPRequestParser):  # type: ignore[misc]
    """Both Content-Length and Transfer-Encoding: the framing is ambiguous, the classic request-smuggling shape
    (RFC 9112 §6.1: a server may reject it, and must close the connection after): refused with 400."""

    def parse_header(self, header_plus: bytes) -> None:
        super().parse_header(header_plus)
        if self.chunked and "CONTENT_LENGTH" in self.headers:
            raise ParsingError("both Content-Length and Transfer-Encoding")


class _Channel(HTTPChannel):  # type: ignore[misc]
    """Remembers when the request being read began: waitress' channel_timeout only measures silence, so
    a client sending a byte every few seconds would keep its socket for ever."""

    parser_class = _Parser
    request_started = 0.0

    def received(self, data: bytes) -> bool:
        if self.request is None and data:
            self.request_started = time.time()
        return bool(super().received(data))


class _Server(TcpWSGIServer):  # type: ignore[misc]
    channel_class = _Channel

    def readable(self) -> bool:
        super().readable()  # runs maintenance(); its overflow bookkeeping is replaced by handle_accept's
        return bool(self.accepting)

    def handle_accept(self) -> None:
        if len(self.active_channels) >= MAX_CONNECTIONS and not self._evict_one():
            try:
                pair = self.accept()
            except OSError:
                return
            if pair is not None:  # every socket is being served: say so at once rather than queue unseen
                try:
                    pair[0].send(_BUSY)
                except OSError:
                    pass
                pair[0].close()
            return
        super().handle_accept()

    def _evict_one(self) -> bool:
        """At the cap, the unserved socket quiet the longest (idle keep-alive, or a slow sender) makes room:
        a Slack request arrives whole at once and so is never the one dropped."""
        idle = [c for c in self.active_channels.values()
                if not c.requests and not c.total_outbufs_len and not c.will_close]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.last_activity)
        oldest.handle_close()
        return True

    def maintenance(self, now: float) -> None:
        super().maintenance(now)
        for channel in list(self.active_channels.values()):
            if channel.request is not None and not channel.requests \
                    and now - channel.request_started > REQUEST_DEADLINE:
                log.info("closed a connection from %s: its request took over %.0fs", channel.addr[0],
                         REQUEST_DEADLINE)
                channel.will_close = True


def _text(status: int, body: bytes) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "text/plain"}, body


def _malformed_payload(body: str, content_type: str) -> str | None:
    """What bolt's middleware would trip on (slack_bolt/request/internals.py reads these keys as dicts or
    lists without checking), said before bolt sees it: a forged shape is a 400, not a traceback."""
    try:
        if content_type.startswith("application/json") or body.startswith("{"):
            data: Any = json.loads(body)
            return None if isinstance(data, dict) else "not a JSON object"
        form = dict(urllib.parse.parse_qsl(body, keep_blank_values=True))
        if "payload" not in form:
            return _malformed_command(form)
        data = json.loads(form["payload"])
    except ValueError:
        return "not JSON"
    if not isinstance(data, dict):
        return "payload not an object"
    if not isinstance(data.get("type"), str):
        return "no type"
    for check in (_malformed_objects, _malformed_actions, _malformed_view):
        why = check(data)
        if why:
            return why
    return None


def _malformed_command(form: dict[str, str]) -> str | None:
    if "command" not in form:
        return None
    missing = [k for k in ("command", "user_id", "channel_id", "team_id") if not form.get(k)]
    return f"missing {', '.join(missing)}" if missing else None


_OBJECT_KEYS = ("user", "team", "view", "container", "message", "enterprise", "channel")


def _malformed_objects(data: dict[str, Any]) -> str | None:
    for key in _OBJECT_KEYS:
        if data.get(key) is not None and not isinstance(data[key], dict):
            return f"{key} not an object"
    for key in ("user", "channel"):
        if isinstance(data.get(key), dict) and not isinstance(data[key].get("id"), str):
            return f"{key}.id missing"
    return None


def _malformed_actions(data: dict[str, Any]) -> str | None:
    if data["type"] != "block_actions" and "actions" not in data:
        return None
    actions = data.get("actions")
    if not isinstance(actions, list) or not actions:
        return "actions not a non-empty list"
    for action in actions:
        if not isinstance(action, dict) or not isinstance(action.get("action_id"), str):
            return "an action without action_id"
        if "value" in action and not isinstance(action["value"], str):
            return "an action value not a string"
    return None


def _malformed_view(data: dict[str, Any]) -> str | None:
    if data["type"] in ("view_submission", "view_closed") and not isinstance(data.get("view"), dict):
        return "view not an object"
    return None


class SlackHTTPServer:
    def __init__(self, app: App, host: str = "127.0.0.1", port: int = 3000,
                 extra_routes: dict[str, Route] | None = None, slack_events: bool = True,
                 signing_secret: str | None = None, get_routes: dict[str, Route] | None = None) -> None:
        self.app = app
        # checked here, before bolt parses the body: a malformed unsigned body gets 401, not a traceback
        # (the App's own secret when none is given: the shape check below must only ever see signed bodies,
        # so an unsigned request stays a 401)
        secret = signing_secret or getattr(app, "_signing_secret", None)
        self._verifier = SignatureVerifier(secret) if secret else None
        self.slack_events = slack_events
        self.routes = dict(extra_routes or {})
        self.get_routes = dict(get_routes or {})
        self._map: dict[int, Any] = {}
        self.httpd: _Server = self._create(host, port)
        self.port: int = int(self.httpd.effective_port)
        self._thread: threading.Thread | None = None
        self._running = threading.Event()
        self._stopped = threading.Event()

    def _create(self, host: str, port: int) -> _Server:
        adj = Adjustments(host=host, port=port, threads=THREADS, ident=None,
                          connection_limit=MAX_CONNECTIONS + 16, channel_timeout=CHANNEL_TIMEOUT,
                          cleanup_interval=CLEANUP_INTERVAL, asyncore_loop_timeout=CLEANUP_INTERVAL,
                          asyncore_use_poll=True,  # select() stops at fd 1024
                          max_request_body_size=MAX_BODY, backlog=256)  # Slack sends bursts
        dispatcher = ThreadedTaskDispatcher()
        dispatcher.set_thread_count(adj.threads)
        return _Server(self._wsgi, map=self._map, dispatcher=dispatcher, adj=adj, sockinfo=adj.listen[0])

    def _wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        status, headers, body = self._handle(environ)
        out = [(k, v) for k, v in headers.items() if k.lower() != "content-length"]
        out.append(("Content-Length", str(len(body))))
        start_response(f"{status} {_PHRASES.get(status, 'Unknown')}", out)
        return [body]

    def _handle(self, environ: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        headers = {k[5:].replace("_", "-").lower(): str(v) for k, v in environ.items() if k.startswith("HTTP_")}
        for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            if environ.get(key):
                headers[key.replace("_", "-").lower()] = str(environ[key])
        path, method = environ.get("PATH_INFO", "/"), environ.get("REQUEST_METHOD", "GET")
        try:
            if method == "GET":
                if path in self.get_routes:
                    return self.get_routes[path](headers, b"")
                if path == "/healthz":  # a server built without the bot's health checks
                    return _text(200, b"ok\n")
                return _text(404, b"not found\n")
            if method != "POST":
                return _text(405, b"method not allowed\n")
            length = int(headers.get("content-length") or 0)  # waitress has checked it against MAX_BODY
            body = environ["wsgi.input"].read(length) if length else b""
            if path in self.routes:
                return self.routes[path](headers, body)
            if path != "/slack/events" or not self.slack_events:
                return _text(404, b"not found\n")
            return self.dispatch(headers, body)
        except Exception as exc:  # one short line: a route's failure is not the front's
            log.warning("%s %s failed: %s: %s", method, path, type(exc).__name__, exc)
            return _text(500, b"internal error\n")

    def dispatch(self, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        if self._verifier is not None:
            ts, sig = headers.get("x-slack-request-timestamp", ""), headers.get("x-slack-signature", "")
            if not ts.isdigit() or not self._verifier.is_valid(body=body, timestamp=ts, signature=sig):
                log.info("rejected an unsigned or wrongly signed request (%d bytes)", len(body))
                return _text(401, b"invalid request signature\n")
        text = body.decode("utf-8", errors="replace")
        why = _malformed_payload(text, headers.get("content-type", ""))
        if why is not None:
            log.warning("rejected a malformed Slack request (%s)", why)
            return _text(400, b"malformed request\n")
        try:
            resp = self.app.dispatch(BoltRequest(body=text, headers={k: [v] for k, v in headers.items()}))
        except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
            log.warning("rejected a malformed Slack request (%s)", type(exc).__name__)
            return _text(400, b"malformed request\n")
        out_headers = {k: (v[0] if isinstance(v, list) else str(v)) for k, v in resp.headers.items()}
        out_headers.pop("content-length", None)
        return resp.status, out_headers, (resp.body or "").encode()

    def start(self) -> SlackHTTPServer:
        self._thread = threading.Thread(target=self.serve_forever, name="slack-http", daemon=True)
        self._thread.start()
        self._running.wait(5)
        return self

    def _close_from_the_loop(self) -> bool:
        """Asks the loop's own thread to close its sockets (closing them under a running poll() is a race); False
        when its wake-up pipe is already gone (an fd closed under the loop, which then closed the trigger)."""
        try:
            self.httpd.trigger.pull_trigger(lambda: wasyncore.close_all(self._map))
        except OSError as exc:
            log.info("the HTTP loop's wake-up pipe is closed (%s); closing its sockets from this thread", exc)
            return False
        return True

    def serve_forever(self) -> None:
        self._running.set()
        try:
            if not self._stopped.is_set():
                wasyncore.loop(timeout=CLEANUP_INTERVAL, use_poll=True, map=self._map)
        finally:
            self._stopped.set()

    def stop(self) -> None:
        if self._running.is_set() and not self._stopped.is_set() and self._close_from_the_loop():
            self._stopped.wait(5)
        else:  # not started, already stopped, or its wake-up pipe gone: the loop ends at its next poll timeout
            wasyncore.close_all(self._map, ignore_all=True)
            if self._thread is None or not self._thread.is_alive():
                self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.httpd.task_dispatcher.shutdown(timeout=5)
