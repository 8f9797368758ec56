"""A `vllm serve …` command line a launcher printed, read against the flags of the release it runs.

argparse refuses a flag its parsers do not add before vLLM starts (`unrecognized arguments`), and a launcher's log
may end before vLLM's own refusal reaches it. When the release is known and nothing of vLLM's start follows the
command, a flag that release does not have is the failure to come.
"""

from __future__ import annotations

import re

from bot.core.triage.atlas_readers.argparse_refusal import unknown_flags
from bot.core.triage.detectors.state import State
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

# what shows that vLLM took the command and went on (its args line, its own start, the engine's progress)
_WENT_ON = frozenset({"args", "progress", "version", "logo_version", "engine_spec_config"})
# a deprecated flag's help naming the release that removes it (`… will be removed in v0.10.0`)
_REMOVED_IN = re.compile(r"\b(?:will be |is |was )?removed in (?:vLLM )?v?(?P<v>\d+\.\d+(?:\.\d+)?)\b", re.IGNORECASE)
# a value's own dashes are not flags: only the words that open with two dashes after a blank
_FLAG = re.compile(r"(?:^|\s)(--[a-zA-Z][\w-]{0,80})(?==|\s|$)")


def launch_flags(st: State) -> None:
    """A flag the release does not have, on the command line a launcher printed before vLLM ran it."""
    version = st.ev.context.vllm_version
    if not version or any(f.severity == "critical" for f in st.findings):
        return
    clues = st.ev.parsed.clues
    commands = [c for c in clues if c.kind == "command" and isinstance(c.value, str)]
    if not commands:
        return
    last = commands[-1]
    at = position(last.origin)
    if any(c.kind in _WENT_ON and position(c.origin) > at for c in clues):
        return
    from bot.core.atlas import load_atlas

    atlas = load_atlas()
    known = atlas.cli_flags(version)
    given = _FLAG.findall(str(last.value))
    flags = [f for f in given if f not in known or _removed_by(known[f], version)]
    if not known or not flags:
        return
    # (a flag the nearest release read still has, whose own help names a removal this release has reached)
    refusal = unknown_flags(atlas, " ".join(flags), {k: v for k, v in known.items() if k not in flags}, version,
                            "vllm serve")
    if refusal is None:
        return
    st.findings.append(Finding(
        id="launch-flag-unknown", title=f"The launch command gives {', '.join(flags[:3])}, which vLLM {version}'s "
                                        "parsers do not have: argparse refuses the command before vLLM starts",
        severity="critical", confidence="medium",
        summary=("A launcher printed the command it runs, and nothing of vLLM's own start follows it. vLLM's "
                 f"argparse stops at a flag its parsers do not add (`unrecognized arguments`); {version}'s do not "
                 f"add {', '.join(f'`{f}`' for f in flags[:3])} (the release as given, read against the atlas)."),
        evidence=[f"{last.origin.where()}: {last.origin.text.strip()[:300]}"], remediation=refusal.remediation,
        priority=20, part="config", inputs=list(refusal.inputs), knobs=list(dict.fromkeys([*flags, *refusal.knobs])),
        advice=list(refusal.advice), at=at, level=last.origin.level))


def _removed_by(help_text: str, version: str) -> bool:
    """Does a flag's own help say a release no later than `version` removes it?"""
    from bot.core.triage.context import parse_version

    said = _REMOVED_IN.search(help_text)
    removal, have = (parse_version(said["v"]) if said else None), parse_version(version)
    return removal is not None and have is not None and have >= removal
