"""Chat text -> Command. Shared by Slack, the console and the CLI; chat text never reaches a shell.

Text is split on whitespace only (no shell parsing); names must be inventory names; anything
else gets a short usage message that never echoes more than a few characters of the input.

`diagnose [--method M] [--vllm-version V] [--drafter D] [--num-speculative-tokens K]` followed by a
log (a code block, or lines after the first) is a pasted diagnosis: the flags are validated like any
command, the rest is log data (a `Paste`), never read as a command.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.app.diagnosis.paste import PASTE_OPTIONS, Paste
from bot.app.verbs import REGISTRY
from bot.app.verbs.grammar import build_args
from bot.app.verbs.spec import CHAT_FIELD, Opt, Verb
from bot.config import NAME_RE, Config, closest
from bot.errors import InputError, UserError

MAX_TEXT = 300
MAX_PASTE_CHARS = 20 * 1024 * 1024  # a pasted log (Slack caps a message at 40 000 characters anyway)
_NAME = re.compile(NAME_RE)  # what the config accepts as a host or profile name
HELP = ("help", "-h", "--help", "?")
_PASTE_USAGE = ("`diagnose [--method M] [--vllm-version V] [--drafter D] [--num-speculative-tokens K]` then a log "
                "in a code block (or attached) — diagnoses that text; or the message shortcut *Diagnose with "
                "specops*")


def verbs() -> tuple[str, ...]:
    return ("help", *REGISTRY)


def usage() -> str:
    """`help`, from the registry: every verb's chat form and summary."""
    lines = ["*specops* — speculative-decoding deployments of vLLM", "• `help` — this message"]
    for verb in REGISTRY.values():
        lines.append(f"• `{verb.usage}` — {verb.summary}")
        if verb.name == "diagnose":
            lines.append(f"• {_PASTE_USAGE}")
    return "\n".join(lines)


USAGE = usage()


class CommandError(UserError):
    """A usage problem: the message is safe to show as is."""


_FENCE = "```"
_SLACK_LINK = re.compile(r"<((?:https?|mailto):[^|>\s]+)(?:\|[^>]*)?>")


@dataclass(frozen=True)
class Command:
    verb: str  # "help" or a name of the registry
    host: str | None = None
    profile: str | None = None
    dry_run: bool = False
    paste: Paste | None = field(default=None, compare=False)  # diagnose what was pasted, not a host
    selector: str | None = None  # `fleet`: label matchers; `rollout`: hosts or groups (checked)
    options: tuple[tuple[str, object], ...] = ()  # the verb's chat_options given (`fleet --limit 5`), checked

    @property
    def spec(self) -> Verb[Any, Any] | None:
        return REGISTRY.get(self.verb)

    def args(self) -> Any:
        """The verb's Args: its chat words, its plan (--dry-run) and its options, as a command line builds them."""
        verb = REGISTRY[self.verb]
        given: dict[str, object] = dict(self.options)
        words = {"profile": self.profile, "host": self.host, "selector": self.selector, "targets": self.selector}
        for word in verb.chat:
            given[CHAT_FIELD[word]] = words[word]
        if self.dry_run:
            given["dry_run"] = True
        args = build_args(verb, given)
        # a pasted log is the diagnose verb's own input in chat (never an option a command line gives)
        return dataclasses.replace(args, paste=self.paste) if self.paste is not None else args

    @property
    def destructive(self) -> bool:
        """Needs a plan and a confirmation (a dry run of it does not)."""
        return self.destructive_verb and not self.dry_run

    @property
    def destructive_verb(self) -> bool:
        """Only deployers may ask for it at all (the verbs that change a host)."""
        spec = self.spec
        return spec is not None and spec.changes

    @property
    def cancellable(self) -> bool:
        spec = self.spec
        return spec is not None and spec.cancellable

    def text(self) -> str:
        if self.paste is not None:
            return " ".join([self.verb, *self.paste.option_words(), self.paste.describe()])
        parts: list[str] = [self.verb]
        if self.profile:
            parts.append(self.profile)
        if self.selector:
            parts.append(self.selector)
        if self.host:
            parts.append(self.host)
        if self.dry_run:
            parts.append("--dry-run")
        for name, value in self.options:
            opt = self.spec.option(name) if self.spec else None
            flags = (opt.flag if opt and opt.flag else name).split("/")
            if value is True or value is False:
                parts.append(flags[0] if value is True else flags[-1])
            else:
                parts.append(f"{flags[0]} {_said(str(value))}")
        return " ".join(parts)


