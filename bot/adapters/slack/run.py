"""Start the bot: Socket Mode (default) or HTTP mode."""

from __future__ import annotations

import errno
import faulthandler
import logging
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackClientNotConnectedError

from bot import __version__
from bot.adapters.selfmetrics import BotHealth
from bot.adapters.slack.bot import SpecopsBot, make_client
from bot.adapters.slack.http_server import Route, SlackHTTPServer
from bot.adapters.slack.settings import SlackSecrets
from bot.adapters.slack.startup import Backoff, reach, reach_store
from bot.app.prometheus.exported import served_settings
from bot.app.services import Services, build_services, open_store
from bot.app.watching.replicas import Leadership
from bot.config import Config, is_state_url
from bot.errors import ListenBusy, StartConfigError
from bot.redact import Redactor, install_log_redaction, redactor_for
from bot.signal_event import set_on_signals

log = logging.getLogger("specops")
STOP_WAIT = 40.0  # s: the jobs get 30 of them to stop what they started (JobPool.shutdown); systemd waits 90
SLACK_CLOSE_WAIT = 5.0  # s: slack_sdk's own close, within STOP_WAIT (it takes well under a second when it works)
SIGNAL_POLL = 0.5  # s: how late a stop signal delivered to another thread is handled at most
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # SIGINT too: a background job ignores Ctrl-C

__all__ = ["Assembly", "assemble", "serve"]


@dataclass
class Assembly:
    """What `serve` runs: one object graph for the bot, the scheduler and the webhook."""

    services: Services
    bot: SpecopsBot
    routes: dict[str, Route]
    schedules: Any  # adapters.scheduler.LeaderSchedules, or None when scheduling is off
    health: BotHealth
    leadership: Leadership | None = None

    @property
    def scheduler(self) -> Any:
        """The running scheduler (adapters.scheduler.Scheduler) while this replica leads, else None."""
        return self.schedules.current if self.schedules is not None else None

    def get_routes(self) -> dict[str, Route]:
        return {"/healthz": self.health.healthz, "/metrics": self.health.metrics}

    def close(self) -> None:
        self.health.close()
        if self.leadership is not None:
            self.leadership.stop()  # the schedules stop, the seat is given up, this replica's row goes
        self.bot.shutdown()
        self.services.close()


def _redactor(config: Config, secrets: SlackSecrets) -> Redactor:
    """The one redactor: the config's secrets, the Slack tokens, the Alertmanager token, a proxy URL's password;
    the store writes through it too."""
    redactor = redactor_for(config, (secrets.slack_bot_token, secrets.slack_signing_secret, secrets.slack_app_token))
    if secrets.specops_slack_api_url:
        redactor.learn_url(secrets.specops_slack_api_url)
    return redactor


def assemble(config: Config, secrets: SlackSecrets, *, http: bool, schedule: bool = True,
             client: Any = None, redactor: Redactor | None = None) -> Assembly:
    """Build the process's objects once: one redactor, one store, one incident manager, one scheduler."""
    from bot.adapters import alertmanager, scheduler

    missing = secrets.missing_for(http)
    if missing:
        raise StartConfigError(f"missing {', '.join(missing)} in the environment (see README: Connect it to Slack)")
    svc = build_services(config, redactor=redactor or _redactor(config, secrets))
    bot = SpecopsBot(config, secrets, client=client, services=svc)  # attaches its notifier to svc's manager
    token = os.environ.get(config.watch.alertmanager_token_env)
    scheduler.install(svc)
    routes: dict[str, Route] = {
        "/alertmanager": lambda headers, body: alertmanager.receive(config, svc.manager, token, headers, body)}
    schedules = scheduler.LeaderSchedules(config) if schedule else None
    # every replica answers chat; the one that leads runs the schedules (watches, reports, pruning)
    leadership = (Leadership(svc.store, schedules.lead, schedules.lose, detail=f"specops serve {__version__}").start()
                  if schedules is not None else None)
    health = BotHealth(svc.store, lambda: len(bot.pool.jobs), leadership, schedules, _web_api_reachable(bot),
                       served=lambda: served_settings(config, svc.store.deployments))
    return Assembly(svc, bot, routes, schedules, health, leadership)


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


