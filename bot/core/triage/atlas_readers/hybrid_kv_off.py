"""The hybrid KV cache manager turned off, then the KV cache too small: vLLM says it turned the manager off (a KV
connector set, or the flag) and that, for a hybrid model, it then keeps every layer's KV for the whole sequence — no
sliding-window or Mamba savings. A KV shortfall after such a line is that setting's cost: keep the manager on where
the release allows it, or drop what turned it off. What the manager's own line says in later releases comes from the
atlas (the release where its check changed)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# vLLM's words (vllm/config/vllm.py VllmConfig.__post_init__ 0.11.2 on; kv_cache_utils / kv_cache_planning's
# unify_hybrid_kv_cache_specs): the manager off, and why
_OFF = re.compile(r"\bTurning off hybrid kv cache manager because (?P<why>[^.]{1,160})|"
                  r"\bHybrid KV cache manager is disabled for this hybrid model\b", re.IGNORECASE)
_FLAG = re.compile(r"`?(--[a-z][a-z0-9-]+)`?")
_KEEP_ON = "--no-disable-hybrid-kv-cache-manager"
_SETTING = "--disable-hybrid-kv-cache-manager"


def hybrid_kv_off(st: State) -> None:
    short = [f for f in st.findings if f.severity == "critical" and f.part == "kv-cache"]
    if not short:
        return
    lines = [p for p in [*st.ev.parsed.problems, *st.ev.parsed.loose] if _OFF.search(p.origin.text or p.message)]
    if not lines:
        return
    from bot.core.atlas import load_atlas

    atlas = load_atlas()
    why = next((h["why"] for p in lines if (h := _OFF.search(p.origin.text or p.message)) and h["why"]), "")
    causes = [f for f in _FLAG.findall(why) if atlas.flag_span(f) is not None]
    version = st.ev.context.vllm_version
    changed = next((m for p in lines if (m := atlas.match(p.message, version=version)) is not None and m.fixed_in),
                   None)
    for f in short:
        f.inputs = list(dict.fromkeys([*f.inputs, _SETTING, *causes]))
        f.knobs = list(dict.fromkeys([_KEEP_ON, *causes, *f.knobs]))
        by = f" (`{'`, `'.join(causes)}` turned it off)" if causes else ""
        said = (f"vLLM turned the hybrid KV cache manager off{by}: for a hybrid model (sliding-window or Mamba "
                "layers) every layer then keeps KV for the whole sequence, so the pool holds far fewer tokens. Keep "
                f"it on with `{_KEEP_ON}` where this release's connector supports it, or serve without "
                f"{'the setting that turned it off' if causes else 'it off'}.")
        if changed is not None:
            said += (f" The line that turned it off is gone after {changed.gone_after}: {changed.fixed_in} decides it "
                     f"otherwise ({changed.compare_url}) — upgrading is the other way out.")
            f.advice = list(dict.fromkeys([*f.advice, "upgrade"]))
        f.remediation.insert(0, said)
        f.evidence = list(dict.fromkeys([*f.evidence, quoted(lines[0])]))
