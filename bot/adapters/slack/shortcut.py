"""The message shortcut "Diagnose with specops": the message waits here while a modal asks for the context
(method, vLLM version, drafter, k); its submission runs the pasted diagnosis in the message's thread."""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from bot.app.commands import CommandError, paste_option, split_message
from bot.app.diagnosis.flagcheck import known_methods
from bot.app.diagnosis.paste import PASTE_OPTIONS

CALLBACK_ID = "diagnose_message"  # the shortcut's callback_id (deploy/slack-manifest.*.yaml) and the modal's
FIELDS: tuple[tuple[str, str, str], ...] = (  # (block id = Flags field, label, placeholder)
    ("method", "Speculative method", ""),
    ("vllm_version", "vLLM version", "0.20.1"),
    ("drafter", "Drafter", "z-lab/Qwen3.6-27B-DFlash"),
    ("num_speculative_tokens", "Speculative tokens (k)", "15"),
)
_OPTION_OF = {v: k for k, v in PASTE_OPTIONS.items()}


@dataclass
class WaitingMessage:
    team: str | None
    user: str
    channel: str
    thread_ts: str  # the message's thread (the message itself when it is not a reply)
    text: str
    files: list[dict[str, Any]] = field(default_factory=list)
    at: float = field(default_factory=time.monotonic)


class Waiting:
    """Messages whose modal is open, by id (the modal's private_metadata); an hour at most, 500 at most."""

    def __init__(self, ttl: float = 3600.0, cap: int = 500) -> None:
        self.ttl, self.cap = ttl, cap
        self._items: OrderedDict[str, WaitingMessage] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, item: WaitingMessage) -> str:
        key = uuid.uuid4().hex[:12]
        with self._lock:
            now = time.monotonic()
            for old in [k for k, v in self._items.items() if now - v.at > self.ttl]:
                del self._items[old]
            self._items[key] = item
            while len(self._items) > self.cap:
                self._items.popitem(last=False)
        return key

    def get(self, key: str) -> WaitingMessage | None:
        with self._lock:
            item = self._items.get(key)
            return item if item is not None and time.monotonic() - item.at <= self.ttl else None

    def pop(self, key: str) -> WaitingMessage | None:
        with self._lock:
            item = self._items.pop(key, None)
            return item if item is not None and time.monotonic() - item.at <= self.ttl else None


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def modal(key: str, message: WaitingMessage) -> dict[str, Any]:
    """The modal, its fields filled from the message's own `diagnose --method …` line when it has one."""
    own, log = split_message(message.text)
    own = [part for w in own for part in (w.split("=", 1) if w.startswith("-") and "=" in w else [w])]
    prefill: dict[str, str] = {}
    i = 0
    while i + 1 < len(own):  # best effort: a bad value is simply not filled in
        try:
            name, value = paste_option(own[i], own[i + 1])
            prefill[name] = value
        except CommandError:
            pass
        i += 2
    lines = len(log.splitlines())
    what = [f"{lines} line{'s' if lines != 1 else ''} of text"] if log.strip() else []
    if message.files:
        what.append(f"{len(message.files)} attached file{'s' if len(message.files) != 1 else ''}")
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": (
        f"The message's {' and '.join(what) or 'content'} will be read as a vLLM log (never run); the report goes "
        "to its thread. What you know of the deployment makes the diagnosis sharper.")}}]
    for block_id, label, placeholder in FIELDS:
        element: dict[str, Any]
        if block_id == "method":
            options = [{"text": _plain(m), "value": m} for m in sorted(known_methods())]
            element = {"type": "static_select", "action_id": "value", "placeholder": _plain("unknown"),
                       "options": options}
            if prefill.get("method") in known_methods():
                element["initial_option"] = {"text": _plain(prefill["method"]), "value": prefill["method"]}
        else:
            element = {"type": "plain_text_input", "action_id": "value", "max_length": 120,
                       "placeholder": _plain(placeholder)}
            if prefill.get(block_id):
                element["initial_value"] = prefill[block_id]
        blocks.append({"type": "input", "block_id": block_id, "optional": True, "label": _plain(label),
                       "element": element})
    return {"type": "modal", "callback_id": CALLBACK_ID, "private_metadata": f"{key} {message.channel}",
            "title": _plain("Diagnose with specops"), "submit": _plain("Diagnose"), "close": _plain("Cancel"),
            "blocks": blocks}


def submitted_options(view: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The modal's values as chat options (`--method dflash …`), and per-field errors (block id -> message)."""
    values = ((view.get("state") or {}).get("values")) or {}
    words: list[str] = []
    errors: dict[str, str] = {}
    for block_id, _, _ in FIELDS:
        state = (values.get(block_id) or {}).get("value") or {}
        selected = state.get("selected_option") or {}
        value = str(selected.get("value") or state.get("value") or "").strip()
        if not value:
            continue
        try:
            paste_option(_OPTION_OF[block_id], value)
        except CommandError as exc:
            errors[block_id] = str(exc)[:150]
            continue
        words += [_OPTION_OF[block_id], value]
    return words, errors
