"""Start the bot: Socket Mode (default) or HTTP mode."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.adapters.selfmetrics import BotHealth
from bot.adapters.slack.bot import SpecopsBot
from bot.adapters.slack.http_server import Route, SlackHTTPServer
from bot.adapters.slack.settings import SlackSecrets
from bot.app.services import Services, build_services
from bot.config import Config
from bot.errors import StartError as _StartError
from bot.redact import install_log_redaction, redactor_for

log = logging.getLogger("specops")


class StartError(_StartError):
    pass


@dataclass
class Assembly:
    """What `serve` runs: one object graph for the bot, the scheduler and the webhook."""

    services: Services
    bot: SpecopsBot
    routes: dict[str, Route]
    scheduler: Any  # adapters.scheduler.Scheduler, or None when scheduling is off
    health: BotHealth

    def get_routes(self) -> dict[str, Route]:
        return {"/healthz": self.health.healthz, "/metrics": self.health.metrics}

    def close(self) -> None:
        self.health.close()
        if self.scheduler is not None:
            self.scheduler.shutdown()
        self.bot.shutdown()
        self.services.close()


def assemble(config: Config, secrets: SlackSecrets, *, http: bool, schedule: bool = True,
             client: Any = None) -> Assembly:
    """Build the process's objects once: one redactor, one store, one incident manager, one scheduler."""
    from bot.adapters import alertmanager, scheduler

    missing = secrets.missing_for(http)
    if missing:
        raise StartError(f"missing {', '.join(missing)} in the environment (see README: Connect it to Slack)")
    # the one redactor: the config's secrets, the Slack tokens and the Alertmanager token; the store writes
    # through it too
    svc = build_services(config, redactor=redactor_for(config, (secrets.slack_bot_token,
                                                                 secrets.slack_signing_secret,
                                                                 secrets.slack_app_token)))
    bot = SpecopsBot(config, secrets, client=client, services=svc)  # attaches its notifier to svc's manager
    token = os.environ.get(config.watch.alertmanager_token_env)
    scheduler.install(svc)
    routes: dict[str, Route] = {
        "/alertmanager": lambda headers, body: alertmanager.receive(config, svc.manager, token, headers, body)}
    sched = scheduler.Scheduler(config).start() if schedule else None
    if sched is not None:  # reports a killed bot claimed and never posted
        threading.Thread(target=_retry_reports, name="specops-report-retry", daemon=True).start()
    health = BotHealth(svc.store, lambda: len(bot.pool.jobs), sched, _web_api_reachable(bot))
    return Assembly(svc, bot, routes, sched, health)


def _web_api_reachable(bot: SpecopsBot, ttl: float = 60.0) -> Callable[[], bool]:
    """HTTP mode has no standing connection to Slack: /healthz asks auth.test, at most once a minute
    (Tier 4), so a probe every few seconds costs nothing. Socket Mode replaces this with the socket."""
    import time

    last: dict[str, float | bool] = {"at": 0.0, "ok": False}

    def check() -> bool:
        now = time.monotonic()
        if now - float(last["at"]) > ttl:
            try:
                last["ok"] = bool(bot.app.client.auth_test().get("ok"))
            except Exception:
                last["ok"] = False
            last["at"] = now
        return bool(last["ok"])

    return check


def _retry_reports() -> None:
    from bot.adapters import scheduler

    try:
        for done in scheduler.retry_unposted():
            log.info("posted %s, which an earlier run claimed and never posted", done)
    except Exception:
        log.exception("retrying unposted reports failed")


def serve(config: Config, secrets: SlackSecrets, *, http: bool, host: str = "127.0.0.1", port: int = 3000,
          webhook_port: int | None = None, on_ready: Callable[[str], None] | None = None,
          schedule: bool = True) -> None:
    """Run the bot, the scheduler (watches, reports, incidents) and the Alertmanager receiver."""
    parts = assemble(config, secrets, http=http, schedule=schedule)
    bot, routes = parts.bot, parts.routes
    install_log_redaction(parts.services.redactor)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    servers: list[SlackHTTPServer] = []
    try:
        if http:
            servers.append(SlackHTTPServer(bot.app, host, port, routes, get_routes=parts.get_routes(),
                                           signing_secret=secrets.slack_signing_secret).start())
            if on_ready:
                on_ready(f"HTTP mode on http://{host}:{servers[0].port}/slack/events "
                         "(GET /healthz, GET /metrics, POST /alertmanager)")
        else:
            from slack_bolt.adapter.socket_mode import SocketModeHandler

            handler = SocketModeHandler(bot.app, app_token=secrets.slack_app_token)
            parts.health.slack_connected = lambda: bool(handler.client.is_connected())
            # no Slack requests come this way in Socket Mode: /healthz, /metrics and /alertmanager only
            servers.append(SlackHTTPServer(bot.app, host, port if webhook_port is None else webhook_port, routes,
                                           slack_events=False, get_routes=parts.get_routes()).start())
            handler.connect()  # type: ignore[no-untyped-call]
            if on_ready:
                on_ready(f"Socket Mode: connected; /healthz, /metrics and /alertmanager on "
                         f"http://{host}:{servers[0].port}")
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
        parts.close()
