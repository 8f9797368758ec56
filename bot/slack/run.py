"""Start the bot: Socket Mode (default) or HTTP mode."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable

from bot.config import Config
from bot.redact import install_log_redaction
from bot.slack.bot import SpecopsBot
from bot.slack.http_server import Route, SlackHTTPServer
from bot.slack.settings import SlackSecrets

log = logging.getLogger("specops")


class StartError(Exception):
    pass


def serve(config: Config, secrets: SlackSecrets, *, http: bool, host: str = "127.0.0.1", port: int = 3000,
          extra_routes: dict[str, Route] | None = None, on_ready: Callable[[str], None] | None = None) -> None:
    missing = secrets.missing_for(http)
    if missing:
        raise StartError(f"missing {', '.join(missing)} in the environment (see README: Connect it to Slack)")
    bot = SpecopsBot(config, secrets)
    install_log_redaction(bot.redactor)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        if http:
            server = SlackHTTPServer(bot.app, host, port, extra_routes,
                                     signing_secret=secrets.slack_signing_secret).start()
            if on_ready:
                on_ready(f"HTTP mode on http://{host}:{server.port}/slack/events (GET /healthz)")
            try:
                stop.wait()
            finally:
                server.stop()
        else:
            from slack_bolt.adapter.socket_mode import SocketModeHandler

            handler = SocketModeHandler(bot.app, app_token=secrets.slack_app_token)
            handler.connect()  # type: ignore[no-untyped-call]
            if on_ready:
                on_ready("Socket Mode: connected")
            try:
                stop.wait()
            finally:
                handler.close()  # type: ignore[no-untyped-call]
    except KeyboardInterrupt:
        pass
    finally:
        bot.shutdown()
