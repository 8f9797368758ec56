"""A local Slack Web API emulator and a minimal Socket Mode WebSocket server, for tests.

Both listen on 127.0.0.1 only, on a free port, in daemon threads, and use the standard library only.

`SlackEmulator` answers `slack_sdk.WebClient(token=..., base_url=emu.base_url)` like Slack does: it records every
call, keeps the state of posted messages, takes `files_upload_v2` uploads, checks block/text limits, and can be told
to rate-limit (HTTP 429 + Retry-After) or to fail a method on demand. Files users attached (`add_file`) are
described by `files.info` and served at their `url_private_download` on the emulator's own server, to a request
carrying `Authorization: Bearer <emu.file_token>`; any other request gets Slack's answer to it: a login page
(HTTP 200, text/html).

`WebSocketServer` is what `slack_sdk.socket_mode.builtin.SocketModeClient` (the default client of
`slack_bolt.adapter.socket_mode.SocketModeHandler`) connects to. What that client needs (slack_sdk 3.48):

* it takes the URL from `apps.connections.open` (set `emu.wss_url = ws.url`), or from `handler.client.wss_uri` if
  that is already set (then `apps.connections.open` is not called);
* a plain `ws://` URL works: the client opens a TLS socket only when the port is 443 (or through a proxy), whatever
  the scheme, so `ws://127.0.0.1:PORT/...` (and even `wss://127.0.0.1:PORT/...`) is spoken in clear text;
* `HTTPS_PROXY`/`https_proxy`/`HTTP_PROXY`/`http_proxy`, if set, send both WebClient and the Socket Mode client
  through that proxy (slack_sdk ignores NO_PROXY): tests should unset them (monkeypatch.delenv);
* it sends `GET /link/?ticket=test HTTP/1.1` with Upgrade/Sec-WebSocket-Key and checks Sec-WebSocket-Accept;
* it sends a ping right after the handshake and every `ping_interval` s, and drops the connection as stale if no
  pong with its payload comes back for 4 intervals: the server answers pings with pongs;
* its frame parser cannot unmask frames, so server frames must be unmasked (as RFC 6455 requires anyway);
* it acknowledges an envelope by sending `{"envelope_id": ..., "payload": {...}}` (payload only if bolt's ack has a
  body; `ack("got it")` arrives as `payload: {"text": "got it"}`);
* a `{"type": "disconnect"}` message makes it reconnect through `apps.connections.open`.
"""

from __future__ import annotations

import base64
import contextlib
import email.parser
import email.policy
import hashlib
import itertools
import json
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TEAM_ID = "T0TEST"
TEAM_NAME = "Test Team"
TEAM_URL = "https://test.slack.com/"
BOT_USER_ID = "U0BOT"
BOT_USER_NAME = "specops"
BOT_ID = "B0BOT"
APP_ID = "A0TEST"

MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_SECTION_FIELDS = 10
MAX_FIELD_TEXT = 2000
MAX_HEADER_TEXT = 150
MAX_MESSAGE_TEXT = 40000

UPLOAD_METHOD = "upload"  # the method name under which POSTs to an upload URL are recorded
DOWNLOAD_METHOD = "file.download"  # ... and GETs of a shared file's url_private(_download)

Response = tuple[int, dict[str, Any], dict[str, str]]  # (HTTP status, JSON body, extra headers)
Responder = dict[str, Any] | Callable[["Call"], dict[str, Any]]


@dataclass
class Call:
    """One request the emulator received. `args` merges query string and body; header names are lower case."""

    method: str
    args: dict[str, Any]
    headers: dict[str, str]
    at: float
    rate_limited: bool = False
    status: int = 200
    response: dict[str, Any] = field(default_factory=dict)

    @property
    def token(self) -> str | None:
        auth = self.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:]
        return self.args.get("token")


def _parse_json_arg(value: Any) -> Any:
    """Form-encoded requests carry blocks/attachments/view as JSON strings; JSON requests carry them as values."""
    if isinstance(value, str | bytes):
        return json.loads(value)
    return value


def _text_of(obj: Any) -> str:
    if isinstance(obj, dict):
        return str(obj.get("text", ""))
    return "" if obj is None else str(obj)