def _said(value: str) -> str:
    """A value as chat types it: in quotes when it holds a space or starts with a quote (`--gate "bugs == 0"`), so
    a plan stored as text parses back to the same command."""
    if not value or (" " not in value and value[0] not in _OPENING):
        return value
    return f'"{value}"' if '"' not in value else f"'{value}'"


def _shown(token: str) -> str:
    from bot.app.diagnosis.flagcheck import shown

    return shown(token)


def parse(text: str, config: Config | None = None, default_host: str | None = None) -> Command:
    """A chat command, checked against the registry's grammar and the inventory. Raises CommandError."""
    if len(text) > MAX_TEXT:
        raise CommandError(f"that command is too long ({len(text)} characters). Try `help`.")
    words = text.split()
    if not words or words[0].lower() in HELP:
        return Command("help")
    verb = REGISTRY.get(words[0].lower())
    if verb is None:
        names = verbs()
        raise CommandError(_sentence(f"unknown command `{_shown(words[0])}`{_did_you_mean(words[0].lower(), names)}")
                           + f" Commands: {', '.join(names)}. Try `help`.")
    if "selector" in verb.chat:
        return _selector(verb, text.split(maxsplit=1)[1] if len(words) > 1 else "", config)
    options: tuple[tuple[str, object], ...] = ()
    if verb.chat_options:  # `rollout dflash a6000s --soak 90s --canary 2`, `deploy dflash-0.20.1 a6000 --force`
        rest, options = _chat_options(verb, " ".join(words[1:]))
        words = [words[0], *rest.split()]
    if config is not None:  # `doctor a6000 --profile dflash`: an option naming a profile names one of the config's
        _check_profile(dict(options).get("profile"), config)  # type: ignore[arg-type]
    dry_run = _dry_run(verb, [w for w in words[1:] if w.startswith("-")])
    args = [w for w in words[1:] if not w.startswith("-")]
    for arg in args:
        parts = arg.split(",") if "targets" in verb.chat else [arg]  # rollout's hosts: a6000,a6000-b
        if not all(_NAME.match(part) for part in parts):
            raise CommandError(f"`{_shown(arg)}` is not a host or profile name. Try `help`.")
    profile = None
    if "profile" in verb.chat:
        if not args:
            raise CommandError(f"`{verb.name}` needs a profile: `{verb.usage}`" + _known(config, "profiles"))
        profile, args = args[0], args[1:]
    if "targets" in verb.chat:
        return _targets(verb, profile, args, dry_run, config, options)
    if len(args) > 1:
        raise CommandError(f"`{verb.name}` takes one host, got {len(args)}. Try `help`.")
    host = args[0] if args else None
    if config is not None:
        _check_profile(profile, config)
        host = _check_host(verb, host, config, default_host)
    return Command(verb.name, host, profile, dry_run, options=options)


def _targets(verb: Verb[Any, Any], profile: str | None, args: list[str], dry_run: bool, config: Config | None,
             options: tuple[tuple[str, object], ...] = ()) -> Command:
    """`rollout PROFILE a6000s` or `… a6000,a6000-b`: hosts and groups of the inventory, checked; and the verb's
    chat_options given (`--soak 90s`)."""
    if len(args) != 1:
        raise CommandError(f"`{verb.name}` needs the hosts or a group after the profile: `{verb.usage}`"
                           + _known(config, "hosts"))
    if config is not None:
        from bot.errors import ConfigError

        _check_profile(profile, config)
        try:
            config.select_hosts(args[0])
        except ConfigError as exc:
            raise CommandError(str(exc)) from None
    return Command(verb.name, None, profile, dry_run, selector=args[0], options=options)


