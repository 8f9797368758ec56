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

_EXPERIMENTAL = re.compile(r"\b(?P<what>[A-Z][\w'\- ]{3,80}?) (?:is|are) (?:an? |still )?experimental\b")


def experimental_first(st: State) -> None:
    from bot.core import switches

    crash = next((f for f in st.findings if f.severity == "critical" and f.confidence in ("low", "medium")
                  and f.switch is None and f.at is not None and not f.catch_all and f.id != "engine-crashed"), None)
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


def _named(found: tuple[Switch, ...], phrase: str) -> Switch | None:
    """The switch whose part the phrase names: the last two words of the part's name (`automatic prefix caching`)."""
    for sw in found:
        head = re.split(r"[(:;]", sw.what, maxsplit=1)[0].strip().lower()
        words = re.findall(r"[a-z][\w-]*", head)
        if len(words) >= 2 and " ".join(words[-2:]) in phrase:
            return sw
    return None