def check_blocks(blocks: Any) -> str | None:
    """Slack's own limits on Block Kit; returns a Slack error message or None."""
    if not isinstance(blocks, list):
        return "[ERROR] must provide an array [json-pointer:/blocks]"
    if len(blocks) > MAX_BLOCKS:
        return f"[ERROR] no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]"
    for i, block in enumerate(blocks):
        if not isinstance(block, dict) or "type" not in block:
            return f"[ERROR] missing required field: type [json-pointer:/blocks/{i}]"
        kind = block["type"]
        if kind == "section":
            if "text" in block and len(_text_of(block["text"])) > MAX_SECTION_TEXT:
                return f"[ERROR] must be less than {MAX_SECTION_TEXT + 1} characters [json-pointer:/blocks/{i}/text]"
            fields = block.get("fields") or []
            if len(fields) > MAX_SECTION_FIELDS:
                return f"[ERROR] no more than {MAX_SECTION_FIELDS} items allowed [json-pointer:/blocks/{i}/fields]"
            for j, f in enumerate(fields):
                if len(_text_of(f)) > MAX_FIELD_TEXT:
                    return (
                        f"[ERROR] must be less than {MAX_FIELD_TEXT + 1} characters "
                        f"[json-pointer:/blocks/{i}/fields/{j}/text]"
                    )
            if "text" not in block and not fields:
                return f"[ERROR] must provide text or fields [json-pointer:/blocks/{i}]"
        elif kind == "header" and len(_text_of(block.get("text"))) > MAX_HEADER_TEXT:
            return f"[ERROR] must be less than {MAX_HEADER_TEXT + 1} characters [json-pointer:/blocks/{i}/text]"
    return None


