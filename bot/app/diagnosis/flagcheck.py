"""The one check of the context flags a diagnosis takes (`--method`, `--vllm-version`, `--drafter`,
`--num-speculative-tokens`), whether they come from chat or the command line."""

from __future__ import annotations

import re

from bot.errors import InputError

# The triage's parsers are imported when a flag is checked: every command line start loads this module (the
# verbs' `--fail-on`), and `diagnose --log` must not pay for the knowledge base before it reads a line.

_VERSION = re.compile(r"^v?\d{1,4}\.\d{1,4}(?:\.\d{1,6})?[A-Za-z0-9.+_-]{0,40}$")
_DRAFTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
K_RANGE = (1, 64)

__all__ = ["FAIL_ON", "check", "fail_on", "known_methods", "shown", "worse_than"]


def shown(token: str) -> str:
    """A bit of user input, safe to echo: printable, short, no Slack markup, never a piece of a secret.

    Redacted before it is cut: a secret typed in the wrong place, cut to 24 characters, would no longer
    match any rule at the sink and would be posted and audited in part."""
    from bot.redact import MASK, Redactor

    if Redactor().text(token) != token:
        return MASK
    clean = "".join(ch for ch in token if ch.isprintable())[:24]
    # Every caller quotes the token in a code span, where `_`, `*` and `~` are literal: only what ends the
    # span or opens Slack's markup (`<!here>`, `&`) is replaced, so `--method a_b` is echoed as typed.
    clean = re.sub(r"[<>&`]", "?", clean)
    return clean + ("…" if len(token) > 24 else "")


def known_methods() -> frozenset[str]:
    from bot.core.triage.knowledge import KNOWN_METHODS

    return frozenset(KNOWN_METHODS)


def method(value: str) -> str:
    from bot.core.triage.knowledge import KNOWN_METHODS, normalize_method

    found = normalize_method(value)
    if found not in KNOWN_METHODS:
        raise InputError(f"`--method {shown(value)}` is not one of {', '.join(sorted(KNOWN_METHODS))}.")
    return str(found)


def vllm_version(value: str) -> str:
    from bot.core.triage.context import parse_version

    if not _VERSION.match(value) or parse_version(value) is None:
        raise InputError(f"`--vllm-version {shown(value)}` is not a version like 0.20.1.")
    return value


def drafter(value: str) -> str:
    if not _DRAFTER.match(value):
        raise InputError(f"`--drafter {shown(value)}` is not a model name like z-lab/Qwen3.6-27B-DFlash.")
    return value


def num_speculative_tokens(value: str) -> str:
    low, high = K_RANGE
    if not value.isdigit() or not low <= int(value) <= high:
        raise InputError(f"`--num-speculative-tokens {shown(value)}` must be a whole number from {low} to {high}.")
    return str(int(value))


CHECKS = {"method": method, "vllm_version": vllm_version, "drafter": drafter,
          "num_speculative_tokens": num_speculative_tokens}


def check(field: str, value: str) -> str:
    """`value` of the Flags field `field`, checked and normalized. Raises InputError with a short message."""
    return CHECKS[field](value.strip())


FAIL_ON = ("degraded", "failing", "never")
SEVERITY = {"healthy": 0, "unknown": 0, "degraded": 1, "failing": 2}


def fail_on(value: object) -> str:
    """`--fail-on`: the verdict from which a command line exits 1 (for cron jobs)."""
    text = str(value or "never")
    if text not in FAIL_ON:
        raise InputError(f"--fail-on {text!r}: choose one of {', '.join(FAIL_ON)}")
    return text


def worse_than(verdict: str, threshold: str) -> bool:
    return threshold != "never" and SEVERITY.get(verdict, 0) >= SEVERITY[threshold]
