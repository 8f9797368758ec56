"""KV cache specs that cannot be made one type (`Hybrid KV cache manager is disabled but failed to convert the KV
cache specs to one unified type`) while a drafter runs: the drafter's layers join the target's in the KV cache, so a
drafter whose layers are shaped unlike the target's (KV heads, head size, sliding window, dtype) adds a spec of its
own. With speculation on, the drafter checkpoint's config against the target's is the first thing to compare, and
running without speculation proves it; the site's own reading (the release's check) stays beside it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.host import has_spec

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

ADVICE = ("A drafter runs: its layers share the KV cache with the target's, and a drafter whose KV layout differs "
          "(`num_key_value_heads`, `head_dim`, a sliding window, the dtype — compare its config.json with the "
          "target's) adds a spec that cannot be unified with them. Start once without `--speculative-config`: if it "
          "starts, use a drafter trained for this target (its KV layout matches).")


# what turns the hybrid KV cache manager off for a hybrid target whatever the drafter (a KV connector, the flag, KV
# offloading): then the target's own layers are the usual odd ones out, not the drafter's
_MANAGER_OFF = re.compile(r"kv_transfer_config|disable_hybrid_kv_cache_manager|disable-hybrid-kv-cache-manager|"
                          r"kv_offloading|Turning off hybrid kv cache manager", re.IGNORECASE)


def drafter_kv_layout(st: State) -> None:
    if not has_spec(st) or any(_MANAGER_OFF.search(c.origin.text or "") for c in st.ev.parsed.clues) \
            or any(_MANAGER_OFF.search(q.origin.text or q.message) for q in st.ev.parsed.problems):
        return
    for f in st.findings:
        if f.site is None or not f.site.function.endswith("unify_hybrid_kv_cache_specs") or f.severity == "info":
            continue
        if ADVICE not in f.remediation:
            f.remediation.insert(0, ADVICE)
        if f.confidence == "high":
            f.confidence = "medium"  # the drafter's layout or the release's check: two readings of one line
        f.inputs = list(dict.fromkeys([*f.inputs, "checkpoint"]))
        f.advice = list(dict.fromkeys([*f.advice, "checkpoint"]))
