"""The fake vLLM's HTTP server on 127.0.0.1, uvicorn as the ops tool sees it: /health, /version, /v1/models,
/metrics, /v1/completions and /v1/chat/completions (streamed or not), with uvicorn's start and access lines.
"""

from __future__ import annotations

import json
import math
import socketserver
import sys
import time
import uuid
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bot.sim.vllm_engine import App
from bot.sim.vllm_settings import Version
from bot.sim.vllm_tracebacks import BIND_FRAMES, StartupError

LOOPBACK = "127.0.0.1"
ROUTES = (("/health", "GET"), ("/metrics", "GET"), ("/version", "GET"), ("/v1/models", "GET"),
          ("/v1/chat/completions", "POST"), ("/v1/completions", "POST"))


def start_message(v: Version, port: int) -> str:
    url = f"http://{LOOPBACK}:{port}"
    if v >= (0, 18, 0):
        return f"Starting vLLM server on {url}"
    if v >= (0, 9, 2):
        return f"Starting vLLM API server 0 on {url}"
    return f"Starting vLLM API server on {url}"


def _error_body(code: int, message: str, kind: str, param: str | None = None) -> dict[str, object]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def count_prompt_tokens(body: Mapping[str, Any], chat: bool) -> int:
    """About four characters a token: there is no tokenizer here, and the stats need only the scale."""
    if chat:
        messages = body.get("messages")
        listed = messages if isinstance(messages, list) else []
        parts = [str(m.get("content", "")) for m in listed if isinstance(m, dict)]
        return max(1, math.ceil(len(" ".join(parts)) / 4) + 4 * len(parts))  # + the chat template's tokens
    prompt = body.get("prompt", "")
    if isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt):
        return len(prompt)  # already token ids
    text = " ".join(str(p) for p in prompt) if isinstance(prompt, list) else str(prompt)
    return max(1, math.ceil(len(text) / 4))


