"""Start the bot: Socket Mode (default) or HTTP mode."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable

from bot.adapters.slack.bot import SpecopsBot
from bot.adapters.slack.http_server import Route, SlackHTTPServer
from bot.adapters.slack.settings import SlackSecrets
from bot.app.services import Services, build_services
from bot.config import Config
from bot.errors import StartError as _StartError
from bot.redact import Redactor, install_log_redaction

log = logging.getLogger("specops")
SERVED: list[Services] = []  # the object graph of each running serve() (tests look at it)


class StartError(_StartError):
    pass


def serve(config: Config, secrets: SlackSecrets, *, http: bool, host: str = "127.0.0.1", port: int = 3000,
          webhook_port: int | None = None, on_ready: Callable[[str], None] | None = None,
          schedule: bool = True) -> None:
    """Run the bot, the scheduler (watches, reports, incidents) and the Alertmanager receiver."""
    from bot.adapters import alertmanager, scheduler

    missing = secrets.missing_for(http)
    if missing:
        raise StartError(f"missing {', '.join(missing)} in the environment (see README: Connect it to Slack)")
    # one redactor, one store, one incident manager for the bot, the scheduler and the webhook
    svc = build_services(config, redactor=Redactor())
    bot = SpecopsBot(config, secrets, services=svc)  # attaches its Slack notifier to svc's incident manager
    install_log_redaction(svc.redactor)
    token = os.environ.get(config.watch.alertmanager_token_env)
    svc.redactor.add_secret(token)
    scheduler.install(svc)
    SERVED.append(svc)
    routes: dict[str, Route] = {
        "/alertmanager": lambda headers, body: alertmanager.receive(config, svc.manager, token, headers, body)}
    sched = scheduler.Scheduler(config).start() if schedule else None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    servers: list[SlackHTTPServer] = []
    try:
        if http:
            servers.append(SlackHTTPServer(bot.app, host, port, routes).start())
            if on_ready:
                on_ready(f"HTTP mode on http://{host}:{servers[0].port}/slack/events "
                         "(GET /healthz, POST /alertmanager)")
        else:
            from slack_bolt.adapter.socket_mode import SocketModeHandler

            if webhook_port is not None:
                # no Slack requests come this way in Socket Mode: only /healthz and /alertmanager
                servers.append(SlackHTTPServer(bot.app, host, webhook_port, routes, slack_events=False).start())
            handler = SocketModeHandler(bot.app, app_token=secrets.slack_app_token)
            handler.connect()  # type: ignore[no-untyped-call]
            if on_ready:
                on_ready("Socket Mode: connected" + (f"; webhooks on http://{host}:{servers[0].port}"
                                                     if servers else ""))
        try:
            stop.wait()
        finally:
            if not http:
                handler.close()  # type: ignore[no-untyped-call]
    except KeyboardInterrupt:
        pass
    finally:
        for server in servers:
            server.stop()
        if sched is not None:
            sched.shutdown()
        bot.shutdown()
        svc.close()
        SERVED.remove(svc)
