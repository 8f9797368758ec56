"""A verb's Args from what chat (app/commands.Command.args) or a command line gave: the same defaults, the same
one form of each value, so a chat command and its command line build equal objects (tests/app/test_verb_grammar.py
holds them to it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from bot.app.verbs.spec import Verb

A = TypeVar("A")


def build_args(verb: Verb[A, Any], given: Mapping[str, object]) -> A:
    """The verb's Args: each option as given (None: not given), else its default; a text value checked and in its
    one form; several paths as a tuple. Raises InputError before anything runs."""
    unknown = set(given) - {o.name for o in verb.options}
    if unknown:  # a caller's slip, not the user's: a plan's dry_run dropped would run the change
        raise TypeError(f"`{verb.name}` has no option {', '.join(sorted(unknown))}")
    values: dict[str, object] = {}
    for o in verb.options:
        value = given.get(o.name)
        if value is None:
            value = o.default
        elif isinstance(value, str):
            if o.check is not None:  # chat checked it as it read it; a command line's is checked here
                o.check(value)
            if o.convert is not None:
                value = o.convert(value)
        if isinstance(value, list):
            value = tuple(value)
        values[o.name] = value
    return verb.args(**values)

