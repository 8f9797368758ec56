"""vLLM's plugin loader saying a plugin failed to load (`Failed to load plugin ascend`, vllm/plugins/__init__.py):
the plugin's own import failed — its code, or a package it needs (a platform plugin's device library) — not vLLM's.
The line's finding names the plugin as the owner, its fix, and how to run without it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.triage.evidence import position

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

_FAILED = re.compile(r"\bFailed to load plugin (?P<name>[\w.-]{1,80})")
# the entry-point group the loader names before it (`Available plugins for group vllm.platform_plugins:`)
_PLATFORM_GROUP = re.compile(r"group vllm\.platform_plugins\b")


def plugin_load(st: State) -> None:
    lines = [*st.ev.parsed.problems, *st.ev.parsed.loose]
    failed = [(p, hit) for p in lines if (hit := _FAILED.search(p.message))]
    if not failed:
        return
    platform = any(_PLATFORM_GROUP.search(c.origin.text or "") for c in st.ev.parsed.clues) or any(
        _PLATFORM_GROUP.search(p.origin.text or "") for p in lines)
    for line, hit in failed:
        at = position(line.origin)
        for f in st.findings:
            if f.at != at or f.severity == "info":
                continue
            f.owner, f.part = "plugin", "platform" if platform else f.part
            f.advice = list(dict.fromkeys([*f.advice, "disable-plugin"]))
            f.knobs = list(dict.fromkeys([*f.knobs, "VLLM_PLUGINS"]))
            f.sources = list(dict.fromkeys([*f.sources, owners.PLUGIN_DOC]))
            f.remediation.insert(0, f"The plugin `{hit['name']}` failed to import: its traceback says which module "
                                    "or package it could not load — install the plugin's release made for this "
                                    "vLLM together with the packages it needs (a platform plugin's device library "
                                    "at the version the plugin names), or leave it out (`VLLM_PLUGINS` lists the "
                                    "plugins to load).")
