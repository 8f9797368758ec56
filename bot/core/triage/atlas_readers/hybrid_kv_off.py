"""The hybrid KV cache manager turned off, then the KV cache too small: vLLM says it turned the manager off (a KV
connector set, or the flag) and that, for a hybrid model, it then keeps every layer's KV for the whole sequence — no
sliding-window or Mamba savings. A KV shortfall after such a line is that setting's cost: keep the manager on where
the release allows it, or drop what turned it off. What the manager's own line says in later releases comes from the
atlas (the release where its check changed)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position

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


# vLLM's own words when it turns the manager off, one message per reason (vllm/config/vllm.py VllmConfig.__post_init__):
# the flag each names is a setting that turns it off in that release
_TURNING_OFF = "Turning off hybrid kv cache manager because"
_UNIFY = "unify_hybrid_kv_cache_specs"
# a connector that refuses the manager on (KVConnectorFactory.create_connector), in the same log as the unify failure
_NO_HMA = re.compile(r"\bConnector (?P<cls>\w+) does not support HMA but HMA is enabled\b")


def unify_failed(st: State) -> None:
    """The manager off for a hybrid model, and its layers' KV not of one kind: what turns it off in the release (the
    flags vLLM's own messages name), and — when the same log shows a connector refusing the manager on — that this
    connector and this model cannot go together on this release."""
    failed = [f for f in st.findings if f.site is not None and f.site.function.endswith(_UNIFY)
              and f.severity == "critical"]
    if not failed:
        return
    from bot.core.atlas import load_atlas

    atlas = load_atlas()
    site = failed[0].site
    version = st.ev.context.vllm_version or (site.last if site is not None else None)
    flags = list(dict.fromkeys(flag for s in atlas.sites(release=version, file="vllm/config/vllm.py")
                               if s.template.startswith(_TURNING_OFF)
                               for flag in _FLAG.findall(s.template.split(".", 1)[0])))
    # (a refusal before the failure: its advice, the manager off, was taken, and the failure is what came of it)
    last = max((f.at for f in failed if f.at is not None), default=None)
    refused = next((m for p in st.ev.parsed.problems if (m := _NO_HMA.search(p.message))
                    and last is not None and position(p.origin) < last), None)
    if refused is not None:
        # the refusal's advice (turn the manager off) was followed, and this failure is what came of it: a note now
        for f in st.findings:
            if f.severity != "info" and f not in failed and any(refused.group(0) in e for e in f.evidence):
                f.severity, f.confidence = "info", "low"
    for f in failed:
        if refused is not None:
            f.remediation.insert(0, (
                f"The same log shows `{refused['cls']}` refusing the hybrid manager on, and this hybrid model failing "
                "with it off: that connector and this model do not go together on this release. Serve without the "
                "connector, or with one (or a release of its package) that supports the hybrid manager."))
            f.advice = list(dict.fromkeys([*f.advice, "disable-plugin"]))
        elif flags:
            f.remediation.insert(0, (
                f"This model mixes layer kinds and needs the hybrid KV cache manager, which was off. In vLLM "
                f"{version}{'' if st.ev.context.vllm_version else ' (the newest release with this check)'} it is "
                f"turned off by {', '.join(f'`{x}`' for x in flags)} (a KV connector or KV offloading "
                f"without its support) and by `{_SETTING}`: serve without them, or with a connector that supports it."))
            f.knobs = list(dict.fromkeys([*f.knobs, *flags]))
