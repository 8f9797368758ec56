"""Know before launch: a speculative pair (target + drafter), its method and fields, checked against the vLLM
release that will run it — from what the host already holds (configs, the version), the atlas (each release's
config fields and environment variables) and the knowledge base (known failures with their release ranges and
the drafter facts they rest on). Pure: the facts come in, the checks go out.

Each check says ok, warn or refuse, with its evidence and its source. A check whose inputs could not be read says
so ("unknown"), never ok; a premise that is only guessed (a drafter recognised by name, its config unread) warns,
never refuses.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.core import memory_fit as mf
from bot.core.atlas import Atlas
from bot.core.capability_gates import GateFacts, gates
from bot.core.triage.context import parse_version
from bot.core.triage.findings import Finding, Severity
from bot.core.triage.knowledge import IssueFacts, KnowledgeBase, normalize_method

Verdict = Literal["ok", "warn", "refuse", "unknown"]
VERDICT_RANK: dict[str, int] = {"refuse": 0, "unknown": 1, "warn": 2, "ok": 3}
# methods whose drafter is a model of its own, with its own vocabulary and config (MTP and ngram have none)
_DRAFTER_METHODS = frozenset({"eagle", "eagle3", "dflash", "dflash2", "draft_model", "medusa", "mlp_speculator"})
# methods whose drafter reads the target's hidden states
_HIDDEN_FED = frozenset({"eagle", "eagle3", "dflash", "dflash2"})
_ATLAS_SOURCE = "bot/core/knowledge/atlas (vLLM's config classes and envs.py, per release)"


@dataclass(frozen=True)
class Check:
    id: str
    title: str
    verdict: Verdict
    evidence: tuple[str, ...] = ()
    fix: str = ""
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class PairFacts:
    """What the host holds for one profile. A config that could not be read is None, with why in `unread`."""

    profile: str
    method: str | None
    vllm_version: str | None
    drafter: str | None = None  # the drafter's name or path, as the profile gives it
    speculative_config: Mapping[str, Any] | None = None  # as it will be passed to `--speculative-config`
    target_config: Mapping[str, Any] | None = None
    drafter_config: Mapping[str, Any] | None = None
    max_model_len: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    unread: Mapping[str, str] = field(default_factory=dict)  # "target"/"drafter"/"version"/"gpus" -> why not read
    dtype: str | None = None  # `--dtype` as the profile gives it ("auto" or none: the checkpoint's)
    tensor_parallel_size: int = 1
    device: str = "cuda"  # "cpu": vLLM's CPU build, no GPU to check
    gpus: tuple[tuple[str, tuple[int, int] | None], ...] | None = None  # (name, compute capability) each; None unread
    gpu_memory: tuple[tuple[int, int], ...] | None = None  # (total MiB, used MiB) each GPU, in `gpus`' order
    target_weights: int | None = None  # bytes the checkpoint's weight files hold (None: not weighed, why in unread)
    drafter_weights: int | None = None
    gpu_memory_utilization: float | None = None  # the profile's `--gpu-memory-utilization` (None: vLLM's default)
    kv_cache_dtype: str | None = None  # the profile's `--kv-cache-dtype`
    attention_backend: str | None = None  # the profile's `--attention-backend`
    quantization: str | None = None  # the profile's `--quantization`


def run_checks(f: PairFacts, kb: KnowledgeBase, atlas: Atlas) -> list[Check]:
    """Every check, worst first."""
    method = normalize_method(f.method)
    out = [_version(f), _method_in_release(f, method, kb), _fields_in_release(f, atlas)]
    if method in _DRAFTER_METHODS:
        out += [_vocabulary(f), _hidden_size(f, method), _layer_ids(f, kb), _rope(f), _context(f)]
    out += _known_failures(f, method, kb)
    out += _architectures(f, atlas)
    out.append(_environment(f, atlas))
    if f.device == "cuda":
        out += _gpus(f, atlas)
        out += _memory(f, method, atlas)
    return sorted((c for c in out if c is not None), key=lambda c: VERDICT_RANK[c.verdict])


def worst(checks: list[Check]) -> Verdict:
    return min((c.verdict for c in checks), key=lambda v: VERDICT_RANK[v], default="ok")


# ---- the release -------------------------------------------------------------------------------------------------

def _version(f: PairFacts) -> Check:
    if f.vllm_version is None:
        return Check("vllm-version", "the host's vLLM version", "unknown",
                     (f"could not read it: {f.unread.get('version', 'not given')}",),
                     "Check the profile's `vllm.bin` on the host (`vllm --version`).")
    return Check("vllm-version", f"the host runs vLLM {f.vllm_version}", "ok", (f"`vllm --version`: {f.vllm_version}",))


def _method_in_release(f: PairFacts, method: str | None, kb: KnowledgeBase) -> Check | None:
    if method is None:
        return None
    first = kb.method_first_release.get(method)
    if first is None:
        return None  # the knowledge base records no first release for it: nothing to check, nothing passed
    v = parse_version(f.vllm_version)
    if v is None:
        return Check("method-in-release", f"`{method}` in this release", "unknown", ("the host's version is unknown",))
    if v < parse_version(first):  # type: ignore[operator]
        return Check("method-in-release", f"`{method}` is not in vLLM {f.vllm_version}", "refuse",
                     (f"{method} first shipped in vLLM {first}",), f"Upgrade vLLM to {first} or later.",
                     ("https://github.com/vllm-project/vllm/releases/tag/v" + first,))
    return Check("method-in-release", f"`{method}` is in vLLM {f.vllm_version}", "ok", (f"first in {first}",))


def _fields_in_release(f: PairFacts, atlas: Atlas) -> Check | None:
    if not f.speculative_config or f.vllm_version is None:
        return None
    known = atlas.config_fields("SpeculativeConfig", f.vllm_version)
    if not known:
        return Check("spec-fields", "`--speculative-config` fields in this release", "unknown",
                     ("the atlas has no SpeculativeConfig for this release",))
    bad: list[str] = []
    for key in f.speculative_config:
        if key in known:
            continue
        span = atlas.field_span("SpeculativeConfig", key)
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
        bad.append(f"`{key}`: " + (f"in vLLM {span[0]}–{span[1]}, not {f.vllm_version}" if span else
                                   "no release has it" + (f" (did you mean `{close[0]}`?)" if close else "")))
    if bad:
        return Check("spec-fields", f"`--speculative-config` has fields vLLM {f.vllm_version} does not take",
                     "refuse", tuple(bad), "Drop or rename them, or run the release that has them.", (_ATLAS_SOURCE,))
    return Check("spec-fields", f"`--speculative-config` fields are all vLLM {f.vllm_version}'s", "ok",
                 (", ".join(sorted(f.speculative_config)),))


# ---- the pair ----------------------------------------------------------------------------------------------------

def _cfg(cfg: Mapping[str, Any] | None, key: str) -> Any:
    """A config value, at the top or in `text_config` (a multimodal model keeps its language model's there)."""
    if cfg is None:
        return None
    if key in cfg:
        return cfg[key]
    text = cfg.get("text_config")
    return text.get(key) if isinstance(text, Mapping) else None


def _unread(f: PairFacts, what: str, title: str, cid: str) -> Check | None:
    cfg = f.target_config if what == "target" else f.drafter_config
    if cfg is None:
        return Check(cid, title, "unknown", (f"the {what}'s config.json: {f.unread.get(what, 'not read')}",))
    return None


def _vocabulary(f: PairFacts) -> Check:
    title = "the drafter's vocabulary is the target's"
    missing = _unread(f, "target", title, "vocabulary") or _unread(f, "drafter", title, "vocabulary")
    if missing is not None:
        return missing
    tv, dv = _cfg(f.target_config, "vocab_size"), _cfg(f.drafter_config, "vocab_size")
    if tv is None or dv is None:
        return Check("vocabulary", title, "ok", ("a config states no vocab_size: the drafter uses the target's",))
    if tv != dv:
        return Check("vocabulary", f"the drafter's vocabulary ({dv}) is not the target's ({tv})", "refuse",
                     (f"target vocab_size {tv}", f"drafter vocab_size {dv}"),
                     "Use the drafter made for this target (its model card names the target).")
    special = [f"{k}: target {_cfg(f.target_config, k)}, drafter {_cfg(f.drafter_config, k)}"
               for k in ("bos_token_id", "eos_token_id", "pad_token_id")
               if _cfg(f.target_config, k) is not None and _cfg(f.drafter_config, k) is not None
               and _cfg(f.target_config, k) != _cfg(f.drafter_config, k)]
    if special:  # the same size, other special tokens: a drafter trained with another tokenizer
        return Check("vocabulary", "the drafter's special tokens are not the target's", "warn",
                     (f"vocab_size {tv}", *special),
                     "Check the drafter was trained with the target's tokenizer (its model card names the target).")
    return Check("vocabulary", title, "ok", (f"vocab_size {tv}",))


def _hidden_size(f: PairFacts, method: str | None) -> Check | None:
    if method not in _HIDDEN_FED or f.target_config is None or f.drafter_config is None:
        return None
    th, dh = _cfg(f.target_config, "hidden_size"), _cfg(f.drafter_config, "hidden_size")
    if th is None or dh is None or th == dh:
        return Check("hidden-size", "the drafter reads hidden states of the target's size", "ok",
                     (f"hidden_size {th}",) if th else ("not stated",))
    # some drafters project the target's states down: a guess, so a warning
    return Check("hidden-size", f"the drafter's hidden size ({dh}) differs from the target's ({th})", "warn",
                 (f"target hidden_size {th}", f"drafter hidden_size {dh}"),
                 f"{method} feeds the drafter the target's hidden states: check the drafter was made for this target.")


def _layer_ids(f: PairFacts, kb: KnowledgeBase) -> Check | None:
    dcfg = f.drafter_config.get("dflash_config") if f.drafter_config is not None else None
    ids = dcfg.get("target_layer_ids") if isinstance(dcfg, Mapping) else None
    if ids is None and f.drafter_config is not None:
        ids = f.drafter_config.get("eagle_aux_hidden_state_layer_ids")
    if not isinstance(ids, list) or not ids:
        return None
    layers = _cfg(f.target_config, "num_hidden_layers")
    if isinstance(layers, int) and any(not isinstance(i, int) or not 0 <= i < layers for i in ids):
        return Check("layer-ids", f"target_layer_ids {ids} reach past the target's {layers} layers", "refuse",
                     (f"target num_hidden_layers {layers}",), "Use the drafter's published ids for this target.")
    published = kb.drafter(f.drafter)
    if published is not None and published.target_layer_ids and ids != published.target_layer_ids:
        shifted = [i + 1 for i in published.target_layer_ids]
        why = (" (the published ids + 1: the layer-offset workaround of vllm#40727 — right only before 0.22.0)"
               if ids == shifted else "")
        return Check("layer-ids", f"target_layer_ids {ids} are not the drafter's published {published.target_layer_ids}"
                     + why, "warn", (f"{published.name}: {published.target_layer_ids}",),
                     "A hand-edited list reads other target layers than the drafter was trained on.")
    return Check("layer-ids", f"target_layer_ids {ids} within the target's {layers or '?'} layers", "ok")


def _rope(f: PairFacts) -> Check | None:
    if f.target_config is None or f.drafter_config is None:
        return None
    diffs = [f"{k}: target {_cfg(f.target_config, k)}, drafter {_cfg(f.drafter_config, k)}"
             for k in ("rope_theta", "partial_rotary_factor", "rope_scaling")
             if _cfg(f.target_config, k) is not None and _cfg(f.drafter_config, k) is not None
             and _cfg(f.target_config, k) != _cfg(f.drafter_config, k)]
    if diffs:
        return Check("rope", "the drafter's rotary settings differ from the target's", "warn", tuple(diffs),
                     "A drafter that reuses the target's positions needs the same rotary settings.")
    return Check("rope", "rotary settings agree (where both state them)", "ok")


def _context(f: PairFacts) -> Check | None:
    dmax = _cfg(f.drafter_config, "max_position_embeddings")
    if not isinstance(dmax, int) or f.max_model_len is None:
        return None
    if dmax < f.max_model_len:
        return Check("context", f"the drafter's context ({dmax}) is shorter than max_model_len ({f.max_model_len})",
                     "warn", (f"drafter max_position_embeddings {dmax}",),
                     f"Lower `--max-model-len` to {dmax}, or expect acceptance to fall past it.")
    return Check("context", f"the drafter covers max_model_len {f.max_model_len}", "ok")


def _architectures(f: PairFacts, atlas: Atlas) -> list[Check]:
    """Each model's `architectures` in this release's model registry (the atlas's). One not there is a warning:
    vLLM may map a drafter's architecture to its own (EAGLE's) or fall back to its Transformers backend."""
    known = atlas.architectures(f.vllm_version) if f.vllm_version else {}
    if not known:
        return []
    out = []
    for what, cfg in (("target", f.target_config), ("drafter", f.drafter_config)):
        names = _cfg(cfg, "architectures") if cfg is not None else None
        if not isinstance(names, list) or not names:
            continue
        missing = [n for n in names if isinstance(n, str) and n not in known]
        if not missing:
            out.append(Check(f"architecture-{what}", f"the {what}'s architecture is in vLLM {f.vllm_version}'s "
                             "model registry", "ok", (", ".join(f"{n} ({known[n]})" for n in names),)))
            continue
        spans = [(n, atlas.architecture_span(n)) for n in missing]
        said = tuple(f"{n}: " + (f"in vLLM {sp[0]}–{sp[1]}" if sp else "in no release the atlas read")
                     for n, sp in spans)
        later = [sp[0] for _n, sp in spans if sp is not None]
        out.append(Check(f"architecture-{what}", f"the {what}'s architecture {', '.join(missing)} is not in vLLM "
                         f"{f.vllm_version}'s model registry", "warn", said,
                         (f"Run a release that registers it ({later[0]} or later)" if later else
                          "Check the model card for the vLLM release it needs") + "; vLLM may still map it or fall "
                         "back to its Transformers backend.", (_ATLAS_SOURCE,)))
    return out


# ---- known failures ----------------------------------------------------------------------------------------------

def _known_failures(f: PairFacts, method: str | None, kb: KnowledgeBase) -> list[Check]:
    """Every knowledge-base issue whose method and release range this deploy meets, and whose drafter facts (the
    inputs it names: `target_layer_ids`, `layer_types`) hold — read from the drafter's config, or only guessed
    from its name (then a warning)."""
    v = parse_version(f.vllm_version)
    if method is None or v is None:
        return []
    out: list[Check] = []
    for iid, issue in kb.issues.items():
        a = issue.affected
        if a.get("method") != method or "from" not in a:
            continue
        end = a.get("fixed_in") or a.get("silent_before")
        if v < parse_version(a["from"]) or (end is not None and v >= parse_version(end)):  # type: ignore[operator]
            continue
        unless = a.get("unless_env", "").partition("=")
        if unless[0] and f.env.get(unless[0]) == unless[2]:
            continue  # the environment the issue's fix asks for is set
        premise = _premise(issue, f, kb)
        if premise is False:
            continue
        out.append(_known(iid, issue, f, guessed=premise is None))
    return out


def _premise(issue: IssueFacts, f: PairFacts, kb: KnowledgeBase) -> bool | None:
    """Do the drafter facts the issue rests on hold? True (read), False (read: they do not), None (guessed)."""
    cfg = f.drafter_config
    published = kb.drafter(f.drafter)
    for name in issue.inputs:
        if name == "layer_types":
            types = cfg.get("layer_types") if cfg is not None else None
            if isinstance(types, list):
                if "sliding_attention" not in types or len(set(types)) < 2:
                    return False
            elif published is None or published.has_sliding() is not True:
                return False
            else:
                return None
        elif name == "target_layer_ids":
            dcfg = cfg.get("dflash_config") if cfg is not None else None
            ids = dcfg.get("target_layer_ids") if isinstance(dcfg, Mapping) else None
            if ids is None and cfg is not None:
                return False
            if published is not None and published.target_layer_ids and ids is not None \
                    and ids == [i + 1 for i in published.target_layer_ids]:
                return False  # already shifted by hand: the offset is compensated
            if cfg is None:
                return None
    return True


def _known(iid: str, issue: IssueFacts, f: PairFacts, guessed: bool) -> Check:
    prs = [f"{u.repo.split('/')[-1]}#{u.number} ({u.state})" for u in issue.upstream if u.number]
    a = issue.affected
    fixed = a.get("fixed_in") or a.get("v2_from") or a.get("refuses")
    evidence = [f"vLLM {f.vllm_version} + {issue.affected.get('method')}: " + ", ".join(prs)]
    if issue.effect:
        evidence.append(f"expect: {issue.effect}")
    if fixed:
        evidence.append(f"fixed in / handled from vLLM {fixed}")
    if guessed:
        evidence.append("the drafter's config was not read: its facts are the knowledge base's for this drafter name")
    return Check(f"known:{iid}", issue.title, "warn" if guessed else "refuse", tuple(evidence),
                 issue.remediation[0].split(": `specops")[0] if issue.remediation else "", tuple(issue.sources))


# ---- the environment ---------------------------------------------------------------------------------------------

def _environment(f: PairFacts, atlas: Atlas) -> Check | None:
    own = [k for k in f.env if k.startswith("VLLM_")]
    if not own or f.vllm_version is None:
        return None
    known = atlas.env_vars(f.vllm_version)
    unknown = [k for k in own if k not in known]
    if not unknown:
        return Check("environment", "every VLLM_ variable the profile sets is read by this release", "ok",
                     tuple(own))
    said = []
    for k in unknown:
        close = difflib.get_close_matches(k, sorted(known), n=1, cutoff=0.8)
        said.append(f"`{k}` is not read by vLLM {f.vllm_version}" + (f" (did you mean `{close[0]}`?)" if close else ""))
    return Check("environment", "the profile sets VLLM_ variables this release does not read", "warn", tuple(said),
                 "A misspelled variable is silently ignored: fix its name, or drop it.", (_ATLAS_SOURCE,))


# ---- the GPUs ----------------------------------------------------------------------------------------------------

_BF16 = "Bfloat16 is only supported on GPUs with compute capability of at least 8.0."


def _gpus(f: PairFacts, atlas: Atlas) -> list[Check]:
    """Enough GPUs for the tensor-parallel size, and the dtype the model runs in against their compute capability
    (vLLM's own check: bf16 needs 8.0). The dtype is the profile's `--dtype`, else the checkpoint's; not stated:
    not checked."""
    if f.gpus is None:
        return [Check("gpus", "the host's GPUs", "unknown", (f"could not read them: {f.unread.get('gpus', '')}",))]
    names = ", ".join(f"{n} ({c[0]}.{c[1]})" if c else n for n, c in f.gpus) or "none"
    if len(f.gpus) < f.tensor_parallel_size:
        return [Check("gpus", f"{len(f.gpus)} GPU(s) for a tensor-parallel size of {f.tensor_parallel_size}",
                      "refuse", (names,), "Lower the tensor-parallel size, or run where the GPUs are.")]
    out = [Check("gpus", f"{len(f.gpus)} GPU(s) for a tensor-parallel size of {f.tensor_parallel_size}", "ok",
                 (names,))]
    dtype = (f.dtype if f.dtype and f.dtype != "auto" else
             _cfg(f.target_config, "torch_dtype") or _cfg(f.target_config, "dtype"))
    used = [c for _n, c in f.gpus[:f.tensor_parallel_size]]
    if any(c is None for c in used):
        return out
    out += _capability_gates(f, dtype if isinstance(dtype, str) else None, used, atlas)
    quant = _quantization(f, used, atlas)
    if quant is not None:
        out.append(quant)
    if not isinstance(dtype, str) or dtype not in ("bfloat16", "bf16"):
        return out
    low = min(c for c in used if c is not None)
    name = next(n for n, c in f.gpus if c == low)
    # the sentence vLLM's platform check would print on this GPU: the atlas gives its place in this release
    said = (f"{_BF16} Your {name} GPU has compute capability {low[0]}.{low[1]}. You can use float16 instead by "
            "explicitly setting the `dtype` flag in CLI, for example: --dtype=half.")
    m = atlas.match(said, version=f.vllm_version, exc="ValueError", source_file="cuda.py")
    sources = (m.url,) if m is not None else ()
    if low < (8, 0):
        out.append(Check("dtype-on-gpu", f"bfloat16 on a GPU of compute capability {low[0]}.{low[1]}", "refuse",
                         (f"the model runs in {dtype}", f"vLLM: {_BF16}"),
                         "`--dtype half` (float16) on this GPU, or a GPU of compute capability 8.0 or more.",
                         sources))
    else:
        out.append(Check("dtype-on-gpu", f"{dtype} on compute capability {low[0]}.{low[1]}", "ok"))
    return out


_QUANT_REFUSED = ("The quantization method {q} is not supported for the current GPU. Minimum capability: {m}. "
                  "Current capability: {c}.")


def _quantization(f: PairFacts, used: list[tuple[int, int] | None], atlas: Atlas) -> Check | None:
    """The quantization method (the profile's `--quantization`, else the checkpoint's `quantization_config`)
    against its least compute capability in this release (vLLM's `get_min_capability()`, from the atlas)."""
    qcfg = _cfg(f.target_config, "quantization_config")
    method = f.quantization or (qcfg.get("quant_method") if isinstance(qcfg, Mapping) else None)
    if not isinstance(method, str) or f.vllm_version is None:
        return None
    least = atlas.quant_min_capability(method, f.vllm_version)
    if least is None:
        return Check("quantization-on-gpu", f"`{method}` quantization on these GPUs", "unknown",
                     (f"the atlas holds no least compute capability for `{method}` in vLLM {f.vllm_version}",))
    low = min(c for c in used if c is not None)
    have = low[0] * 10 + low[1]
    if have < least:
        said = _QUANT_REFUSED.format(q=method, m=least, c=have)
        m = atlas.match(said, version=f.vllm_version, exc="ValueError")
        return Check("quantization-on-gpu", f"`{method}` needs compute capability {least // 10}.{least % 10}; the GPU "
                     f"has {low[0]}.{low[1]}", "refuse", (f"vLLM {f.vllm_version}: {said}",),
                     "A checkpoint in another quantization (or none), or a newer GPU.", (m.url,) if m else ())
    return Check("quantization-on-gpu", f"`{method}` runs from compute capability {least // 10}.{least % 10}", "ok")


def _capability_gates(f: PairFacts, dtype: str | None, used: list[tuple[int, int] | None],
                      atlas: Atlas) -> list[Check]:
    """vLLM's own capability checks in this release (the CUDA platform's, the selected attention backend's) whose
    conditions hold on the weakest GPU used, with this dtype and KV cache dtype: what it would raise at start."""
    if f.vllm_version is None:
        return []
    low = min(c for c in used if c is not None)
    name = next(n for n, c in (f.gpus or ()) if c == low)
    facts = GateFacts(low, dtype, f.kv_cache_dtype or "auto", f.attention_backend, name)
    out = []
    for gate in gates(atlas, f.vllm_version, facts):
        m = atlas.match(gate.said, version=f.vllm_version, exc=gate.site.exc)
        out.append(Check(f"gpu-gate:{gate.site.function}", f"vLLM {f.vllm_version} would refuse this at start on "
                         f"compute capability {low[0]}.{low[1]}: {gate.said.split(';')[0].split('. ')[0]}", "refuse",
                         (f"vLLM ({gate.site.file}, {gate.site.function}): {gate.said}",
                          f"its condition: {gate.site.condition}"),
                         "Change what its condition names (`--kv-cache-dtype`, `--attention-backend`, `--dtype`), as "
                         "its message says, or run on a GPU it allows.", (m.url,) if m is not None else ()))
    return out


# ---- memory ------------------------------------------------------------------------------------------------------

_FREE_AT_START = ("Free memory on device ({free}/{total} GiB) on startup is less than desired GPU memory utilization "
                  "({util}, {want} GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
_ONE_REQUEST = ("To serve at least one request with the models's max seq len ({n}), ({kv} GiB KV cache is needed, "
                "which is larger than the available KV cache memory ({room} GiB). Based on the available memory, the "
                "estimated maximum model length is {largest}. Try increasing `gpu_memory_utilization` or decreasing "
                "`max_model_len` when initializing the engine.")


def _site(atlas: Atlas, said: str, version: str | None) -> tuple[str, ...]:
    """Where this release raises the sentence (the atlas's site), as the check's source."""
    m = atlas.match(said, version=version, exc="ValueError")
    return (m.url,) if m is not None and m.url else ()


def _memory(f: PairFacts, method: str | None, atlas: Atlas) -> list[Check]:
    """The GPUs' free memory at start, and the weights + one `max_model_len` request's KV cache against
    `gpu_memory_utilization` of the tensor-parallel GPUs (vLLM's two start-up checks, done before loading)."""
    if f.gpu_memory is None or f.gpus is None or len(f.gpu_memory) < f.tensor_parallel_size:
        return []
    used = f.gpu_memory[:f.tensor_parallel_size]
    util = f.gpu_memory_utilization or mf.DEFAULT_UTILIZATION
    free = _free_at_start(f, used, util, atlas)
    return [c for c in (free, _fits(f, method, used, util, atlas)) if c is not None]


def _free_at_start(f: PairFacts, used: tuple[tuple[int, int], ...], util: float, atlas: Atlas) -> Check | None:
    busy = [(i, total, taken) for i, (total, taken) in enumerate(used) if total - taken < total * util]
    if not busy:
        return None
    i, total, taken = busy[0]
    said = _FREE_AT_START.format(free=f"{(total - taken) / 1024:.2f}", total=f"{total / 1024:.2f}", util=util,
                                 want=f"{total * util / 1024:.2f}")
    # the server this deploy replaces holds memory too, and is stopped first: a warning, never a refusal
    return Check("gpu-free-memory", f"GPU {i} has {taken} MiB of {total} MiB in use: less free than "
                 f"gpu_memory_utilization {util} asks", "warn",
                 tuple(f"GPU {j}: {t} MiB used of {tot} MiB" for j, tot, t in busy),
                 "If it is not the server this deploy replaces: stop what holds it, or lower "
                 "`--gpu-memory-utilization`.", _site(atlas, said, f.vllm_version))


def _kv_shapes(f: PairFacts, method: str | None) -> list[mf.KvShape | None]:
    assert f.target_config is not None
    eb = mf.element_bytes(f.kv_cache_dtype, f.dtype if f.dtype not in (None, "auto") else
                          _cfg(f.target_config, "torch_dtype") or _cfg(f.target_config, "dtype"))
    shapes = [mf.kv_shape(f.target_config, eb)]
    if method in _DRAFTER_METHODS and f.drafter_config is not None:
        shapes.append(mf.kv_shape(f.drafter_config, eb, fallback=f.target_config))
    return shapes


def _fits(f: PairFacts, method: str | None, used: tuple[tuple[int, int], ...], util: float,
          atlas: Atlas) -> Check:
    title = "the weights and one max_model_len request's KV cache fit the GPUs"
    if f.target_config is None or f.target_weights is None:
        why = f.unread.get("weights") or f.unread.get("target") or "not read"
        return Check("memory-fit", title, "unknown", (f"the target's weights were not weighed: {why}",))
    shapes = _kv_shapes(f, method)
    max_len = f.max_model_len or _cfg(f.target_config, "max_position_embeddings")
    kv = [s for s in shapes if s is not None]
    if len(kv) < len(shapes) or not isinstance(max_len, int):
        return Check("memory-fit", title, "unknown",
                     ("a config states no layer count, heads or head size, or no max_position_embeddings",))
    weights = f.target_weights + (f.drafter_weights or 0)
    got = mf.fit([total * 1024 * 1024 for total, _ in used], util, weights, kv, max_len)
    drafter = (f", drafter {mf.gib(f.drafter_weights)}" if f.drafter_weights else
               ", drafter not weighed" if len(kv) > 1 else "")
    evidence = (f"weights {mf.gib(weights)} (target {mf.gib(f.target_weights)}{drafter})",
                f"KV cache for one request of {max_len} tokens: {mf.gib(got.kv)} (target: {kv[0].said})",
                f"budget: {len(used)} GPU(s) × {used[0][0]} MiB × gpu_memory_utilization {util} = "
                f"{mf.gib(got.budget)}",
                f"the largest max_model_len that fits: {got.largest_len}")
    if not got.fits:
        said = _ONE_REQUEST.format(n=max_len, kv=f"{got.kv / mf.GIB:.2f}",
                                   room=f"{max(got.budget - weights, 0) / mf.GIB:.2f}", largest=got.largest_len)
        fix = (f"`--max-model-len {got.largest_len}` or less, or more GPUs (tensor parallel), a higher "
               "`--gpu-memory-utilization`, or `--kv-cache-dtype fp8`" if got.largest_len else
               "The weights alone exceed the budget: more GPUs (tensor parallel), or a quantized checkpoint.")
        return Check("memory-fit", f"weights + KV for max_model_len {max_len} need {mf.gib(weights + got.kv)}, "
                     f"more than the {mf.gib(got.budget)} the GPUs give", "refuse", evidence, fix,
                     _site(atlas, said, f.vllm_version))
    if got.left < got.budget // 10:  # activations and CUDA graphs come out of what is left
        return Check("memory-fit", f"weights + KV fit with {mf.gib(got.left)} left for activations and CUDA "
                     "graphs: tight", "warn", evidence,
                     f"Consider `--max-model-len {got.largest_len * 3 // 4}`; vLLM measures activations at start and "
                     "fails there if they do not fit.")
    return Check("memory-fit", f"weights + KV for max_model_len {max_len} fit, {mf.gib(got.left)} left before "
                 "activations", "ok", evidence)


# ---- a check as a report's finding (deploy's gate) ---------------------------------------------------------------

def finding_of(c: Check) -> Finding:
    """A check that did not pass, as a finding of the deploy's report: a refusal is critical (its facts were read
    from the host), a warning a warning, a check that could not read its inputs an info."""
    severity: Severity = {"refuse": "critical", "warn": "warning"}.get(c.verdict, "info")  # type: ignore[assignment]
    return Finding(id=f"prelaunch:{c.id}", title=c.title, severity=severity,
                   confidence="high" if c.verdict == "refuse" else "medium",
                   summary=c.evidence[0] if c.evidence else "", evidence=list(c.evidence[1:]),
                   remediation=[c.fix] if c.fix else [], sources=[s for s in c.sources if s.startswith("https://")],
                   is_bug=c.id.startswith("known:"), priority=5)