def serve(config: Config, secrets: SlackSecrets, *, http: bool, host: str = "127.0.0.1", port: int = 3000,
          webhook_port: int | None = None, on_ready: Callable[[str], None] | None = None,
          schedule: bool = True, backoff: Backoff | None = None) -> None:
    """Run the bot, the scheduler (watches, reports, incidents) and the Alertmanager receiver. Slack is reached
    first, retried within `backoff`'s budget; SIGTERM, SIGINT or SIGHUP stop it, during the start too."""
    missing = secrets.missing_for(http)
    if missing:
        raise StartConfigError(f"missing {', '.join(missing)} in the environment (see README: Connect it to Slack)")
    backoff = backoff or Backoff()
    redactor = _redactor(config, secrets)
    install_log_redaction(redactor)  # every attempt's line, slack_sdk's own too, goes through it
    stop = threading.Event()
    set_on_signals(stop, STOP_SIGNALS)
    probe = _start_client(secrets)
    if not reach("auth.test", probe.auth_test, backoff, stop):
        return
    # the store before anything that writes to it: a database server still starting is waited for, like Slack
    if not reach_store(str(config.settings.state) if not is_state_url(config.settings.state) else "server",
                       lambda: open_store(config.settings, redactor).close(), backoff, stop):
        return
    parts = assemble(config, secrets, http=http, schedule=schedule, redactor=redactor)
    bot, routes = parts.bot, parts.routes
    servers: list[SlackHTTPServer] = []
    handler: Any = None
    try:
        if http:
            servers.append(_listen(lambda: SlackHTTPServer(bot.app, host, port, routes, get_routes=parts.get_routes(),
                                                           signing_secret=secrets.slack_signing_secret), host, port))
            if on_ready:
                on_ready(f"HTTP mode on http://{host}:{servers[0].port}/slack/events "
                         "(GET /healthz, GET /metrics, POST /alertmanager)")
        else:
            from slack_bolt.adapter.socket_mode import SocketModeHandler

            handler = SocketModeHandler(bot.app, app_token=secrets.slack_app_token)
            parts.health.slack_connected = lambda: bool(handler.client.is_connected())
            # no Slack requests come this way in Socket Mode: /healthz, /metrics and /alertmanager only
            health_port = port if webhook_port is None else webhook_port
            servers.append(_listen(lambda: SlackHTTPServer(bot.app, host, health_port, routes, slack_events=False,
                                                           get_routes=parts.get_routes()), host, health_port))

            failed: list[Exception] = []
            handler.client.on_error_listeners.append(failed.append)
            # slack_sdk says a lost WebSocket at INFO on its own logger: the unit's journal should show it
            handler.client.on_close_listeners.append(
                lambda code, reason=None: log.warning("Slack's Socket Mode connection closed (code %s%s); "
                                                      "reconnecting", code, f", {reason}" if reason else ""))

            def connect() -> None:
                # a fresh URL from apps.connections.open each attempt, under the client's own lock (its monitor
                # thread reconnects the same way once a first attempt returned)
                failed.clear()
                handler.client.connect_to_new_endpoint(force=True)
                if not handler.client.is_connected():
                    # slack_sdk logs a WebSocket that did not open and returns: that is no connection
                    why = f": {getattr(failed[-1], 'strerror', None) or failed[-1]}" if failed else ""
                    raise SlackClientNotConnectedError(f"the WebSocket did not open{why}")

            if not reach("the Socket Mode connection", connect, backoff, stop, hint="SLACK_APP_TOKEN"):
                return
            if on_ready:
                on_ready(f"Socket Mode: connected; /healthz, /metrics and /alertmanager on "
                         f"http://{host}:{servers[0].port}")
        _wait_for_stop(stop)
    except KeyboardInterrupt:
        pass
    finally:
        def teardown() -> None:
            if handler is not None:
                _close_slack(handler.close)
            for server in servers:
                server.stop()
            parts.close()

        _close_within(teardown, STOP_WAIT)


def _wait_for_stop(stop: threading.Event) -> None:
    """Until a stop signal's handler has run. In short waits, not one: the kernel may deliver the signal to any
    thread, and Python runs the handler in the main thread only when that thread next runs bytecode; a main thread
    blocked in one endless wait never does (serve once outlived SIGTERM for minutes, its handler pending)."""
    while not stop.wait(SIGNAL_POLL):
        pass


def _close_slack(close: Callable[[], None]) -> None:
    """slack_sdk's Socket Mode close joins its own threads with no timeout, and a session runner left over from a
    reconnect can wait on its WebSocket for good (a test start that retried showed it once): the Slack side
    gets SLACK_CLOSE_WAIT seconds, then the rest of the shutdown goes on — slack_sdk's threads are daemons, they end
    with the process — instead of the whole stop hitting its budget and exiting as a hang."""
    closing = threading.Thread(target=close, name="specops-slack-close", daemon=True)
    closing.start()
    closing.join(SLACK_CLOSE_WAIT)
    if closing.is_alive():
        log.warning("the Slack connection did not close within %.0f s (slack_sdk still waits on its WebSocket): "
                    "going on; its threads end with the process", SLACK_CLOSE_WAIT)


def _close_within(teardown: Callable[[], None], budget: float) -> None:
    """Stop everything (the Slack connection, the HTTP front, then the parts), but not forever: a state store that
    stopped answering (its machine gone from the network) would hold every write of the shutdown, and the
    interpreter's exit joins every thread that is not a daemon (a job pool's worker still in a job). Past the
    budget the process ends anyway, says so, and writes where each thread waited (the next hang shows its cause).
    """
    watchdog = threading.Timer(budget, _exit_now, (f"the process did not end within {budget:.0f} s of the stop "
                                                   "(is the state store answering?)",))
    watchdog.daemon = True  # armed through the interpreter's own exit too: it joins the other threads first
    watchdog.start()
    closing = threading.Thread(target=teardown, name="specops-close", daemon=True)
    closing.start()
    closing.join(budget + 1.0)  # the watchdog ends the process first when the teardown hangs


def _exit_now(why: str) -> None:
    log.error("%s: exiting now; where each thread waits follows", why)
    faulthandler.dump_traceback(all_threads=True)
    logging.shutdown()
    os._exit(1)  # a normal exit would wait for the threads that hold it


def _start_client(secrets: SlackSecrets) -> Any:
    """The client the start asks auth.test with: no retry of its own (`reach` retries) and slack_sdk's error
    line silenced (each attempt logs one line of ours)."""
    from slack_sdk import WebClient

    quiet = logging.getLogger("specops.slack.start.sdk")
    quiet.setLevel(logging.CRITICAL)
    return WebClient(token=secrets.slack_bot_token, base_url=make_client(secrets).base_url, timeout=10,
                     logger=quiet, retry_handlers=[])


def _listen(make: Callable[[], SlackHTTPServer], host: str, port: int) -> SlackHTTPServer:
    """The HTTP front, started; a bind that fails says which address and why, and whether a restart can help."""
    try:
        return make().start()
    except OSError as exc:
        where = f"cannot listen on {host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise ListenBusy(f"{where}: the address is already in use (another `specops serve`?)") from None
        raise StartConfigError(f"{where}: {exc.strerror or exc} (check --bind and --port)") from None
