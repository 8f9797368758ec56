"""Chat text -> Command. Shared by Slack, the console and the CLI; chat text never reaches a shell.

Text is split on whitespace only (no shell parsing); names must be inventory names; anything
else gets a short usage message that never echoes more than a few characters of the input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from bot.config import Config, closest
from bot.errors import UserError

Verb = Literal["help", "deploy", "diagnose", "status", "stop", "report", "unlock"]
VERBS: tuple[Verb, ...] = ("help", "deploy", "diagnose", "status", "stop", "report", "unlock")
DESTRUCTIVE = {"deploy", "stop", "unlock"}
MAX_TEXT = 300
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

USAGE = """\
*specops* — speculative-decoding deployments of vLLM
• `help` — this message
• `deploy PROFILE [HOST] [--dry-run]` — bring a profile up (shows the plan; you confirm)
• `diagnose [HOST]` — one pass over the deployment: what is wrong, how sure, what to do
• `status [HOST]` — what is running and what it logged last (no probe)
• `stop [HOST]` — stop the server specops started, by its PID (you confirm)
• `report [HOST]` — the health report of a host
• `unlock [HOST]` — break the host's deploy lock after a crash (shows who holds it; you confirm)"""


class CommandError(UserError):
    """A usage problem: the message is safe to show as is."""


@dataclass(frozen=True)
class Command:
    verb: Verb
    host: str | None = None
    profile: str | None = None
    dry_run: bool = False

    @property
    def destructive(self) -> bool:
        """Needs a plan and a confirmation (a dry run of it does not)."""
        return self.verb in DESTRUCTIVE and not self.dry_run

    @property
    def destructive_verb(self) -> bool:
        """Only deployers may ask for it at all (deploy, stop, unlock)."""
        return self.verb in DESTRUCTIVE

    def text(self) -> str:
        parts: list[str] = [self.verb]
        if self.profile:
            parts.append(self.profile)
        if self.host:
            parts.append(self.host)
        if self.dry_run:
            parts.append("--dry-run")
        return " ".join(parts)


def _shown(token: str) -> str:
    """A bit of user input, safe to echo: printable, short, no Slack markup."""
    clean = "".join(ch for ch in token if ch.isprintable())[:24]
    clean = re.sub(r"[<>&`*_~|]", "?", clean)
    return clean + ("…" if len(token) > 24 else "")


def parse(text: str, config: Config | None = None, default_host: str | None = None) -> Command:
    if len(text) > MAX_TEXT:
        raise CommandError(f"that command is too long ({len(text)} characters). Try `help`.")
    words = text.split()
    if not words or words[0].lower() in ("help", "-h", "--help", "?"):
        return Command("help")
    verb = words[0].lower()
    if verb not in VERBS:
        raise CommandError(f"unknown command `{_shown(words[0])}`{_did_you_mean(verb, VERBS)}. "
                           f"Commands: {', '.join(VERBS)}. Try `help`.")
    flags = [w for w in words[1:] if w.startswith("-")]
    args = [w for w in words[1:] if not w.startswith("-")]
    dry_run = False
    for flag in flags:
        if flag == "--dry-run" and verb in DESTRUCTIVE:
            dry_run = True
        else:
            raise CommandError(f"unknown option `{_shown(flag)}` for `{verb}`. Try `help`.")
    for arg in args:
        if not _NAME.match(arg):
            raise CommandError(f"`{_shown(arg)}` is not a host or profile name. Try `help`.")
    profile = None
    if verb == "deploy":
        if not args:
            raise CommandError("`deploy` needs a profile: `deploy PROFILE [HOST]`" + _known(config, "profiles"))
        profile, args = args[0], args[1:]
    if len(args) > 1:
        raise CommandError(f"`{verb}` takes one host, got {len(args)}. Try `help`.")
    host = args[0] if args else None
    if config is not None:
        if profile is not None and profile not in config.profiles:
            raise CommandError(f"unknown profile `{_shown(profile)}`{_did_you_mean(profile, config.profiles)}"
                               + _known(config, "profiles"))
        if host is None:
            host = default_host if default_host in config.hosts else (
                next(iter(config.hosts)) if len(config.hosts) == 1 else None)
            if host is None:
                raise CommandError(f"which host? `{verb} HOST`" + _known(config, "hosts"))
        elif host not in config.hosts:
            raise CommandError(f"unknown host `{_shown(host)}`{_did_you_mean(host, config.hosts)}"
                               + _known(config, "hosts"))
    return Command(verb, host, profile, dry_run)


def _did_you_mean(word: str, choices: Any) -> str:
    near = closest(word.lower(), choices)
    return f" — did you mean `{near}`?" if near else ""


def _known(config: Config | None, what: str) -> str:
    if config is None:
        return ""
    names = sorted(getattr(config, what))
    return f"; known {what}: {', '.join(names[:20])}" if names else f"; no {what} configured"