def _dry_run(verb: Verb[Any, Any], flags: list[str]) -> bool:
    dry_run = False
    for flag in flags:
        if flag == "--dry-run" and verb.changes:
            dry_run = True
        else:
            raise CommandError(f"unknown option `{_shown(flag)}` for `{verb.name}`. Try `help`.")
    return dry_run


def _check_profile(profile: str | None, config: Config) -> None:
    if profile is not None and profile not in config.profiles:
        raise CommandError(f"unknown profile `{_shown(profile)}`{_did_you_mean(profile, config.profiles)}"
                           + _known(config, "profiles"))


def _check_host(verb: Verb[Any, Any], host: str | None, config: Config, default_host: str | None) -> str:
    if host is None:
        host = default_host if default_host in config.hosts else (
            next(iter(config.hosts)) if len(config.hosts) == 1 else None)
        if host is None:
            raise CommandError(f"which host? `{verb.name} HOST`" + _known(config, "hosts"))
    elif host not in config.hosts:
        raise CommandError(f"unknown host `{_shown(host)}`{_did_you_mean(host, config.hosts)}"
                           + _known(config, "hosts"))
    return host


def _selector(verb: Verb[Any, Any], rest: str, config: Config | None) -> Command:
    from bot.app.prometheus.promql import selector_of
    from bot.errors import InputError

    rest = _SLACK_LINK.sub(lambda m: m[1], rest).replace("&quot;", '"').replace("“", '"').replace("”", '"').strip()
    rest, options = _chat_options(verb, rest)
    try:
        selector = selector_of(rest)
    except InputError as exc:
        raise CommandError(f"{exc}. Try `{verb.name}` or `{verb.name} job=\"vllm\"`.") from None
    refusal = verb.needs(config) if config is not None else None
    if refusal:
        raise CommandError(refusal)
    return Command(verb.name, selector=selector or None, options=options)


def _chat_options(verb: Verb[Any, Any], rest: str) -> tuple[str, tuple[tuple[str, object], ...]]:
    """The selector's words, and the verb's chat_options among them (`--limit 5`, `--limit=5`, `--only-problems`),
    checked with the command line's types and bounds. A `--` inside a quoted label value is the selector's."""
    words = rest.split()
    kept: list[str] = []
    found: dict[str, object] = {}
    quotes, i = 0, 0
    # checked per option: a chat that parses no option keeps the selector exactly as typed (see the end)
    while i < len(words):
        word = re.sub(r"^[\u2013\u2014]", "--", words[i])  # a client's autocorrect made `--` a dash
        i += 1
        if quotes % 2 or not word.startswith("--"):
            quotes += words[i - 1].count('"') - words[i - 1].count('\\"')
            kept.append(words[i - 1])
            continue
        flag, eq, value = word.partition("=")
        opt = _chat_flags(verb).get(flag.lower())
        if opt is None and word == "--dry-run" and verb.changes:  # the verb's plan: Command.dry_run, not an option
            kept.append(word)
            continue
        if opt is None:
            known = [*_chat_flags(verb), *(["--dry-run"] if verb.changes else [])]
            raise CommandError(f"unknown option `{_shown(flag)}` for `{verb.name}`; options: "
                               f"{', '.join(known) or 'none'}. Try `help`.")
        if opt.name in found:
            raise CommandError(f"`{opt.flag}` is given twice. Try `help`.")
        if opt.type == "bool":
            if eq:
                raise CommandError(f"`{flag}` takes no value: `{verb.name} {flag}`. Try `help`.")
            found[opt.name] = flag.lower() == (opt.flag or "").split("/")[0]  # `--no-k0`: the second of `--k0/--no-k0`
            continue
        if not eq:
            if i >= len(words):
                raise CommandError(f"`{opt.flag}` needs a value: `{verb.name} {opt.flag} {opt.metavar or 'VALUE'}`. "
                                   "Try `help`.")
            value, i = words[i], i + 1
        value, i = _quoted(opt, value, words, i)
        found[opt.name] = _option_value(opt, value)
    # no option: the selector as typed (its spacing inside a quoted value kept)
    return (" ".join(kept) if found else rest), tuple(found.items())


