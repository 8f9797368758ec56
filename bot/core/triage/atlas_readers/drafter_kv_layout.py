"""KV cache specs that cannot be made one type (`Hybrid KV cache manager is disabled but failed to convert the KV
cache specs to one unified type`) while a drafter runs: the drafter's layers join the target's in the KV cache, so a
drafter whose layers are shaped unlike the target's (KV heads, head size, sliding window, dtype) adds a spec of its
own. With speculation on, the drafter checkpoint's config against the target's is the first thing to compare, and
running without speculation proves it; the site's own reading (the release's check) stays beside it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.host import has_spec

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

ADVICE = ("A drafter runs: its layers share the KV cache with the target's, and a drafter whose KV layout differs "
          "(`num_key_value_heads`, `head_dim`, a sliding window, the dtype — compare its config.json with the "
          "target's) adds a spec that cannot be unified with them. Start once without `--speculative-config`: if it "
          "starts, use a drafter trained for this target (its KV layout matches).")


def drafter_kv_layout(st: State) -> None:
    if not has_spec(st):
        return
    for f in st.findings:
        if f.site is None or not f.site.function.endswith("unify_hybrid_kv_cache_specs") or f.severity == "info":
            continue
        if ADVICE not in f.remediation:
            f.remediation.insert(0, ADVICE)
        f.confidence = "medium"  # the drafter's layout or the release's check: two readings of one line
        f.part = "drafter"
        f.inputs = list(dict.fromkeys([*f.inputs, "checkpoint"]))
        f.advice = list(dict.fromkeys([*f.advice, "checkpoint"]))
