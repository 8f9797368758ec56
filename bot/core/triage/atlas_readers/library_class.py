"""`Qwen2Tokenizer has no attribute all_special_tokens_extended`: an AttributeError on a Hugging Face tokenizer —
a class named `<Model>Tokenizer` or `<Model>TokenizerFast` that no vLLM release read defines (vLLM's cached copy of
one is `Cached<Name>`), or a processor (`Qwen2VLProcessor` without `image_token`) — is the installed transformers'
interface against the one this vLLM calls: the transformers version vLLM's requirements name for the release, or a
vLLM release made for the installed one.

Transformers' tokenizers answer a missing attribute in their own words (`X has no attribute y`, no quotes, from
`PreTrainedTokenizerBase.__getattr__`), Python in its own (`'X' object has no attribute 'y'`): both are read."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.history import load_history
from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.foreign_class import no_attribute
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.findings import Confidence, Finding

if TYPE_CHECKING:
    from bot.core.atlas import Atlas

# transformers' tokenizer classes: a model's (`LlamaTokenizerFast`), the base ones, and transformers 5's backends
# (`TokenizersBackend`)
_TOKENIZER = re.compile(r"^(?:Cached)?(?P<name>(?:[A-Z]\w{0,60}?)?Tokenizers?(?:Fast|Backend)?)$")
# whose frame may have called the tokenizer for vLLM: vLLM itself or transformers' own code under it
_CALLERS = ("vllm", "transformers")
TRANSFORMERS_PINS = "https://github.com/vllm-project/vllm/blob/main/requirements/common.txt"


def tokenizer_class(atlas: Atlas, cand: Candidate, version: str | None) -> Finding | None:
    named = no_attribute(cand, bare=True)
    if named is None:
        return None
    cls, attr = named
    # a processor class of transformers' (`Qwen2VLProcessor` without `image_token`) is read the same way — not a
    # logits processor (a program's own, handed to vLLM)
    name = _TOKENIZER.match(cls) or (_PROCESSOR.match(cls) if not _LOGITS.search(cls) else None)
    kind = "tokenizer" if _TOKENIZER.match(cls) else "processor"
    hist = load_history()
    if name is None or hist is None or hist.has_class(name["name"]) or hist.has_class(cls):
        return None  # vLLM's own tokenizer and processor classes (`MistralTokenizer`) are vLLM's to answer for
    inner = owners.of_path(cand.frames[-1].frame_file or "") if cand.frames else None
    if inner is not None and inner.name not in _CALLERS:
        return None  # another's code (the user's, a framework's) called it: frame_first names that caller
    if kind == "processor" and cand.frames and not _MEDIA_CODE.search(cand.frames[-1].frame_file or ""):
        return None  # vLLM's code outside its media processing read it: not a Hugging Face processor's
    target = f"vLLM {version}" if version else "your vLLM release"
    reader = _reader(inner)
    origin = "transformers', defined" if kind == "tokenizer" else "transformers' or the model's own code; defined"
    why = (f"AttributeError on `{cls}`, a Hugging Face {kind} class ({origin} by no vLLM release "
           f"read): {reader} reads `{attr}` from it, and the installed transformers' {kind}s do not have it — a "
           "transformers release other than the ones this vLLM was made for (an attribute removed in a newer "
           "transformers, or not yet added in an older one).")
    fix = (f"Install the transformers version {target} requires (`pip show transformers vllm`; vLLM's requirements "
           "name the range for each release), or upgrade vLLM to a release made for the installed transformers.")
    return Finding(id=f"library-class:transformers:{name['name']}.{attr}",
                   title=(f"The installed transformers' `{name['name']}` has no `{attr}`, which {target} calls"
                          if kind == "tokenizer" else
                          f"The Hugging Face processor `{name['name']}` has no `{attr}`, which {target} calls"),
                   severity="critical", confidence=_sureness(inner), summary=why, evidence=[quoted(cand.line)],
                   remediation=[fix], sources=[TRANSFORMERS_PINS], priority=40,
                   part="tokenizer" if kind == "tokenizer" else "multimodal", owner="transformers", inputs=[cls],
                   deps=["transformers"], advice=["pin"])


def _reader(inner: owners.Owner | None) -> str:
    """Who read the attribute, as far as the frames show: without them the words alone do not say it was vLLM."""
    if inner is None:
        return "the code that ran"
    return "vLLM" if inner.name == "vllm" else "transformers' code under vLLM"


def _sureness(inner: owners.Owner | None) -> Confidence:
    """Medium when the traceback's innermost frame is vLLM's or transformers' own; words alone are a low claim."""
    return "low" if inner is None else "medium"


# a Hugging Face model config class (`Qwen2_5OmniConfig`): transformers' or a model's own remote code, never vLLM's
_MODEL_CONFIG = re.compile(r"^(?P<name>[A-Z]\w{0,60}?Config)$")
SUPPORTED_MODELS = "https://docs.vllm.ai/en/latest/models/supported_models.html"