_OPENING = {'"': '"', "“": "”", "'": "'", "‘": "’"}  # a client's autocorrect may curl the quotes


def _quoted(opt: Opt, value: str, words: list[str], i: int) -> tuple[str, int]:
    """A value in quotes, which may hold spaces (`--gate "bugs == 0 and tps_ratio >= 0.9"`), as one value with
    Slack's escapes undone (it sends `>` as `&gt;`); the index of the next word. An unclosed quote is refused."""
    closing = _OPENING.get(value[:1])
    if closing is None:
        return _unescaped(value), i
    parts = [value[1:]]
    while not parts[-1].endswith(closing):
        if i >= len(words):
            raise CommandError(f"`{opt.flag}`: the quote before `{_shown(value)}` is not closed. Try `help`.")
        parts.append(words[i])
        i += 1
    return _unescaped(" ".join(parts)[:-len(closing)]), i


def _unescaped(value: str) -> str:
    return value.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _chat_flags(verb: Verb[Any, Any]) -> dict[str, Opt]:
    """Each flag chat takes for the verb (both of a switch's `--k0/--no-k0`)."""
    return {flag: opt for opt in verb.chat_options if opt.flag for flag in opt.flag.split("/")}


def _option_value(opt: Opt, value: str) -> object:
    """`value` as the command line's parser reads the option: its type, then its bounds."""
    said = f"`{opt.flag} {_shown(value)}`"
    if opt.type == "int":
        wanted = f"{said}: give a whole number{_bounds(opt)}. Try `help`."
        if not re.fullmatch(r"[+-]?[0-9]+", value):
            raise CommandError(wanted)
        number: float = int(value)
    elif opt.type == "float":
        wanted = f"{said}: give a number{_bounds(opt)}. Try `help`."
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise CommandError(wanted)
    else:
        if opt.check is not None:
            try:
                opt.check(value)
            except InputError as exc:
                raise CommandError(f"{_sentence(str(exc))} Try `help`.") from None
        return value
    if (opt.low is not None and number < opt.low) or (opt.high is not None and number > opt.high):
        raise CommandError(wanted)
    return number


def _bounds(opt: Opt) -> str:
    if opt.low is not None and opt.high is not None:
        return f" from {opt.low:g} to {opt.high:g}"
    if opt.low is not None:
        return f", {opt.low:g} or more"
    if opt.high is not None:
        return f", {opt.high:g} or less"
    return ""


def _sentence(text: str) -> str:
    """`text` ended once: a question keeps its "?" ("did you mean `deploy`?", never "?.")."""
    return text if text.endswith(("?", ".", "!")) else text + "."


def _did_you_mean(word: str, choices: Any) -> str:
    near = closest(word.lower(), choices)
    return f" — did you mean `{near}`?" if near else ""


def _known(config: Config | None, what: str) -> str:
    if config is None:
        return ""
    names = sorted(getattr(config, what))
    return f"; known {what}: {', '.join(names[:20])}" if names else f"; no {what} configured"


# --- a pasted log ---------------------------------------------------------------------------------


def split_paste(text: str, attachments: int = 0) -> tuple[str, str] | None:
    """(the command line, the log) when `text` is `diagnose …` followed by a log — a code block, lines after
    the first, or attached files; None for any other text (then `diagnose HOST` is a host diagnosis)."""
    stripped = text.strip()
    words = stripped.split(maxsplit=1)
    if not words or words[0].lower() != "diagnose":
        return None
    fence = stripped.find(_FENCE)
    head = stripped if fence < 0 else stripped[:fence]
    newline = head.find("\n")
    if newline >= 0:
        command, rest = stripped[:newline], stripped[newline + 1:]
    else:
        command, rest = head, stripped[len(head):]
    if fence < 0 and not rest.strip() and not attachments:
        return None
    return command.strip(), log_text(rest)