class SimServer(ThreadingHTTPServer):
    daemon_threads = True  # in-flight requests must not hold up the shutdown
    request_queue_size = 128  # a benchmark opens many connections at once

    def __init__(self, port: int, app: App) -> None:
        self.app = app
        super().__init__((LOOPBACK, port), Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that went away mid-answer (a killed benchmark, a dropped forward) is no engine error: the real
        # server logs no traceback for it, so neither does this one (the triage would read one as a crash)
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN, which can stall on a host without DNS
        socketserver.TCPServer.server_bind(self)
        self.server_name = LOOPBACK
        self.server_port = int(self.socket.getsockname()[1])


class Handler(BaseHTTPRequestHandler):
    server: SimServer
    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn does; every reply carries its length
    timeout = 60  # an idle keep-alive connection does not pin a thread forever

    def version_string(self) -> str:
        return "uvicorn"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # http.server's own lines would give the fake away; log_request prints uvicorn's instead

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        app = self.server.app
        if not app.ready.is_set() or not getattr(self, "command", None):
            return  # before startup uvicorn is not running yet: it prints nothing
        try:
            phrase = HTTPStatus(int(code)).phrase
        except ValueError:
            phrase = ""
        host, port = self.client_address[:2]
        version = self.request_version.removeprefix("HTTP/")
        app.log.uvicorn(f'{host}:{port} - "{self.command} {self.path} HTTP/{version}" {code} {phrase}')

    # -- plumbing

    def _send(self, code: int, body: bytes = b"", content_type: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, payload: object) -> None:
        self._send(code, json.dumps(payload).encode())

    def _read_json(self) -> tuple[dict[str, Any] | None, str]:
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            length = 0
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return None, f"JSON decode error: {exc}"
        if not isinstance(data, dict):
            return None, "Input should be a valid dictionary"
        return data, ""

    def _route(self, routes: Mapping[str, Any], other: Mapping[str, Any]) -> None:
        path = self.path.split("?", 1)[0]
        if not self.server.app.ready.is_set():
            self._send(HTTPStatus.SERVICE_UNAVAILABLE)  # still "loading the model"
        elif path in routes:
            routes[path]()
        elif path in other:
            self._json(HTTPStatus.METHOD_NOT_ALLOWED, {"detail": "Method Not Allowed"})
        else:
            self._json(HTTPStatus.NOT_FOUND, {"detail": "Not Found"})

    def _get_routes(self) -> dict[str, Any]:
        return {"/health": self._health, "/v1/models": self._models, "/metrics": self._metrics,
                "/version": self._version}

    def _post_routes(self) -> dict[str, Any]:
        return {"/v1/completions": lambda: self._complete(chat=False),
                "/v1/chat/completions": lambda: self._complete(chat=True)}

    def do_GET(self) -> None:
        self._route(self._get_routes(), self._post_routes())

    def do_POST(self) -> None:
        self._route(self._post_routes(), self._get_routes())

    # -- endpoints

    def _health(self) -> None:
        failing = self.server.app.control().fail_health
        self._send(HTTPStatus.SERVICE_UNAVAILABLE if failing else HTTPStatus.OK)

    def _version(self) -> None:
        self._json(HTTPStatus.OK, {"version": self.server.app.settings.version_text})

    def _models(self) -> None:
        app = self.server.app
        created = int(app.engine.created)
        data = [{"id": name, "object": "model", "created": created, "owned_by": "vllm", "root": app.args.model,
                 "parent": None, "max_model_len": app.args.max_model_len} for name in app.args.served_names]
        self._json(HTTPStatus.OK, {"object": "list", "data": data})

    def _metrics(self) -> None:
        text = self.server.app.engine.metrics(self.server.app.args.served_names[0])
        self._send(HTTPStatus.OK, text.encode(), "text/plain; version=0.0.4; charset=utf-8")

    def _complete(self, chat: bool) -> None:
        app = self.server.app
        body, problem = self._read_json()
        if body is None:
            self._json(HTTPStatus.BAD_REQUEST, _error_body(400, problem, "BadRequestError"))
            return
        request_model = body.get("model")
        if request_model is not None and request_model not in app.args.served_names:
            self._json(HTTPStatus.NOT_FOUND, _error_body(
                404, f"The model `{request_model}` does not exist.", "NotFoundError", "model"))
            return
        limit = body.get("max_completion_tokens") if chat else None
        limit = body.get("max_tokens", 16) if limit is None else limit
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            self._json(HTTPStatus.BAD_REQUEST, _error_body(
                400, f"max_tokens must be at least 1, got {limit}.", "BadRequestError", "max_tokens"))
            return
        prompt_tokens = count_prompt_tokens(body, chat)
        if prompt_tokens + limit > app.args.max_model_len:
            self._json(HTTPStatus.BAD_REQUEST, _error_body(
                400, f"This model's maximum context length is {app.args.max_model_len} tokens. However, you "
                f"requested {prompt_tokens + limit} tokens ({prompt_tokens} in the messages, {limit} in the "
                "completion). Please reduce the length of the messages or completion.", "BadRequestError"))
            return
        if body.get("stream") is True:
            options = body.get("stream_options")
            usage = isinstance(options, dict) and options.get("include_usage") is True
            self._stream(chat, prompt_tokens, limit, usage)
            return
        app.generate(prompt_tokens, limit)
        self._json(HTTPStatus.OK, completion_payload(app.args.served_names[0], chat, prompt_tokens, limit))

    def _stream(self, chat: bool, prompt_tokens: int, limit: int, usage: bool) -> None:
        """`stream: true`: server-sent events, one chunk for each batch of tokens as it is emitted, then
        (with stream_options.include_usage) the usage, then `data: [DONE]`; the connection closes after."""
        app = self.server.app
        model = app.args.served_names[0]
        self.close_connection = True
        self.send_response(HTTPStatus.OK)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("connection", "close")
        self.end_headers()
        ident = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        kind = "chat.completion.chunk" if chat else "text_completion"

        def event(payload: Mapping[str, object]) -> None:
            try:
                self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
                self.wfile.flush()
            except OSError:
                pass  # the client went away; the request still runs to its end, as vLLM's would be aborted

        def chunk(n: int) -> None:
            text = "lorem " * n
            choice: dict[str, object] = ({"index": 0, "delta": {"content": text}, "finish_reason": None} if chat
                                         else {"index": 0, "text": text, "finish_reason": None})
            event({"id": ident, "object": kind, "created": int(time.time()), "model": model, "choices": [choice]})

        app.generate(prompt_tokens, limit, chunk)
        if usage:
            event({"id": ident, "object": kind, "created": int(time.time()), "model": model, "choices": [],
                   "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": limit,
                             "total_tokens": prompt_tokens + limit}})
        try:
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except OSError:
            pass


def completion_payload(model: str, chat: bool, prompt_tokens: int, completion_tokens: int) -> dict[str, object]:
    text = " ".join(["lorem"] * completion_tokens)
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens}
    if chat:
        choice: dict[str, object] = {"index": 0, "message": {"role": "assistant", "content": text},
                                     "logprobs": None, "finish_reason": "length", "stop_reason": None}
        kind, prefix = "chat.completion", "chatcmpl"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length", "stop_reason": None}
        kind, prefix = "text_completion", "cmpl"
    return {"id": f"{prefix}-{uuid.uuid4().hex}", "object": kind, "created": int(time.time()), "model": model,
            "choices": [choice], "usage": usage}


def bind(port: int, app: App) -> SimServer:
    try:
        return SimServer(port, app)
    except OSError as exc:  # e.g. a stale server still holds the port: vLLM dies with this traceback
        raise StartupError(f"OSError: {exc}", BIND_FRAMES) from exc


def announce_start(app: App) -> None:
    log, pid = app.log, app.log.pid
    log.info("api_server.py:1", start_message(app.settings.version, app.args.port))
    for path, method in ROUTES:
        log.info("launcher.py:1", f"Route: {path}, Methods: {method}")
    log.uvicorn(f"Started server process [{pid}]")
    log.uvicorn("Waiting for application startup.")
    log.uvicorn("Application startup complete.")
