"""The verb registry: one module per chat/CLI verb, each declaring its `VERB` (bot/app/verbs/spec.py).

The chat parser and `help` (app/commands.py), the dispatcher (app/chat.py), the console, Slack and the CLI
read this table; adding a verb is adding its module here and its renderer if it returns a new type.
"""

from __future__ import annotations

from typing import Any

from bot.app.verbs import check, deploy, diagnose, doctor, fleet, lock, report, rollout, status, stop, tune, unlock
from bot.app.verbs.spec import Verb

__all__ = ["REGISTRY", "get"]

# in the order `help` lists them
REGISTRY: dict[str, Verb[Any, Any]] = {v.name: v for v in (
    deploy.VERB, check.VERB, diagnose.VERB, status.VERB, stop.VERB, report.VERB, doctor.VERB, tune.VERB, fleet.VERB,
    rollout.VERB, lock.VERB, unlock.VERB,
)}


def get(name: str) -> Verb[Any, Any]:
    return REGISTRY[name]
