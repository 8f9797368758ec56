"""An attention backend vLLM said it could not use, and the later failure that needed it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.atlas_tables import public_version
from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.atlas_readers.releases import newer
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas
    from bot.core.triage.detectors.state import State

# vLLM's own words when it passes over an attention backend (platforms/cuda.py, attention/selector.py)
_CANNOT_USE_RE = re.compile(r"Cannot use (?P<backend>[A-Za-z][\w-]*(?: ?\d)?) backend "
                            r"(?P<why>(?:for|because|on) [^.]+)")
_GENERATION_WORD_RE = re.compile(r"\b(Kepler|Maxwell|Pascal|Volta|Turing|Ampere|Ada|Hopper|Blackwell)\b|compute "
                                 r"capability", re.IGNORECASE)


def backend_refused(st: State, p: ProblemLine) -> Finding | None:
    """An exception that asks for a backend vLLM said earlier it could not use ("Only FlashAttention backend is
    supported" after "Cannot use FlashAttention-2 backend for Volta and Turing GPUs"): the earlier line is why."""
    for q in [*st.ev.parsed.loose, *st.ev.parsed.problems]:
        hit = _CANNOT_USE_RE.search(q.message)
        if hit is None or position(q.origin) > position(p.origin):
            continue
        name = re.split(r"[-\d ]", hit["backend"])[0]
        if len(name) < 5 or name.lower() not in p.message.lower():
            continue
        backend, why = hit["backend"], hit["why"]
        return Finding(
            id="gpu-too-old" if _GENERATION_WORD_RE.search(why) else "backend-unavailable",
            title=f"{p.exception or 'The error'} needs the {backend} backend, which vLLM could not use: {why}",
            severity="critical", confidence="medium",
            summary=(f"The failing code requires {backend} ({clip(p.message, 120)}), and vLLM said before "
                     f"that it could not use that backend {why}, so it chose another."),
            evidence=[quoted(q, 200), quoted(p, 200)],
            remediation=[f"Run it where {backend} works ({why.removeprefix('for ').removeprefix('because ')} "
                         "is what rules it out), or use the feature's option for the backend this host has."],
            priority=42, part="attention")
    return None


# the configuration vLLM's backend selection judged, printed with its refusal (`No valid attention backend found
# for cuda with AttentionSelectorConfig(head_size=128, dtype=…, kv_cache_dtype=auto, block_size=8, …)`)
_SELECTOR_RE = re.compile(r"AttentionSelectorConfig\((?P<fields>[^()]{1,600})")
_FIELD_RE = re.compile(r"(?P<key>[a-z_]{2,40})=(?P<value>[^,()]{1,60})")


def selector_settings(atlas: Atlas, message: str, version: str | None) -> tuple[list[str], str | None]:
    """The flags that set the fields of the configuration the selection judged (`--block-size`, `--kv-cache-dtype`,
    `--dtype`), and a sentence naming them with their values; every backend refused that configuration, so one of
    those values (or the model's own: head size, MLA, sinks) is why."""
    hit = _SELECTOR_RE.search(message)
    if hit is None:
        return [], None
    named: dict[str, str] = {}
    for field in _FIELD_RE.finditer(hit["fields"]):
        flags = atlas.knobs_for([f"?.{field['key']}", f"self.{field['key']}"], version)
        flag = next((k.flag for k in flags if k.flag != "--speculative-config"), None)
        if flag and flag not in named:
            named[flag] = field["value"].strip()
    if not named:
        return [], None
    said = ", ".join(f"`{flag}` ({value})" for flag, value in named.items())
    return list(named), (f"No attention backend takes the configuration the selection judged: of what you set, "
                         f"{said}; change the one a backend refuses (the refusal's reasons, or the backends' "
                         "documentation, say which), or pick the backend that takes it.")


# the reasons vLLM's backend selection gives per backend (`FLASHMLA_SPARSE: [kv_cache_dtype not supported]`, inside
# `No valid attention backend found … Reasons: {…}` or quoted alone): a setting named `<field> not supported`
_REASONS_RE = re.compile(r"\b(?P<backend>[A-Z][A-Z0-9_]{2,40}): \[(?P<reasons>[^\[\]]{1,400})\]")
_NOT_SUPPORTED_RE = re.compile(r"(?:^|,\s?)(?P<field>[a-z][a-z0-9_]{2,40}) not supported\b")
# the flags named and --attention-backend
ATTENTION_DOC = "https://docs.vllm.ai/en/latest/configuration/engine_args.html"


def refused_settings(atlas: Atlas, message: str, version: str | None) -> list[tuple[str, str]]:
    """(backend, flag) for each setting a backend refused by name, where a flag sets that setting — only for a
    backend all of whose reasons are such settings (one that also refuses the GPU or the model is not won back by a
    flag)."""
    out: list[tuple[str, str]] = []
    for hit in _REASONS_RE.finditer(message[:4000]):
        reasons = [r.strip() for r in hit["reasons"].split(",") if r.strip()]
        flags: list[str] = []
        for reason in reasons:
            named = _NOT_SUPPORTED_RE.match(reason)
            knobs = atlas.knobs_for([f"?.{named['field']}", f"self.{named['field']}"], version) if named else ()
            flag = next((k.flag for k in knobs if k.flag != "--speculative-config"), None)
            if flag is None:
                flags = []
                break
            flags.append(flag)
        out += [(hit["backend"], f) for f in dict.fromkeys(flags) if (hit["backend"], f) not in out]
    return out


# a backend was chosen after all (`Using FLASH_ATTN attention backend`, or the reasons logged as news: `Some attention
# backends are not valid …`), or the full refusal is in the log (its own finding): the reasons alone decide nothing
_CHOSEN_RE = re.compile(r"\bUsing \w{2,40} (?:attention )?backend\b|Some attention backends are not valid|"
                        r"No valid attention backend found")


def reasons_alone(st: State, atlas: Atlas, p: ProblemLine, version: str | None) -> Finding | None:
    """The selection's reasons quoted without the sentence around them: the backends named refused the settings
    named; what failed is the selection (vLLM stops when no backend takes the configuration)."""
    refused = refused_settings(atlas, p.message, version)
    texts = [q.origin.text or q.message for q in [*st.ev.parsed.problems, *st.ev.parsed.loose][:2000]]
    texts += [c.origin.text or "" for c in st.ev.parsed.clues[:2000]]
    # another error in the log has its own finding (the reasons may be news of a backend chosen after all)
    other = any(q is not p and (q.kind == "exception" or (q.origin.level or "").upper() in ("ERROR", "CRITICAL"))
                for q in st.ev.parsed.problems[:2000])
    if not refused or other or any(_CHOSEN_RE.search(t[:2000]) for t in texts):
        return None
    flags = list(dict.fromkeys(flag for _, flag in refused))
    said = "; ".join(f"{backend} refused {flag}" for backend, flag in refused)
    return Finding(
        id="attention-backend-refused-setting", title=f"The attention backend refused a setting: {said}",
        severity="critical", confidence="medium",
        summary=(f"vLLM's attention backend selection lists why each backend cannot serve this configuration: {said}. "
                 "When no backend is left, vLLM stops."),
        evidence=[quoted(p)],
        remediation=[f"Change {', '.join(f'`{f}`' for f in flags)} to a value the backend takes (the default, where "
                     f"you set another), or pick a backend that takes it, where this model has another "
                     f"({_backend_switch(atlas, version)})."],
        sources=[ATTENTION_DOC], priority=40, part="attention", inputs=flags, knobs=flags,
        at=position(p.origin))


# vLLM stores an FP8 KV cache as bytes (its dtype table maps `fp8`, `fp8_e4m3`, `fp8_e5m2` to torch.uint8): a kernel
# refusing a KV cache of uint8 refused the FP8 KV cache (`MLA kv_data_type torch.uint8 is not supported`)
_KV_WORD = r"\b(?:kv[ _]?cache(?:_dtype)?|kv_data_type|kv_dtype)\b"
_UINT8_KV_RE = re.compile(_KV_WORD + r"[^.]{0,40}\b(?:torch\.)?uint8\b[^.]{0,40}\bnot supported\b|"
                          r"\b(?:torch\.)?uint8\b[^.]{0,40}" + _KV_WORD + r"[^.]{0,40}\bnot supported\b",
                          re.IGNORECASE)
KV_DTYPES = "https://github.com/vllm-project/vllm/blob/main/vllm/utils/torch_utils.py"


def _backend_switch(atlas: Atlas, version: str | None) -> str:
    """How to pick the attention backend in this release: the flag where it has it, else the variable."""
    span = atlas.flag_span("--attention-backend")
    if span is not None and version and public_version(version) is not None and newer(span[0], version):
        return "`VLLM_ATTENTION_BACKEND`, this release has no `--attention-backend`"
    return ("`--attention-backend`" + (f", from vLLM {span[0]}; `VLLM_ATTENTION_BACKEND` before" if span else ""))


def fp8_kv_refused(atlas: Atlas, p: ProblemLine, version: str | None) -> Finding | None:
    if _UINT8_KV_RE.search(p.message[:600]) is None:
        return None
    return Finding(
        id="fp8-kv-cache-refused", title="A kernel refused the FP8 KV cache (vLLM stores it as uint8)",
        severity="critical", confidence="medium",
        summary=("The message refuses a KV cache of uint8: vLLM keeps an FP8 KV cache (`--kv-cache-dtype fp8`, "
                 "`fp8_e4m3`, `fp8_e5m2`) as bytes, so the kernel the attention backend called does not take an FP8 "
                 "KV cache in this configuration."),
        evidence=[quoted(p)],
        remediation=["Serve without the FP8 KV cache to prove it: `--kv-cache-dtype auto`, or the model's dtype "
                     "explicitly (`bfloat16`, in releases whose `--kv-cache-dtype` takes it) where the checkpoint "
                     "itself asks for an FP8 KV cache; or pick an "
                     "attention backend that takes an FP8 KV cache for this model "
                     f"({_backend_switch(atlas, version)}); a later release may add the FP8 path to this one."],
        sources=[KV_DTYPES], priority=40, part="attention", inputs=["--kv-cache-dtype"],
        knobs=["--kv-cache-dtype"], at=position(p.origin))