class SlackEmulator:
    """Emulates the Slack Web API on 127.0.0.1 for `slack_sdk.WebClient(base_url=emu.base_url)`.

    Settable state: `usergroups` (id -> user ids), `users` (id -> user dict), `conversations` (id -> channel dict),
    `wss_url` (returned by `apps.connections.open`), `file_token` (the bearer a file download needs), files users
    attached (`add_file()`: `shared_files`, `shared_content`). `respond(method, body_or_callable)` overrides any answer.
    Recorded state: `calls`, `uploads` (file_id -> bytes), `files` (file_id -> metadata incl. channel_id, thread_ts,
    initial_comment once completed), `completed_uploads`, `ephemerals`, `reactions`, `views`, and messages
    (see `messages()` / `message(ts)`). POSTs to upload URLs are recorded as calls to method "upload", GETs of a
    shared file as calls to "file.download" (args: file_id, authorized).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.RLock())
        self.calls: list[Call] = []
        self.usergroups: dict[str, list[str]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.conversations: dict[str, dict[str, Any]] = {}
        self.wss_url: str | None = None
        self.uploads: dict[str, bytes] = {}
        self.files: dict[str, dict[str, Any]] = {}
        self.completed_uploads: list[dict[str, Any]] = []
        self.ephemerals: list[dict[str, Any]] = []
        self.reactions: list[dict[str, str]] = []
        self.views: list[dict[str, Any]] = []
        self.shared_files: dict[str, dict[str, Any]] = {}  # files users attached: id -> what files.info says
        self.shared_content: dict[str, bytes] = {}
        self.file_token: str | None = None  # the bearer a download needs (None: any bearer token)
        self._messages: dict[str, dict[str, Any]] = {}  # ts -> message, in insertion (= ts) order
        self._rate_limits: dict[str, list[int]] = {}  # method -> [remaining, retry_after]
        self._failures: dict[str, list[Any]] = {}  # method -> [remaining, error]
        self._responders: dict[str, Responder] = {}
        self._ts_counter = itertools.count(100, 100)
        self._id_counter = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self, port: int = 0) -> SlackEmulator:
        """Listen on 127.0.0.1:`port` (0: a free one; a fixed one lets a test bring Slack "back" on it)."""
        if self._server is not None:
            return self
        emulator = self

        class Handler(_Handler):
            emu = emulator

        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="slack-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> SlackEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("SlackEmulator is not started")
        return int(self._server.server_address[1])

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}api/"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ------------------------------------------------------------------ configuration

    def rate_limit(self, method: str, times: int = 1, retry_after: int = 1) -> None:
        """The next `times` calls to `method` answer 429, `Retry-After: retry_after`, `{"ok": false, ...}`."""
        with self._cond:
            self._rate_limits[method] = [times, retry_after]

    def fail(self, method: str, error: str = "channel_not_found", times: int = 1) -> None:
        """The next `times` calls to `method` answer HTTP 200 `{"ok": false, "error": error}`."""
        with self._cond:
            self._failures[method] = [times, error]

    def respond(self, method: str, body: Responder | None) -> None:
        """Answer `method` with this body (or `body(call)`) from now on; None restores the built-in answer."""
        with self._cond:
            if body is None:
                self._responders.pop(method, None)
            else:
                self._responders[method] = body

    def reset(self) -> None:
        """Forget calls, messages, uploads and pending rate limits/failures (keeps settable data)."""
        with self._cond:
            self.calls.clear()
            self.uploads.clear()
            self.files.clear()
            self.completed_uploads.clear()
            self.ephemerals.clear()
            self.reactions.clear()
            self.views.clear()
            self._messages.clear()
            self._rate_limits.clear()
            self._failures.clear()

    def add_file(self, name: str, content: bytes, mimetype: str = "text/plain", filetype: str = "text",
                 size: int | None = None, user: str = "UDEPLOY") -> dict[str, Any]:
        """A file a user attached to a message: returns its files.info object (put it in an event's `files`).
        `size` overrides the size Slack reports (to test a client that trusts it, or does not)."""
        with self._cond:
            file_id = self._next_id("F")
            base = f"{self.root_url}files-pri/{TEAM_ID}-{file_id}"
            info = {"id": file_id, "name": name, "title": name, "mimetype": mimetype, "filetype": filetype,
                    "size": len(content) if size is None else size, "user": user, "created": int(time.time()),
                    "mode": "hosted", "is_external": False, "url_private": f"{base}/{name}",
                    "url_private_download": f"{base}/download/{name}"}
            self.shared_files[file_id] = info
            self.shared_content[file_id] = content
            return _copy(info)

    # ------------------------------------------------------------------ inspection

    def calls_to(self, method: str) -> list[Call]:
        with self._cond:
            return [c for c in self.calls if c.method == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 5.0) -> list[Call]:
        """Wait until `method` was called at least `count` times; return those calls."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [c for c in self.calls if c.method == method]
                if len(found) >= count:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = [(c.method, c.status, c.response.get("error")) for c in self.calls]
                    raise AssertionError(
                        f"timed out after {timeout}s waiting for {count} call(s) to {method}, got {len(found)}; "
                        f"calls seen: {seen}"
                    )
                self._cond.wait(min(remaining, 0.05))

    def messages(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Posted messages (latest state), oldest first: channel, ts, thread_ts, text, blocks, edited..."""
        with self._cond:
            return [_copy(m) for m in self._messages.values() if channel is None or m["channel"] == channel]

    def message(self, ts: str) -> dict[str, Any]:
        with self._cond:
            if ts not in self._messages:
                raise KeyError(f"no message with ts {ts}; known: {list(self._messages)}")
            msg: dict[str, Any] = _copy(self._messages[ts])
            return msg

    def thread(self, ts: str) -> list[dict[str, Any]]:
        """The replies in the thread of `ts` (not including the parent)."""
        with self._cond:
            return [_copy(m) for m in self._messages.values() if m.get("thread_ts") == ts and m["ts"] != ts]

    # ------------------------------------------------------------------ request handling (called by the handler)

    def _handle(self, method: str, args: dict[str, Any], headers: dict[str, str]) -> Response:
        with self._cond:
            call = Call(method=method, args=args, headers=headers, at=time.time())
            status, body, extra = self._answer(call)
            call.status, call.response = status, body
            call.rate_limited = status == 429
            self.calls.append(call)
            self._cond.notify_all()
            return status, body, extra

    def _handle_upload(self, file_id: str, data: bytes, headers: dict[str, str]) -> tuple[int, str]:
        with self._cond:
            call = Call(method=UPLOAD_METHOD, args={"file_id": file_id, "length": len(data)}, headers=headers,
                        at=time.time())
            if file_id not in self.files:
                status, text = 404, "file_not_found"
            else:
                self.uploads[file_id] = data
                self.files[file_id]["uploaded_length"] = len(data)
                status, text = 200, f"OK - {len(data)}"
            call.status, call.response = status, {"body": text}
            self.calls.append(call)
            self._cond.notify_all()
            return status, text

    def _handle_download(self, path: str, headers: dict[str, str]) -> tuple[int, bytes, str]:
        """GET of a url_private(_download): the bytes for the right bearer token, a login page otherwise."""
        with self._cond:
            file_id = path[len("/files-pri/"):].split("/")[0].partition("-")[2]
            auth = headers.get("authorization", "")
            token = auth[7:] if auth.lower().startswith("bearer ") else None
            ok = token is not None and (self.file_token is None or token == self.file_token)
            call = Call(method=DOWNLOAD_METHOD, args={"file_id": file_id, "authorized": ok}, headers=headers,
                        at=time.time())
            if file_id not in self.shared_files:
                status, body, ctype = 404, b"file not found", "text/plain"
            elif not ok:
                status, body, ctype = 200, b"<!DOCTYPE html><html><body>Sign in to Slack</body></html>", \
                    "text/html; charset=utf-8"
            else:
                status, body, ctype = 200, self.shared_content[file_id], self.shared_files[file_id]["mimetype"]
            call.status, call.response = status, {"length": len(body), "content_type": ctype}
            self.calls.append(call)
            self._cond.notify_all()
            return status, body, ctype

    def _answer(self, call: Call) -> Response:
        method = call.method
        limit = self._rate_limits.get(method)
        if limit and limit[0] > 0:
            limit[0] -= 1
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(limit[1])}
        failure = self._failures.get(method)
        if failure and failure[0] > 0:
            failure[0] -= 1
            return 200, {"ok": False, "error": failure[1]}, {}
        responder = self._responders.get(method)
        if responder is not None:
            body = responder(call) if callable(responder) else _copy(responder)
            return 200, body, {}
        builtin = getattr(self, "_m_" + method.replace(".", "_"), None)
        try:
            body = builtin(call.args) if builtin is not None else {"ok": True}
        except (ValueError, TypeError) as e:  # bad JSON in an argument, etc.
            body = {"ok": False, "error": "invalid_arguments", "response_metadata": {"messages": [str(e)]}}
        return 200, body, {}

    def _next_ts(self) -> str:
        n = next(self._ts_counter)
        return f"{1700000000 + n // 1_000_000}.{n % 1_000_000:06d}"

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}0TEST{next(self._id_counter):04d}"

    @staticmethod
    def _check_message(args: dict[str, Any], *, require_content: bool = True) -> dict[str, Any] | None:
        text = args.get("text")
        if text is not None and len(str(text)) > MAX_MESSAGE_TEXT:
            return {"ok": False, "error": "msg_too_long"}
        if args.get("blocks") not in (None, ""):
            try:
                blocks = _parse_json_arg(args["blocks"])
            except ValueError:
                return {"ok": False, "error": "invalid_blocks_format"}
            problem = check_blocks(blocks)
            if problem:
                return {"ok": False, "error": "invalid_blocks", "response_metadata": {"messages": [problem]}}
        content = ("blocks", "attachments", "markdown_text")
        if require_content and not text and not any(args.get(k) for k in content):
            return {"ok": False, "error": "no_text"}
        return None

    # ------------------------------------------------------------------ built-in methods

    def _m_auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": TEAM_URL, "team": TEAM_NAME, "user": BOT_USER_NAME, "team_id": TEAM_ID,
                "user_id": BOT_USER_ID, "bot_id": BOT_ID, "is_enterprise_install": False}

    def _m_chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = args.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        error = self._check_message(args)
        if error:
            return error
        ts = self._next_ts()
        msg: dict[str, Any] = {
            "type": "message", "channel": channel, "ts": ts, "thread_ts": args.get("thread_ts") or None,
            "text": args.get("text") or "", "blocks": _parse_json_arg(args["blocks"]) if args.get("blocks") else None,
            "attachments": _parse_json_arg(args["attachments"]) if args.get("attachments") else None,
            "user": BOT_USER_ID, "bot_id": BOT_ID, "team": TEAM_ID, "edited": None, "updates": 0,
        }
        self._messages[ts] = msg
        echo = {k: v for k, v in msg.items() if k not in ("channel", "edited", "updates") and v is not None}
        return {"ok": True, "channel": channel, "ts": ts, "message": echo}

    def _m_chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, ts = args.get("channel"), args.get("ts")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        msg = self._messages.get(str(ts))
        if msg is None or msg["channel"] != channel:
            return {"ok": False, "error": "message_not_found"}
        error = self._check_message(args, require_content=False)
        if error:
            return error
        if "text" in args:
            msg["text"] = args["text"] or ""
        if args.get("blocks") is not None:
            msg["blocks"] = _parse_json_arg(args["blocks"]) if args["blocks"] != "" else None
        if args.get("attachments") is not None:
            msg["attachments"] = _parse_json_arg(args["attachments"]) if args["attachments"] != "" else None
        msg["edited"] = {"user": BOT_USER_ID, "ts": self._next_ts()}
        msg["updates"] += 1
        echo = {k: v for k, v in msg.items() if k not in ("channel", "edited", "updates") and v is not None}
        return {"ok": True, "channel": channel, "ts": msg["ts"], "text": msg["text"], "message": echo}

    def _m_chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("channel"):
            return {"ok": False, "error": "channel_not_found"}
        if not args.get("user"):
            return {"ok": False, "error": "user_not_found"}
        error = self._check_message(args)
        if error:
            return error
        ts = self._next_ts()
        self.ephemerals.append({
            "channel": args["channel"], "user": args["user"], "ts": ts, "thread_ts": args.get("thread_ts"),
            "text": args.get("text") or "", "blocks": _parse_json_arg(args["blocks"]) if args.get("blocks") else None,
        })
        return {"ok": True, "message_ts": ts}

    def _m_chat_getPermalink(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, ts = args.get("channel"), str(args.get("message_ts") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not ts:
            return {"ok": False, "error": "message_not_found"}
        return {"ok": True, "channel": channel,
                "permalink": f"{TEAM_URL}archives/{channel}/p{ts.replace('.', '')}"}

    def _m_conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = args.get("channel")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        info = self.conversations.get(channel) or {
            "id": channel, "name": f"channel-{str(channel).lower()}", "is_channel": True, "is_private": False,
            "is_im": False, "is_member": True, "is_archived": False, "context_team_id": TEAM_ID,
        }
        return {"ok": True, "channel": _copy(info)}

    def _m_conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = args.get("channel")
        msgs = [m for m in self._messages.values()
                if m["channel"] == channel and (not m.get("thread_ts") or m["thread_ts"] == m["ts"])]
        return {"ok": True, "messages": [_public(m) for m in reversed(msgs)], "has_more": False}

    def _m_conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, ts = args.get("channel"), str(args.get("ts") or "")
        parent = self._messages.get(ts)
        if parent is None or parent["channel"] != channel:
            return {"ok": False, "error": "thread_not_found"}
        replies = [m for m in self._messages.values() if m.get("thread_ts") == ts and m["ts"] != ts]
        return {"ok": True, "messages": [_public(m) for m in [parent, *replies]], "has_more": False}

    def _m_users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = args.get("user")
        if not user:
            return {"ok": False, "error": "user_not_found"}
        info = self.users.get(user) or {
            "id": user, "name": f"user-{str(user).lower()}", "real_name": f"User {user}", "team_id": TEAM_ID,
            "is_bot": False, "deleted": False, "tz": "UTC",
            "profile": {"display_name": f"user-{str(user).lower()}", "real_name": f"User {user}"},
        }
        return {"ok": True, "user": _copy(info)}

    def _m_usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        group = args.get("usergroup")
        if group not in self.usergroups:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": list(self.usergroups[group])}

    def _m_views_open(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("trigger_id") and not args.get("interactivity_pointer"):
            return {"ok": False, "error": "invalid_arguments"}
        view = _parse_json_arg(args.get("view")) or {}
        opened = {**view, "id": self._next_id("V"), "team_id": TEAM_ID, "app_id": APP_ID, "bot_id": BOT_ID,
                  "hash": uuid.uuid4().hex}
        self.views.append(opened)
        return {"ok": True, "view": opened}

    def _m_reactions_add(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, ts, name = args.get("channel"), str(args.get("timestamp") or ""), args.get("name")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not name:
            return {"ok": False, "error": "invalid_name"}
        if not ts:
            return {"ok": False, "error": "message_not_found"}
        reaction = {"channel": channel, "ts": ts, "name": name}
        if reaction in self.reactions:
            return {"ok": False, "error": "already_reacted"}
        self.reactions.append(reaction)
        return {"ok": True}

    def _m_apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        if not self.wss_url:
            return {"ok": False, "error": "socket_mode_not_configured"}  # set emu.wss_url = ws.url
        return {"ok": True, "url": self.wss_url}

    def _m_files_info(self, args: dict[str, Any]) -> dict[str, Any]:
        info = self.shared_files.get(str(args.get("file") or ""))
        if info is None:
            return {"ok": False, "error": "file_not_found"}
        return {"ok": True, "file": _copy(info), "comments": [], "response_metadata": {"next_cursor": ""}}

    def _m_files_getUploadURLExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        filename, length = args.get("filename"), args.get("length")
        if not filename or length in (None, ""):
            return {"ok": False, "error": "invalid_arguments"}
        file_id = self._next_id("F")
        self.files[file_id] = {"id": file_id, "filename": filename, "length": int(length),
                               "alt_txt": args.get("alt_txt"), "snippet_type": args.get("snippet_type")}
        return {"ok": True, "upload_url": f"{self.root_url}upload/{file_id}", "file_id": file_id}

    def _m_files_completeUploadExternal(self, args: dict[str, Any]) -> dict[str, Any]:
        items = _parse_json_arg(args.get("files") or "[]")
        if not items:
            return {"ok": False, "error": "invalid_arguments"}
        out = []
        for item in items:
            file_id = item.get("id")
            if file_id not in self.uploads:
                return {"ok": False, "error": "file_not_found"}
            meta = self.files[file_id]
            meta.update(title=item.get("title") or meta["filename"], channel_id=args.get("channel_id"),
                        channels=args.get("channels"), thread_ts=args.get("thread_ts"),
                        initial_comment=args.get("initial_comment"), completed=True)
            out.append({"id": file_id, "title": meta["title"], "name": meta["filename"],
                        "size": len(self.uploads[file_id])})
        self.completed_uploads.append({
            "files": _copy(out), "channel_id": args.get("channel_id"), "channels": args.get("channels"),
            "thread_ts": args.get("thread_ts"), "initial_comment": args.get("initial_comment"),
        })
        return {"ok": True, "files": out}


def _copy(obj: Any) -> Any:
    return json.loads(json.dumps(obj))


def _public(msg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in _copy(msg).items() if k not in ("channel", "updates") and v is not None}


def _single(values: dict[str, list[str]]) -> dict[str, Any]:
    return {k: v[-1] for k, v in values.items()}


def _parse_body(content_type: str, body: bytes) -> dict[str, Any]:
    if not body:
        return {}
    ctype = content_type.split(";")[0].strip().lower()
    if ctype == "application/json":
        parsed = json.loads(body.decode("utf-8"))
        return parsed if isinstance(parsed, dict) else {"_json": parsed}
    if ctype == "multipart/form-data":
        head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
        args: dict[str, Any] = {}
        for part in msg.iter_parts():
            name = str(part.get_param("name", header="content-disposition"))
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else b""
            if part.get_filename() is not None:
                args[name] = data
                args.setdefault("filename", part.get_filename())
            else:
                args[name] = data.decode("utf-8")
        return args
    return _single(parse_qs(body.decode("utf-8"), keep_blank_values=True))


class _Handler(BaseHTTPRequestHandler):
    emu: SlackEmulator
    server_version = "SlackEmulator/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch(b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._dispatch(self.rfile.read(length) if length else b"")

    def _dispatch(self, body: bytes) -> None:
        parts = urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        if parts.path.startswith("/files-pri/") and self.command == "GET":
            status, data, ctype = self.emu._handle_download(parts.path, headers)
            self._send(status, data, ctype, {})
            return
        if parts.path.startswith("/upload/") and self.command == "POST":
            status, text = self.emu._handle_upload(parts.path[len("/upload/"):], body, headers)
            self._send(status, text.encode(), "text/plain; charset=utf-8", {})
            return
        if not parts.path.startswith("/api/") or len(parts.path) <= len("/api/"):
            self._send(404, b'{"ok": false, "error": "unknown_method"}', "application/json; charset=utf-8", {})
            return
        method = parts.path[len("/api/"):].strip("/")
        args = _single(parse_qs(parts.query, keep_blank_values=True))
        try:
            args.update(_parse_body(headers.get("content-type", ""), body))
        except (ValueError, UnicodeDecodeError):
            args["_raw_body"] = body
        status, payload, extra = self.emu._handle(method, args, headers)
        self._send(status, json.dumps(payload).encode(), "application/json; charset=utf-8", extra)

    def _send(self, status: int, data: bytes, content_type: str, extra: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


# ====================================================================== WebSocket (Socket Mode)

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def ws_accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()


def ws_frame(opcode: int, payload: bytes, mask: bool = False) -> bytes:
    """One final frame; servers send unmasked frames (RFC 6455 5.1), clients masked ones."""
    head = bytes([0x80 | opcode])
    n = len(payload)
    bit = 0x80 if mask else 0
    if n <= 125:
        head += bytes([bit | n])
    elif n <= 0xFFFF:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if mask:
        key = uuid.uuid4().bytes[:4]
        return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return head + payload


class _Closed(Exception):
    pass


class _WsConn:
    def __init__(self, sock: socket.socket, path: str, headers: dict[str, str]) -> None:
        self.sock = sock
        self.path = path
        self.headers = headers
        self.send_lock = threading.Lock()
        self.open = True

    def send(self, opcode: int, payload: bytes) -> None:
        with self.send_lock:
            if not self.open:
                raise _Closed("connection closed")
            self.sock.sendall(ws_frame(opcode, payload))


class WebSocketServer:
    """A minimal RFC 6455 server for slack_sdk's builtin Socket Mode client (see the module docstring).

    Point the client at it with `emu.wss_url = ws.url` (via `apps.connections.open`) or
    `handler.client.wss_uri = ws.url`; a `ws://` URL works with slack_sdk's builtin client on any port but 443.
    Each connection gets a `hello` message; `send_envelope()` pushes an envelope, `wait_ack()` waits for the
    client's `{"envelope_id": ...}` answer. Everything clients send is in `received` (parsed JSON text frames).
    """

    def __init__(self, path: str = "/link/?ticket=test", send_hello: bool = True) -> None:
        self.path = path
        self.send_hello = send_hello
        self.connected = threading.Event()
        self.received: list[dict[str, Any]] = []
        self.pings: list[bytes] = []
        self.handshakes: list[dict[str, Any]] = []
        self.close_codes: list[int | None] = []
        self._cond = threading.Condition()
        self._conns: list[_WsConn] = []
        self._workers: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._port = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> WebSocketServer:
        if self._listener is not None:
            return self
        self._stopping.clear()
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(8)
        lsock.settimeout(0.05)
        self._listener = lsock
        self._port = int(lsock.getsockname()[1])
        self._thread = threading.Thread(target=self._accept_loop, name="ws-server-accept", daemon=True)
        self._thread.start()
        return self

    def stop(self, code: int = 1001) -> None:
        """Send a close frame to every client, close all sockets and join all threads."""
        self._stopping.set()
        with self._cond:
            conns = list(self._conns)
        for conn in conns:
            self._close_conn(conn, code)
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._cond:
            workers = list(self._workers)
        for worker in workers:
            if worker is not threading.current_thread():
                worker.join(timeout=5)
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def __enter__(self) -> WebSocketServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self._port}{self.path}"

    @property
    def connection_count(self) -> int:
        with self._cond:
            return sum(1 for c in self._conns if c.open)

    def threads(self) -> list[threading.Thread]:
        """The threads this server started that are still alive (for leak checks)."""
        with self._cond:
            ts = list(self._workers)
        if self._thread is not None:
            ts.append(self._thread)
        return [t for t in ts if t.is_alive()]

    # ------------------------------------------------------------------ talking to clients

    def wait_connected(self, timeout: float = 5.0) -> None:
        if not self.connected.wait(timeout):
            raise AssertionError(f"no WebSocket client connected to {self.url} within {timeout}s")

    def send(self, message: dict[str, Any]) -> None:
        """Send a JSON text frame to every connected client."""
        with self._cond:
            conns = [c for c in self._conns if c.open]
        if not conns:
            raise AssertionError(f"no WebSocket client is connected to {self.url}")
        data = json.dumps(message).encode()
        for conn in conns:
            try:
                conn.send(OP_TEXT, data)
            except (OSError, _Closed):
                self._close_conn(conn, None)

    def send_envelope(self, payload: dict[str, Any], type: str = "slash_commands",
                      envelope_id: str | None = None, accepts_response_payload: bool = True) -> str:
        envelope_id = envelope_id or str(uuid.uuid4())
        self.send({"envelope_id": envelope_id, "type": type, "payload": payload,
                   "accepts_response_payload": accepts_response_payload})
        return envelope_id

    def send_disconnect(self, reason: str = "refresh_requested") -> None:
        """Slack's `disconnect` message: the builtin client reconnects through apps.connections.open."""
        self.send({"type": "disconnect", "reason": reason, "debug_info": {"host": "emulator"}})

    def close_clients(self, code: int = 1000) -> None:
        with self._cond:
            conns = list(self._conns)
        for conn in conns:
            self._close_conn(conn, code)

    def wait_ack(self, envelope_id: str, timeout: float = 5.0) -> dict[str, Any]:
        """Wait for the client's message carrying `envelope_id` (its ack) and return it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for msg in self.received:
                    if msg.get("envelope_id") == envelope_id:
                        return msg
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"no ack for envelope {envelope_id} within {timeout}s; received: {self.received}"
                    )
                self._cond.wait(min(remaining, 0.05))

    # ------------------------------------------------------------------ internals

    def _accept_loop(self) -> None:
        assert self._listener is not None
        listener = self._listener
        while not self._stopping.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            thread = threading.Thread(target=self._serve, args=(sock,), name="ws-server-conn", daemon=True)
            with self._cond:
                self._workers = [w for w in self._workers if w.is_alive()]
                self._workers.append(thread)
            thread.start()

    def _recv_exact(self, sock: socket.socket, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            if self._stopping.is_set():
                raise _Closed("server stopping")
            try:
                chunk = sock.recv(n - len(buf))
            except TimeoutError:
                continue
            if not chunk:
                raise _Closed("peer closed")
            buf += chunk
        return buf

    def _handshake(self, sock: socket.socket) -> _WsConn | None:
        raw = b""
        deadline = time.monotonic() + 5
        while b"\r\n\r\n" not in raw:
            if self._stopping.is_set() or time.monotonic() > deadline or len(raw) > 65536:
                return None
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                continue
            if not chunk:
                return None
            raw += chunk
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        request_line = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        path = request_line[1] if len(request_line) > 1 else ""
        self.handshakes.append({"path": path, "headers": headers})
        key = headers.get("sec-websocket-key")
        if request_line[0] != "GET" or "websocket" not in headers.get("upgrade", "").lower() or not key:
            sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return None
        sock.sendall(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {ws_accept_key(key)}\r\n\r\n".encode()
        )
        if rest:  # a client does not send frames before the 101; keep it simple
            return None
        return _WsConn(sock, path, headers)

    def _serve(self, sock: socket.socket) -> None:
        sock.settimeout(0.05)
        conn = None
        try:
            conn = self._handshake(sock)
            if conn is None:
                return
            with self._cond:
                if self._stopping.is_set():
                    return
                self._conns.append(conn)
            if self.send_hello:
                conn.send(OP_TEXT, json.dumps({
                    "type": "hello", "num_connections": 1,
                    "connection_info": {"app_id": APP_ID},
                    "debug_info": {"host": "slack-emulator", "build_number": 1,
                                   "approximate_connection_time": 3600},
                }).encode())
            self.connected.set()
            self._read_loop(conn)
        except (OSError, _Closed):
            pass
        finally:
            if conn is not None:
                self._close_conn(conn, None)
            else:
                with contextlib.suppress(OSError):
                    sock.close()

    def _read_loop(self, conn: _WsConn) -> None:
        fragments: list[bytes] = []
        frag_opcode = OP_TEXT
        while conn.open:
            b1, b2 = self._recv_exact(conn.sock, 2)
            fin, opcode = b1 & 0x80, b1 & 0x0F
            masked, n = b2 & 0x80, b2 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._recv_exact(conn.sock, 2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._recv_exact(conn.sock, 8))
            key = self._recv_exact(conn.sock, 4) if masked else b""
            data = self._recv_exact(conn.sock, n) if n else b""
            if masked:
                data = bytes(b ^ key[i % 4] for i, b in enumerate(data))
            if opcode == OP_PING:
                self.pings.append(data)
                conn.send(OP_PONG, data)
            elif opcode == OP_PONG:
                continue
            elif opcode == OP_CLOSE:
                code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else None
                self.close_codes.append(code)
                with contextlib.suppress(OSError, _Closed):
                    conn.send(OP_CLOSE, data[:2])
                return
            elif opcode in (OP_TEXT, OP_BINARY, OP_CONT):
                if opcode != OP_CONT:
                    fragments, frag_opcode = [], opcode
                fragments.append(data)
                if fin:
                    self._on_message(frag_opcode, b"".join(fragments))
                    fragments = []

    def _on_message(self, opcode: int, data: bytes) -> None:
        try:
            msg = json.loads(data.decode("utf-8"))
        except ValueError:
            msg = {"_raw": data.decode("utf-8", "replace") if opcode == OP_TEXT else data.hex()}
        if not isinstance(msg, dict):
            msg = {"_json": msg}
        with self._cond:
            self.received.append(msg)
            self._cond.notify_all()

    def _close_conn(self, conn: _WsConn, code: int | None) -> None:
        if code is not None and conn.open:
            with contextlib.suppress(OSError, _Closed):
                conn.send(OP_CLOSE, struct.pack("!H", code))
        with conn.send_lock:
            was_open, conn.open = conn.open, False
        if was_open:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                conn.sock.close()
        with self._cond:
            if not any(c.open for c in self._conns):
                self.connected.clear()
            self._cond.notify_all()


def close_socket_mode(handler_or_client: Any, ws: WebSocketServer | None = None, timeout: float = 5.0) -> None:
    """Close a slack_bolt `SocketModeHandler` (or slack_sdk builtin `SocketModeClient`) in ~0.1 s instead of ~4 s.

    `client.close()` alone joins a reader blocked in `recv()` for up to its 3 s socket timeout (closing a socket does
    not wake a `recv()` in another thread), then a message loop blocked for up to 1 s on its queue. So: no reconnect,
    stop the message loop, have the server close the connection (the reader sees the close frame), then close.
    """
    client = getattr(handler_or_client, "client", handler_or_client)
    client.auto_reconnect_enabled = False
    client.default_auto_reconnect_enabled = False
    client.closed = True
    client.message_queue.put(None)  # wakes process_messages(), which then sees `closed`
    if ws is not None:
        ws.close_clients()
    closer = threading.Thread(target=client.close, name="socket-mode-close", daemon=True)
    closer.start()
    closer.join(timeout)
    if closer.is_alive():
        raise AssertionError(f"the Socket Mode client did not close within {timeout}s")
