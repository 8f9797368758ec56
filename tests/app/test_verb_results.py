"""A verb names the result types its run returns: each is shown by a presenter, and the names are run's own."""

from __future__ import annotations

import importlib
import types
import typing
from typing import Any

import pytest

from bot.app.verbs import REGISTRY
from bot.app.verbs.spec import Verb
from bot.present.render import PRESENTERS


def _returned(verb: Verb[Any, Any]) -> set[str]:
    module = importlib.import_module(verb.run.__module__)
    hints = typing.get_type_hints(verb.run, globalns={**vars(module), **_result_modules(verb)})
    ret = hints["return"]
    members = typing.get_args(ret) if isinstance(ret, types.UnionType) or typing.get_origin(ret) is typing.Union \
        else (ret,)
    return {f"{t.__module__}.{t.__qualname__}" for t in members}


def _result_modules(verb: Verb[Any, Any]) -> dict[str, object]:
    """The names run's annotation uses, from the modules the verb names (they are imported only for typing)."""
    out: dict[str, object] = {}
    for path in verb.results:
        module, _, name = path.rpartition(".")
        out[name] = getattr(importlib.import_module(module), name)
    return out


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_verbs_results_are_runs_and_each_has_a_presenter(name: str) -> None:
    verb = REGISTRY[name]
    assert set(verb.results) == _returned(verb), f"{name}: results {verb.results} but run returns {_returned(verb)}"
    for path in verb.results:
        assert path in PRESENTERS, f"{name}: no presenter for {path}"
