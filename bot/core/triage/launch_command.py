"""A `vllm serve …` command line a launcher printed, read against the flags of the release it runs.

argparse refuses a flag its parsers do not add before vLLM starts (`unrecognized arguments`), and a launcher's log
may end before vLLM's own refusal reaches it. When the release is known and nothing of vLLM's start follows the
command, a flag that release does not have is the failure to come.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from packaging.version import Version

from bot.core.triage.atlas_readers.argparse_refusal import unknown_flags
from bot.core.triage.atlas_readers.releases import one_release
from bot.core.triage.detectors.state import State
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas

# what shows that vLLM took the command and went on (its args line, its own start, the engine's progress)
_WENT_ON = frozenset({"args", "progress", "version", "logo_version", "engine_spec_config"})
# a value's own dashes are not flags: only the words that open with two dashes after a blank
_FLAG = re.compile(r"(?:^|\s)(--[a-zA-Z][\w-]{0,80})(?==|\s|$)")
# where the shell's next command starts (a pipe, a list, a redirection): its flags are not vLLM's
_NEXT_COMMAND = re.compile(r"\s(?:\|\|?|&&|\d?>>?|&>)(?:\s|$)|;")
# what argparse answers itself, whatever the release
_ARGPARSE_OWN = frozenset({"--help", "--version"})
# a deprecated flag's help naming the release that removes it (`… will be removed in v0.10.0`)
_REMOVED_IN = re.compile(r"\b(?:will be |is |was )?removed in (?:vLLM )?v?(?P<v>\d+\.\d+(?:\.\d+)?)\b", re.IGNORECASE)


def launch_flags(st: State) -> None:
    """A flag the release does not have, on the command line a launcher printed before vLLM ran it."""
    version = _version(st.ev.context.vllm_version)
    if version is None or any(f.severity == "critical" for f in st.findings):
        return
    clues = st.ev.parsed.clues
    commands = [c for c in clues if c.kind == "command" and isinstance(c.value, str)]
    if not commands:
        return
    last = commands[-1]
    at = position(last.origin)
    # vLLM's own lines after it (its clues, or a record in its format naming its source file): it took the command
    if any(c.kind in _WENT_ON and position(c.origin) > at for c in clues) or any(
            q.origin.source_file and position(q.origin) > at for q in st.ev.parsed.problems):
        return
    from bot.core.atlas import load_atlas

    atlas = load_atlas()
    known = atlas.cli_flags(str(version))
    command = _NEXT_COMMAND.split(str(last.value), maxsplit=1)[0]
    flags = [f for f in dict.fromkeys(_FLAG.findall(command)) if _lacks(atlas, f, known, version)]
    if not known or not flags:
        return
    # (a flag the nearest release read still has, whose own help names a removal this release has reached)
    refusal = unknown_flags(atlas, " ".join(flags), {k: v for k, v in known.items() if k not in flags},
                            st.ev.context.vllm_version, "vllm serve")
    if refusal is None:
        return
    given = st.ev.context.vllm_version
    st.findings.append(Finding(
        id="launch-flag-unknown", title=f"The launch command gives {', '.join(flags[:3])}, which vLLM {given}'s "
                                        "parsers do not have: argparse refuses the command before vLLM starts",
        severity="critical", confidence="medium",
        summary=("A launcher printed the command it runs, and nothing of vLLM's own start follows it. vLLM's "
                 f"argparse stops at a flag its parsers do not add (`unrecognized arguments`); {given}'s do not "
                 f"add {', '.join(f'`{f}`' for f in flags[:3])} (the release as given, read against the atlas)."),
        evidence=[f"{last.origin.where()}: {last.origin.text.strip()[:300]}"], remediation=refusal.remediation,
        priority=20, part="config", inputs=list(refusal.inputs), knobs=list(dict.fromkeys([*flags, *refusal.knobs])),
        advice=list(refusal.advice), at=at, level=last.origin.level))


def _version(text: str | None) -> Version | None:
    # (`main`, `0.9.x`, `latest`, a range: no one release to read the flags of)
    release = one_release(text.strip() if text else None)
    return Version(release) if release else None


def _lacks(atlas: Atlas, flag: str, known: dict[str, str], version: Version) -> bool:
    """Does the release surely not have `flag`? Only where the releases the atlas read around it agree (or the flag's
    own help names a removal the release has reached): a release between two read ones is not guessed."""
    name = "--" + flag[2:].replace("_", "-")  # vLLM's parser takes `--max_model_len` for `--max-model-len`
    if name in _ARGPARSE_OWN or (name in known and not _removed_by(known[name], version)):
        return False
    if name.startswith("--no-") and "--" + name[5:] in known:
        return False  # argparse's negative form of a boolean flag the release has
    if name not in known and sum(1 for k in known if k.startswith(name)) == 1:
        return False  # argparse takes a unique prefix of a flag (`--max-model` for `--max-model-len`)
    read = [Version(r) for r in atlas.releases]
    span = atlas.flag_span(name) or (atlas.flag_span("--" + name[5:]) if name.startswith("--no-") else None)
    if span is None:
        # no release read has it: not a flag of vLLM's — unless the release is newer than every one read
        return not read or version <= read[-1]
    if name in known:
        return True  # the nearest release read has it, and its help says this release removed it
    first, last = Version(span[0]), Version(span[1])
    if version > last:
        after = [r for r in read if r > last]
        return bool(after) and after[0] <= version
    if version < first:
        before = [r for r in read if r < first]
        return bool(before) and version <= before[-1]
    return False


def _removed_by(help_text: str, version: Version) -> bool:
    """Does a flag's own help say a release no later than `version` removes it (a pre-release of that release is
    earlier)?"""
    said = _REMOVED_IN.search(help_text)
    return said is not None and version >= Version(said["v"])
