"""The redactor, applied at every sink: Slack messages and files, logs, the audit record, the CLI.

Slack tokens, Hugging Face tokens, private keys, bearer tokens, passwords and the configured
secrets' exact values never leave the process. There is no process-wide instance: the object graph
(app/services.py) builds one with `redactor_for(config)` and hands it to every sink it builds.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from typing import Any

MASK = "(redacted)"  # no brackets: rich would take "[redacted]" for a style tag and print nothing

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
     "(redacted private key)"),
    (re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{6,}"), MASK),
    (re.compile(r"\bxapp-[A-Za-z0-9-]{6,}"), MASK),
    (re.compile(r"\bhf_[A-Za-z0-9]{16,}"), MASK),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), MASK),
    (re.compile(r"(?i)(authorization\s*[:=]\s*(?:bearer|basic|token)\s+)[^\s\"',]+"), r"\1" + MASK),
    # NAME=value, NAME: value, "name": "value" — also inside longer names (HF_TOKEN, WANDB_API_KEY)
    (re.compile(r"(?i)(?<![a-z0-9])([a-z0-9_]*(?:pass(?:word|wd)?|secret|token|api[_-]?key|access[_-]?key|"
                r"credentials?|auth))(\"?'?\s*[:=]\s*\"?'?)([^\s\"',;}]{3,})"), r"\1\2" + MASK),
    # --api-key VALUE, --token VALUE, --password=VALUE on a command line
    (re.compile(r"(?i)(--[a-z0-9-]*(?:api-key|token|password|secret)[ =])(\S+)"), r"\1" + MASK),
    # user:password@ in any URL (https, postgres, redis, mongodb+srv, amqp, …)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s@/]+@"), r"\1" + MASK + "@"),
    # AWS access key ids, and the 40-character secret that travels with one
    (re.compile(r"\b((?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16})\b"), MASK),
    (re.compile(r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])"
                r"(?=[A-Za-z0-9/+]{0,39}[0-9])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"), MASK),
)


class Redactor:
    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets = sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True)

    def add_secret(self, value: str | None) -> None:
        if value and len(value) >= 6 and value not in self._secrets:
            self._secrets = sorted([*self._secrets, value], key=len, reverse=True)

    def learn_url(self, url: str | None) -> None:
        """The password of a URL's `user:password@` (any characters, `/` and `@` included), as an exact secret."""
        self.add_secret(url_password(url))

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        for pattern, repl in _PATTERNS:
            value = pattern.sub(repl, value)
        return value

    def obj(self, value: Any) -> Any:
        """Every string inside a JSON-like value (Block Kit payloads, audit details)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.obj(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.obj(v) for v in value]
        return value

    def bytes(self, value: bytes) -> bytes:
        try:
            return self.text(value.decode("utf-8")).encode("utf-8")
        except UnicodeDecodeError:
            return value  # binary (a PNG chart): nothing textual to leak


def url_password(url: str | None) -> str | None:
    """`password` of `scheme://user:password@host/…`; the host is after the last `@` of the authority."""
    if not url or "://" not in url:
        return None
    rest = url.split("://", 1)[1]
    at = rest.rfind("@", 0, _authority_end(rest))
    if at < 0:
        return None
    userinfo = rest[:at]
    return userinfo.split(":", 1)[1] if ":" in userinfo else None


def _authority_end(rest: str) -> int:
    """Where the authority ends: the first `/`, `?` or `#` after the last `@` before any of them would, so a
    password holding `/` does not end it early."""
    last_at = rest.rfind("@")
    tail = rest[last_at + 1:] if last_at >= 0 else rest
    cut = min((i for i in (tail.find(c) for c in "/?#") if i >= 0), default=len(tail))
    return (last_at + 1 if last_at >= 0 else 0) + cut


class RedactingFilter(logging.Filter):
    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        record.msg, record.args = self.redactor.text(message), None
        # a traceback is formatted after the filters ran: format it here, redacted
        if record.exc_info:
            record.exc_text = self.redactor.text(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = self.redactor.text(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.text(record.stack_info)
        return True


SECRET_NAME = re.compile(r"(?i)(token|secret|key|pass|auth|credential)")


# Secrets that reach the process through its environment rather than the config file: the Slack app's
# tokens and signing secret (pydantic-settings reads them, bot/adapters/slack/settings.py).
ENV_SECRETS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN")


def redactor_for(config: Any | None, extra: Iterable[str | None] = ()) -> Redactor:
    """A redactor that knows every secret this config names: its env values under secret-looking names, the
    Prometheus credentials, the Alertmanager webhook token, the Slack secrets of the environment, and `extra`."""
    redactor = Redactor(extra)
    for name in ENV_SECRETS:
        redactor.add_secret(os.environ.get(name))
    if config is not None:
        register_config_secrets(config, redactor)
    return redactor


def register_config_secrets(config: Any, redactor: Redactor) -> None:
    """Environment values the config hands to vLLM under secret-looking names are never shown."""
    envs = [h.vllm_env for h in config.hosts.values()] + [p.env for p in config.profiles.values()]
    for env in envs:
        for name, value in env.items():
            if SECRET_NAME.search(name):
                redactor.add_secret(value)
    prom = getattr(config, "prometheus", None)
    if prom is not None:
        redactor.learn_url(str(prom.url))  # http://user:password@prometheus:9090: said in every error about it
        for value in prom.headers.values():  # an Authorization or API-key header sent to Prometheus
            redactor.add_secret(value)
        for name in (prom.bearer_token_env, prom.basic_auth_env):
            secret = os.environ.get(name or "")
            if secret:
                redactor.add_secret(secret)
    watch = getattr(config, "watch", None)
    token_env = getattr(watch, "alertmanager_token_env", None)
    if token_env:
        redactor.add_secret(os.environ.get(token_env))


def install_log_redaction(redactor: Redactor, level: int = logging.INFO) -> None:
    """Every handler of the root logger redacts what it writes (configuring logging if nobody did)."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter(redactor))
