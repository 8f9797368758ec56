"""`'XForCausalLM' object has no attribute 'y'`: vLLM's own code reading an attribute its own model (or drafter)
class — or one of its layers (`QKVParallelLinear`, set up by a quantization scheme or a loader) — does not have."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.host import has_spec
from bot.core.triage.atlas_readers.location import innermost
from bot.core.triage.atlas_readers.quoting import frame_line, quoted
from bot.core.triage.atlas_readers.releases import upgrade_steps
from bot.core.triage.findings import Advice, Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas
    from bot.core.triage.detectors.state import State

_NO_ATTR_RE = re.compile(r"^'(?P<cls>[A-Z]\w+)' object has no attribute '(?P<attr>\w+)'")
# Hugging Face's naming, which vLLM's model classes keep: <Arch>For<Task>, <Arch>Model
_MODEL_CLASS_RE = re.compile(r"For(?:CausalLM|ConditionalGeneration|SequenceClassification|MaskedLM)$|Model$")
_SPEC_CLASS_RE = re.compile(r"eagle|medusa|mtp|dflash|dspark|draft|speculat|proposer|mlpspec", re.IGNORECASE)


def missing_attribute(st: State, atlas: Atlas, cand: Candidate, version: str | None,
                      layers: bool = False, bare_ok: bool = False) -> Finding | None:
    """A defect of that release (or of the class a checkpoint's architecture maps to), not of the input. Python's
    words, so the atlas does not hold it; the class name says which part. With `layers` (no frame but torch's
    `Module.__getattr__` says whose code read it), any class of vLLM's the atlas knows, in its file's part; with
    `bare_ok` (no other reading of the line), the same for a line with no frames at all, at low confidence."""
    p = cand.line
    hit = _NO_ATTR_RE.match(p.message.strip())
    if hit is None or (p.exception or "").rsplit(".", 1)[-1] != "AttributeError":
        return None
    cls, attr = hit["cls"], hit["attr"]
    spec = _SPEC_CLASS_RE.search(cls) is not None
    model = spec or _MODEL_CLASS_RE.search(cls) is not None
    # a line with no frames at all naming one of vLLM's classes: vLLM's code read it, most likely (a program on top
    # of vLLM reading an attribute a release dropped shows its own frames) — said at low confidence
    bare = bare_ok and not layers and not cand.frames and not model
    path = atlas.class_file(cls) if (layers or bare) and not model else None
    if bare and path is not None and not _vllms_own(cls, path):
        return None
    if not model and path is None:
        return None
    remediation, advice = _remedies(st, atlas, (cls, attr, path), bare, spec, model, version)
    inner = innermost(atlas, cand.frames, version) if cand.frames else None
    evidence = [quoted(p)] + ([frame_line(inner[0])] if inner is not None else [])
    what = "drafter" if spec else "model" if model else "layer" if layers else "own"
    return Finding(
        id=f"missing-attribute:{cls}.{attr}", title=f"vLLM's {what} class `{cls}` has no attribute `{attr}`",
        severity="critical", confidence="low" if bare else "medium",
        summary=(f"AttributeError {'with no frames' if bare else 'inside vLLM'}: `{cls}` is one of vLLM's {what} "
                 "classes"
                 + (" (Hugging Face naming)" if model else f" ({path})")
                 + f", and the code that runs it expects `{attr}` on it."),
        evidence=evidence, remediation=remediation, priority=40,
        part="drafter" if spec else "models" if model else atlas.part_of(path or ""),
        owner="vllm" if path is not None else None, advice=advice, is_bug=True)


# the classes of vLLM's public API (the offline LLM, its parameters and outputs, the engines and their arguments):
# programs on top of vLLM hold these, so an attribute missing on one is as likely theirs as vLLM's
_PUBLIC_API = re.compile(r"^vllm/(?:entrypoints/llm|sampling_params|pooling_params|outputs|engine/arg_utils|"
                         r"engine/(?:async_)?llm_engine|v1/engine/(?:llm_engine|async_llm))\.py$")
# two or more capitalised words: a one-word name (`Tensor`, `Request`, `Sampler`) is as likely another library's
_COMPOUND = re.compile(r"^(?=[A-Z0-9]{0,60}[a-z])[A-Z]{1,12}[a-z0-9]{0,40}(?:[A-Z][a-z0-9]{0,40}){1,20}$")
# a model's own layer classes keep Hugging Face's names (`LlamaAttention`, `Qwen2MLP`): transformers' as much as vLLM's
_MODEL_CODE = "vllm/model_executor/models/"


def _vllms_own(cls: str, path: str) -> bool:
    """A class named with no frame is vLLM's own when only vLLM would name it so: a compound name, in vLLM's own
    code (not a vendored copy of another project's), outside the public API that programs hold."""
    return bool(_COMPOUND.match(cls)) and not path.startswith(("vllm/third_party/", _MODEL_CODE)) \
        and not _PUBLIC_API.match(path)


def _remedies(st: State, atlas: Atlas, named: tuple[str, str, str | None], bare: bool, spec: bool, model: bool,
              version: str | None) -> tuple[list[str], list[Advice]]:
    cls, attr, path = named
    steps, advice = upgrade_steps(version, "model and drafter classes" if model else "classes" if bare else "layers",
                                  atlas.releases, pin_previous=True)
    if bare:  # no frame says who read it
        first = [f"`{cls}` is vLLM's ({path}) and this release does not set `{attr}` on it: most likely vLLM's own "
                 "code reads it (a bug of the release); if a program on top of vLLM reads it, that program was "
                 "written for another vLLM release — pin the one it names."]
    else:
        first = [f"vLLM's code reads `{attr}` from its own class `{cls}`, which does not set it in this release: a "
                 "bug of the release, not of your command."]
        if path is not None:
            first.append(f"`{cls}` is a layer of vLLM's ({path}); most often what sets `{attr}` on it — a "
                         "quantization scheme, a loader — did not run for this model or checkpoint format.")
    tail = [f"Meanwhile, serve without `--speculative-config` (or with another method): `{cls}` is the drafter's "
            "class."] if spec and has_spec(st) else []
    return [*first, *steps, *tail], advice


# owners whose code takes objects vLLM hands it (a tokenizer, a processor's parts): a library, not vLLM, Python or the
# user's program
_NOT_A_LIBRARY = frozenset({"vllm", "python", "user-script", "remote-code", "plugin", "debugger", "other"})


def vllms_object_in_library(f: Finding, atlas: Atlas, message: str, owner: str, code: str | None,
                            version: str | None) -> None:
    """In place: `'MistralTokenizer' object has no attribute 'convert_tokens_to_ids'` raised inside a library's code
    (transformers' processor) on an object it was given (`tokenizer.convert_tokens_to_ids(…)`, not `self.…`), the
    object's class one of vLLM's own — vLLM handed it over, and this vLLM and the installed library disagree on what
    it must have: vLLM's side, in its class's part."""
    hit = _NO_ATTR_RE.match(message.strip())
    if hit is None or owner in _NOT_A_LIBRARY:
        return
    cls, attr = hit["cls"], hit["attr"]
    # the code line reads the attribute on a name of its own that is not `self`: an object handed to it
    given = re.search(rf"\b(?!self\b)[a-z_]\w{{0,40}}\.{re.escape(attr)}\b", code or "")
    path = atlas.class_file(cls)
    if given is None or path is None or not _vllms_own(cls, path):
        return
    steps, advice = upgrade_steps(version, "the objects vLLM hands to other libraries", atlas.releases)
    f.owner, f.part = "vllm", f.part or atlas.part_of(path)
    whose = f"{owner}'" if owner.endswith("s") else f"{owner}'s"
    f.title = f"AttributeError in {whose} code: vLLM's `{cls}`, handed to it, has no `{attr}`"
    f.summary += (f" `{cls}` is one of vLLM's own classes ({path}): vLLM handed it to {whose} code, which expects "
                  f"`{attr}` on it — this vLLM and the installed {owner} disagree.")
    f.remediation = [*steps, f"Or install a {owner} within the range this vLLM requires (`python -c \"import "
                             "importlib.metadata as m; print(m.requires('vllm'))\"` lists them), which the class was "
                             "written against.", *f.remediation]
    f.advice = list(dict.fromkeys([*f.advice, *advice]))
    f.deps = list(dict.fromkeys([*f.deps, owner]))
