"""A part the log announced as experimental (`Prefix caching in Mamba cache 'align' mode is experimental.`), then a
crash no entry explains: turning that part off is the first thing to try — vLLM itself said it is the least proven
thing in the run. The part is found among the switches by the words the log uses for it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.evidence import position

if TYPE_CHECKING:
    from bot.core.switches import Switch
    from bot.core.triage.detectors.state import State
    from bot.core.triage.findings import Finding

_EXPERIMENTAL = re.compile(r"\b(?P<what>[A-Z][\w'\- ]{3,80}?) (?:is|are) (?:an? |still )?experimental\b")


def experimental_first(st: State) -> None:
    from bot.core import switches

    crash = next((f for f in st.findings if f.severity == "critical" and f.confidence in ("low", "medium")
                  and f.switch is None and f.at is not None and not f.catch_all and f.id != "engine-crashed"
                  and _maybe_vllms(f)), None)
    if crash is None or any(f.severity == "critical" and f.confidence == "high" for f in st.findings):
        return
    for p in [*st.ev.parsed.problems, *st.ev.parsed.loose][:400]:
        said = _EXPERIMENTAL.search((p.origin.text or p.message)[:600])
        if said is None or crash.at is None or position(p.origin) > crash.at:
            continue
        sw = _named(switches.load_switches(), said["what"].lower())
        offer = sw.offer(st.ev.context.vllm_version) if sw is not None else None
        if sw is None or offer is None:
            continue
        crash.remediation.insert(0, f"Before the crash the log announced \"{said['what']}\" as experimental: "
                                    f"{offer[0]}")
        crash.knobs = [offer[1], *[k for k in crash.knobs if k != offer[1]]]
        crash.switch = crash.remediation[0]
        if crash.part in (None, "other"):
            crash.part = sw.part  # the frames named no part of vLLM's: the announced one is the suspect
        return


# words too common to name a part on their own (`the model`, `at startup`, `own process`)
_COMMON = frozenset({"the", "of", "on", "at", "are", "is", "own", "model", "startup", "started", "process", "backend",
                     "its", "by", "in", "to", "and", "or", "a", "an"})


def _named(found: tuple[Switch, ...], phrase: str) -> Switch | None:
    """The switch whose part the phrase names: the last two words of the part's name (`automatic prefix caching`),
    as whole words, when neither is a common word."""
    for sw in found:
        head = re.split(r"[(:;]", sw.what, maxsplit=1)[0].strip().lower()
        words = re.findall(r"[a-z][\w-]*", head)
        if len(words) < 2 or set(words[-2:]) & _COMMON:
            continue
        if re.search(rf"(?<![\w-]){re.escape(' '.join(words[-2:]))}(?![\w-])", phrase):
            return sw
    return None


def _maybe_vllms(f: Finding) -> bool:
    """A crash in vLLM's code, or in a file named alone that a vLLM release has (a paste that dropped the path) —
    not the user's own program or a library's, which an announced part of vLLM does not explain."""
    if f.owner in (None, "vllm"):
        return True
    from bot.core.triage.atlas_readers.frame_first import frame_path

    path = frame_path(f) if f.owner == "user-script" else None
    if path is None:
        return False
    from bot.core.atlas import load_atlas

    return "/" not in path and load_atlas().knows_file(path)