def config_class(atlas: Atlas, cand: Candidate, version: str | None) -> Finding | None:
    """`'Qwen2_5OmniConfig' object has no attribute 'num_attention_heads'`: vLLM's code for an architecture reads a
    field the checkpoint's config class does not have — the release's support for the model and the checkpoint (or
    the transformers that defines its config) disagree: most often a model newer than the release."""
    named = no_attribute(cand)
    if named is None:
        return None
    cls, attr = named
    hist = load_history()
    if _MODEL_CONFIG.match(cls) is None or hist is None or hist.has_class(cls):
        return None  # vLLM's own config classes (`ModelConfig`, `EAGLEConfig`) are vLLM's to answer for
    inner = owners.of_path(cand.frames[-1].frame_file or "") if cand.frames else None
    if inner is not None and inner.name not in _CALLERS:
        return None
    target = f"vLLM {version}" if version else "this vLLM release"
    builder = "the code that builds the model" if inner else "the code that ran"
    why = (f"AttributeError on `{cls}`, the checkpoint's model config class (transformers', or the model's own code; "
           f"no vLLM release read defines it): {builder} reads `{attr}` from it, and this "
           f"config does not have it. {target[0].upper()}{target[1:]}'s support for the architecture and the "
           "checkpoint disagree — most often a model newer than the release, whose config moved that field "
           "(a multimodal model keeps it in a sub-config).")
    fix = (f"Serve it with a vLLM release that lists the architecture ({SUPPORTED_MODELS}; the model card names the "
           "release and the transformers it needs), upgrading transformers with it; or a checkpoint whose config "
           f"this release reads.")
    return Finding(id=f"library-class:config:{cls}.{attr}", title=f"The checkpoint's `{cls}` has no `{attr}`, which "
                                                                   f"{target} reads for the architecture",
                   severity="critical", confidence=_sureness(inner), summary=why, evidence=[quoted(cand.line)],
                   remediation=[fix], sources=[SUPPORTED_MODELS], priority=40, part="models", inputs=[cls],
                   deps=["transformers"], advice=["upgrade", "checkpoint"])


# a Hugging Face processor class (`Qwen2_5_VLProcessor`, `SiglipImageProcessorFast`, `WhisperFeatureExtractor`) whose
# constructor Python refused a call to: the call and the signature come from different transformers releases
_LOGITS = re.compile(r"Logits\w{0,40}Processor")
# where vLLM handles media with a Hugging Face processor: its multimodal code, the models, the inputs, transformers'
_MEDIA_CODE = re.compile(r"/vllm/(?:multimodal|model_executor/models|inputs|transformers_utils|v1/engine)/|"
                         r"/transformers/")
_PROCESSOR = re.compile(r"^(?P<name>[A-Z]\w{0,60}?(?:Processor|ImageProcessor|VideoProcessor|FeatureExtractor)"
                        r"(?:Fast)?)$")
_SIGNATURE = re.compile(r"^(?P<cls>[A-Z]\w{0,80})\.__init__\(\) (?P<what>got multiple values for argument|got an "
                        r"unexpected keyword argument|missing \d{1,2} required (?:positional|keyword-only) argument)")


def processor_class(atlas: Atlas, cand: Candidate, version: str | None) -> Finding | None:
    """`Qwen2_5_VLProcessor.__init__() got multiple values for argument 'image_processor'`: Python refused a call to a
    Hugging Face processor's constructor — the processor's signature (the installed transformers) and the call
    (vLLM's multimodal processing, or transformers' own `from_pretrained` of another release's layout) disagree."""
    p = cand.line
    hit = _SIGNATURE.match(p.message.strip()) if (p.exception or "").endswith("TypeError") else None
    hist = load_history()
    if hit is None or _PROCESSOR.match(hit["cls"]) is None or hist is None or hist.has_class(hit["cls"]):
        return None  # vLLM's own processor classes are vLLM's to answer for
    inner = owners.of_path(cand.frames[-1].frame_file or "") if cand.frames else None
    if inner is not None and inner.name not in _CALLERS:
        return None  # another's code built it: frame_first names that caller
    cls = hit["cls"]
    target = f"vLLM {version}" if version else "your vLLM release"
    why = (f"TypeError building `{cls}`, a Hugging Face processor class (transformers', defined by no vLLM release "
           f"read): Python refused the call ({hit['what']}) — the installed transformers' `{cls}` and the code that "
           "builds it were written for different transformers releases.")
    fix = (f"Install the transformers version {target} requires (`pip show transformers vllm`; vLLM's requirements "
           "name the range for each release, and a transformers release newer than the vLLM often changes a "
           "processor's signature), or upgrade vLLM to a release made for the installed transformers.")
    return Finding(id=f"library-class:processor:{cls}", title=f"The installed transformers' `{cls}` does not take the "
                                                             f"call {target} makes",
                   severity="critical", confidence=_sureness(inner), summary=why, evidence=[quoted(p)],
                   remediation=[fix], sources=[TRANSFORMERS_PINS], priority=40, part="multimodal",
                   owner="transformers", inputs=[cls], deps=["transformers"], advice=["pin"])