def log_text(text: str) -> str:
    """A message's text as log data: code fences off, Slack's escapes (&lt; &gt; &amp;) and links undone,
    blank lines dropped (a log has none that matter)."""
    text = text.replace(_FENCE, "\n")
    text = _SLACK_LINK.sub(r"\1", text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def split_message(text: str) -> tuple[list[str], str]:
    """A message someone wants diagnosed (a message shortcut): the options of a leading `diagnose …` line, if it
    has one, and the log (everything else)."""
    split = split_paste(text, attachments=1)
    if split is None:
        return [], log_text(text)
    command, log = split
    return command.split()[1:], log


def paste_option(name: str, value: str) -> tuple[str, str]:
    """One validated option of a pasted diagnosis: (Flags field, value). Raises CommandError."""
    field_name = PASTE_OPTIONS.get(name)
    if field_name is None:
        raise CommandError(f"unknown option `{_shown(name)}` for `diagnose` with a pasted log; options: "
                           f"{', '.join(PASTE_OPTIONS)}. Try `help`.")
    value = value.strip()
    if not value:
        raise CommandError(f"`{name}` needs a value. Try `help`.")
    from bot.app.diagnosis import flagcheck

    try:
        return field_name, flagcheck.check(field_name, value)
    except InputError as exc:
        raise CommandError(str(exc)) from None


def parse_paste_options(words: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """`--name value` or `--name=value`, each at most once; nothing else. Raises CommandError."""
    out: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = re.sub(r"^[\u2013\u2014]", "--", words[i])  # a client's autocorrect made `--` a dash
        if not word.startswith("-"):
            raise CommandError(f"`diagnose` with a pasted log takes options only, not `{_shown(word)}`: "
                               "to diagnose a host, send `diagnose HOST` without a log. Try `help`.")
        name, eq, value = word.partition("=")
        if not eq:
            if i + 1 >= len(words) or (words[i + 1].startswith("--") and name in PASTE_OPTIONS):
                paste_option(name, "")  # an unknown option, or a missing value: its own message
            value = words[i + 1]
            i += 1
        field_name, checked = paste_option(name, value)
        if field_name in out:
            raise CommandError(f"`{name}` is given twice. Try `help`.")
        out[field_name] = checked
        i += 1
    return tuple(out.items())


def parse_paste(text: str, attachments: int = 0) -> Command | None:
    """The pasted-diagnosis form of `text`, validated; None when `text` is not that form. Raises CommandError."""
    split = split_paste(text, attachments)
    if split is None:
        return None
    command, log = split
    return paste_command(command.split()[1:], log, attachments, too_long=len(command))


def paste_command(options: Sequence[str], log: str, attachments: int = 0, *, too_long: int = 0) -> Command:
    """A pasted diagnosis of `log` (and the attached files) with these options. Raises CommandError."""
    if too_long > MAX_TEXT:
        raise CommandError(f"the command line before the log is too long ({too_long} characters). Try `help`.")
    if len(log) > MAX_PASTE_CHARS:
        raise CommandError(f"the pasted log is too long ({len(log)} characters; at most {MAX_PASTE_CHARS}): "
                           "attach it as a file, or paste the last lines.")
    if not log.strip() and not attachments:
        raise CommandError("there is no log to diagnose: paste its lines in a code block after the command, "
                           "or attach the log file.")
    return Command("diagnose", paste=Paste(parse_paste_options(options), log, attachments))


def audit_text(text: str, attachments: int = 0) -> str:
    """What the audit keeps of a turn: the text itself, or for a pasted log its command line and a size and hash
    (the log itself is never stored)."""
    split = split_paste(text, attachments)
    if split is None:
        return text
    command, log = split
    return f"{command[:MAX_TEXT]} {Paste(text=log, attachments=attachments).describe()}"
