"""Reaching Slack at start, as the running bot does after: each call (auth.test, the Socket Mode connect) is
retried with capped exponential backoff for a bounded time. An answer that says the token is wrong ends it at
once (a config error, exit 78); a Slack that stays unreachable ends it when the budget is spent (exit 69), so a
service manager restarts it later; a stop signal ends the wait at once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from slack_sdk.errors import SlackApiError, SlackClientError

from bot.errors import MigrationFailed, StartConfigError, StartError, StoreRefused, StoreUnavailable

log = logging.getLogger("specops.slack.start")

# what Slack answers when the token (not the network) is the problem: retrying cannot help
REFUSED = frozenset({"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
                     "not_allowed_token_type", "invalid_token", "no_permission", "missing_scope",
                     "team_access_not_granted", "ekm_access_denied"})
DEFAULT_BUDGET = 300.0  # seconds; env SPECOPS_START_TIMEOUT / `serve --start-timeout`


@dataclass(frozen=True)
class Backoff:
    """1 s, 2 s, 4 s … at most `cap` between attempts; no new attempt after `budget` seconds."""

    budget: float = DEFAULT_BUDGET
    first: float = 1.0
    cap: float = 30.0


def reach(what: str, attempt: Callable[[], object], backoff: Backoff, stop: threading.Event,
          hint: str = "SLACK_BOT_TOKEN") -> bool:
    """`attempt()` until it succeeds (True) or `stop` is set (False). Raises StartConfigError when Slack refuses
    the token (`hint` names it), StartError when Slack stayed unavailable for the whole budget."""
    def why_not() -> str | None:
        try:
            attempt()
            return None
        except SlackApiError as exc:
            error = str(exc.response.get("error") or f"HTTP {exc.response.status_code}")
            if error in REFUSED:
                raise StartConfigError(f"Slack refused {what}: {error} (check {hint}; restarting cannot fix it)"
                                       ) from None
            return f"Slack answered {error}"
        except (OSError, SlackClientError) as exc:  # URLError, refused, reset, DNS, TLS; a failed WebSocket
            return _reason(exc)

    return _retry(why_not, backoff, stop, what.replace("%", "%%") + ": Slack answered on attempt %d, after %.0f s",
                  lambda reason: f"{what}: {reason}",
                  lambda number, spent, reason: f"Slack unavailable: {what} failed {number} time(s) over "
                                                f"{spent:.0f} s, last: {reason}")


def reach_store(where: str, attempt: Callable[[], object], backoff: Backoff, stop: threading.Event) -> bool:
    """Open the state store (`attempt`) until it opens (True) or `stop` is set (False). A server that does not
    answer is retried like Slack, then StartError (exit 69: the unit restarts it); one that refuses (a password,
    a database that does not exist) or a migration that failed is StartConfigError at once (exit 78)."""
    def why_not() -> str | None:
        try:
            attempt()
            return None
        except (StoreRefused, MigrationFailed) as exc:
            raise StartConfigError(f"{exc} (restarting cannot fix it)") from None
        except StoreUnavailable as exc:
            return str(exc)

    shown = where.replace("%", "%%")  # the log line is a %-format
    return _retry(why_not, backoff, stop, f"the state store {shown} opened on attempt %d, after %.0f s",
                  lambda reason: reason,
                  lambda number, spent, reason: f"state store unavailable: {number} attempt(s) over {spent:.0f} s, "
                                                f"last: {reason}")


def _retry(why_not: Callable[[], str | None], backoff: Backoff, stop: threading.Event, answered: str,
           said: Callable[[str], str], gave_up: Callable[[int, float, str], str]) -> bool:
    """The start's one backoff loop: `why_not()` is None once the thing answers, else why it did not (it raises
    for what no retry can fix). True when it answered, False on `stop`; StartError when the budget is spent."""
    started = time.monotonic()
    delay = backoff.first
    for number in range(1, 1_000_000):
        reason = why_not()
        if reason is None:
            if number > 1:
                log.warning(answered, number, time.monotonic() - started)
            return True
        spent = time.monotonic() - started
        left = backoff.budget - spent
        if left <= 0:
            raise StartError(gave_up(number, spent, reason) +
                             " (a service manager may restart it; the budget is SPECOPS_START_TIMEOUT)")
        wait = min(delay, backoff.cap, left)
        log.warning("%s; attempt %d, next in %.0f s (gives up %.0f s after the first)", said(reason), number, wait,
                    backoff.budget)
        if stop.wait(wait):
            return False
        delay = min(delay * 2, backoff.cap)
    return False  # pragma: no cover - a million attempts


def _reason(exc: BaseException) -> str:
    inner = getattr(exc, "reason", None)  # URLError wraps the socket's error
    if isinstance(inner, OSError) and inner.strerror:
        return inner.strerror
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(inner or exc) or type(exc).__name__

