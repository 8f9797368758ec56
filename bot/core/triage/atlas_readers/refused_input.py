"""What a refusal refuses: a request a client sent, a checkpoint (or adapter) on disk, or a setting the message
names in words — read off the site (its file, its function, its words) and the line.

A server that refuses one request keeps serving: the fix is in the request (or in the setting that allows it). A
loader that refuses a checkpoint's content is answered by another checkpoint. A message that names a setting in
words ("too large tensor parallel size", "`max_num_seqs`", "a chat template") names its flag.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.model_given import flag_for, model_remedy, refused_model
from bot.core.triage.atlas_readers.named_in_words import library_too_old
from bot.core.triage.atlas_readers.releases import newer as newer_release
from bot.core.triage.remedy import Remedy

if TYPE_CHECKING:
    from bot.core.atlas import Atlas, AtlasMatch, Site

# code that handles one request: the OpenAI server's handlers, the chat template and input rendering, structured
# output's validation of a request's schema, a prompt's multimodal placeholders, the scheduler's per-prompt checks
REQUEST_FILES = re.compile(r"^vllm/entrypoints/(?!cli/|api_server\.py)|^vllm/renderers/|"
                            r"^vllm/(?:v1/)?structured_output/|^vllm/model_executor/guided_decoding/|^vllm/inputs/|"
                            r"^vllm/v1/engine/(?:processor|input_processor)\.py$|"
                            # the media connector fetches what a request's image_url / video_url / audio_url names
                            r"^vllm/multimodal/(?:media/)?(?:connector|utils)\.py$")
# the multimodal checks of what one request sent: how many items, the embeddings it passed, the file it uploaded
_MM_REQUEST_FUNCS = re.compile(r"validate_num_items$|^EmbeddingItems\._validate|^validate_embedding_ndim$|"
                               r"_validate_encoded_size$|_validate_decoder_caps$")
# what checks a prompt's content wherever it lives (a model's multimodal merge counts the prompt's placeholders)
# (snake_case: a class such as `PlaceholderModule`, an optional import left unloaded, is no prompt's)
_PROMPT_FUNCS = re.compile(r"_merge_multimodal|placeholder")
# a check that counts the prompt's placeholders against the encoder's tokens (`Attempted to assign … multimodal tokens
# to {n} placeholders`)
_COUNT_MISMATCH = re.compile(r"multimodal tokens to \{[^{}]{1,40}\} placeholders")
_REQUEST_FUNCS = re.compile(r"validate|serving|create_(?:chat_)?completion|_preprocess|chat_template|render|"
                            r"_merge_multimodal|placeholder|_schedule_prefills|check_|add\b|_validate|"
                            r"(?:load|fetch)\w{0,30}_url\b|\bfetch_(?:image|video|audio)\b", re.IGNORECASE)
_REQUEST_WORDS = re.compile(r"\b(?:request|prompt|messages?|tool_choice|response_format|json[_ ]schema|schema|grammar|"
                            r"image\(s\)|images?|placeholders?|input tokens?|tokens? in the prompt|the model `)\b",
                            re.IGNORECASE)
# an OpenAI client's view of the server's answer (`openai.BadRequestError: Error code: 400 - {…'message': …}`): the
# server refused that one request with a 4xx status, whichever of its checks said why
_ANSWERED_4XX = re.compile(r"^Error code: 4\d\d\b")
# a check of a flag's own value (`Invalid '--allowed-local-media-path': …`): the server's setting, not a request
_FLAG_VALUE = re.compile(r"Invalid [`']--")
# the scheduler's own check of one prompt against the limits (V0's `_schedule_prefills`: "Input prompt (N tokens) is
# too long and exceeds limit of M"): the rest of the scheduler is no request's
_SCHEDULER_FILES = re.compile(r"^vllm/(?:v1/)?core/(?:sched/)?scheduler\.py$")
# the V0 engine's checks of one prompt (V1 has them in its input processor, a request file above)
_V0_ENGINE_FILES = re.compile(r"^vllm/engine/(?:async_)?llm_engine\.py$")
_V0_PROMPT_CHECKS = re.compile(r"\._validate_(?:model_inputs?|token_prompt)$")
_PROMPT_CHECKS = re.compile(r"_schedule_prefills")
_CHECKPOINT_WORDS = re.compile(r"\b(?:checkpoint|safetensors|adapter|modules_to_save|lora weights?|weights? (?:file|"
                               r"name)|(?:loaded|the) weights|(?:config|params)\.json|quantization config|"
                               r"tokenizer_config|"
                               r"model config doesn't|not in the model config)\b", re.IGNORECASE)
# a function that reads a checkpoint or adapter from disk: what it refuses is the files' content
_CHECKPOINT_FUNCS = re.compile(r"from_local_checkpoint|load_checkpoint|_load_adapter|load_lora|from_lora_tensors")
_DEST = re.compile(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`|\b([a-z][a-z0-9]*(?:_[a-z0-9]+){1,5})\b")
# a one-word setting called an argument or an option by name ("specified in the `quantization` argument")
_ARGUMENT = re.compile(r"`([a-z][a-z0-9_]*)` (?:argument|option|flag|parameter)\b|"
                       r"\b(?:argument|option|flag|parameter) `([a-z][a-z0-9_]*)`")
_GETTER = re.compile(r"\bget_([a-z][a-z0-9_]{5,})\(")
_ENV_READ = re.compile(r"\bos\.(?:environ\.get|getenv)\(\s*['\"]([A-Z][A-Z0-9_]{1,80})['\"]|"
                       r"\bos\.environ\[['\"]([A-Z][A-Z0-9_]{1,80})['\"]\]")
_LIB_ENV = re.compile(r"`?\b((?:HF|HUGGINGFACE|TRANSFORMERS|NCCL|CUDA|TORCH|PYTORCH|VLLM)_[A-Z0-9_]*[A-Z0-9])\b`?")


_HOLE = re.compile(r"\{[^{}]*\}")
# a refusal listing the versions it supports and the one it got (`only supports versions 2.0, 2.5, 4.0. Got version:
# (4, 5)`)
_VERSIONS_LISTED = re.compile(r"\bsupports? (?:only )?(?:the )?(?:versions?|v)\s{0,3}"
                              r"(?P<listed>v?\d{1,4}(?:\.\d{1,4}){0,2}"
                              r"(?:\s{0,3}(?:,\s{0,3}(?:and|or)|,|and|or)\s{0,3}v?\d{1,4}(?:\.\d{1,4}){0,2}){0,30})"
                              # (nothing listed may hide in the gap before `Got`: no digits there)
                              r"[^\n\d]{0,40}?\bGot\s{0,2}(?:version)?:?\s{0,3}"
                              r"(?:\((?P<tuple>\d{1,4}(?:\s{0,2},\s{0,2}\d{1,4}){0,2})\)|"
                              r"(?P<plain>\d{1,4}(?:\.\d{1,4}){0,2}))(?![\d.,]*\d)", re.IGNORECASE)


def _newer_than_listed(message: str) -> tuple[str, str] | None:
    """The version a refusal got and the newest it lists, when the one it got is newer than every one listed."""
    hit = _VERSIONS_LISTED.search(message[:2000])
    if hit is None:
        return None

    def key(text: str) -> tuple[int, ...]:
        parts = [int(n) for n in re.findall(r"\d+", text)]
        return tuple(parts + [0] * (3 - len(parts)))  # `4` and `4.0` are one version

    listed = re.findall(r"\d{1,4}(?:\.\d{1,4}){0,2}", hit["listed"])
    got = ".".join(re.findall(r"\d+", hit["tuple"] or hit["plain"]))
    newest = max(listed, key=key)
    return (got, newest) if listed and key(got) > key(newest) else None


# a refusal listing what it takes, and the list is empty (`use one of []`, `Supported backends: []`, `choose from {}`)
_NOTHING_ALLOWED = re.compile(r"\b(?:(?:use|be|is|must be) one of|choose from|(?:valid|supported|available|allowed) "
                              r"[a-z_]{1,30}(?: [a-z_]{1,30})?(?: are| is)?:?)\s{0,3}"
                              r"(?:\[\s{0,3}\]|\{\s{0,3}\}|\(\s{0,3}\)|set\(\))(?![\w\[{(])", re.IGNORECASE)
# a check of a request's id (`Request id {request_id} does not contain hostname and port`, `Request {request_id}
# already exists`, `request_id must be a string`): the id is what the caller sends — a client, a proxy in front, a
# script — whichever part of vLLM reads it
_REQUEST_ID = re.compile(r"^(?:Request id|request_id|Request) \{[^{}]*\}:? (?:does not (?:contain|embed)|already "
                         r"(?:exists|running)|must\b)|^request_id must be\b|^duplicate request.?id\b|"
                         r"\bfrom request_id\b", re.IGNORECASE)


def _about_a_request(site: Site, message: str, words: str) -> bool:
    """Does the check judge one request (its prompt, its parameters, its media), wherever it lives?"""
    return bool(REQUEST_FILES.search(site.file) and not _FLAG_VALUE.match(site.template)
                and (_REQUEST_FUNCS.search(site.function) or _REQUEST_WORDS.search(words))) \
        or bool(_PROMPT_FUNCS.search(site.function)) \
        or bool(site.file.startswith("vllm/multimodal/") and _MM_REQUEST_FUNCS.search(site.function)) \
        or bool(_SCHEDULER_FILES.search(site.file) and _PROMPT_CHECKS.search(site.function)) \
        or bool(_V0_ENGINE_FILES.search(site.file) and _V0_PROMPT_CHECKS.search(site.function)) \
        or _ANSWERED_4XX.match(message.strip()) is not None


# a check of nothing but the type of what the caller handed in (`not isinstance(params, PoolingParams)` after the
# SamplingParams branch): a request's parameters or the request object itself, of another class
_CALLER_TYPE = re.compile(r"^not \(isinstance\((?P<arg>[a-z_]\w*), "
                          r"(?P<cls>[A-Z]\w*(?:Params|Request|Prompt|Inputs?))\)\)(?: \(where [^()]*\))?$")


# vLLM's own plumbing hands these their objects (the server's handlers, the V0 engine's RPC): a wrong class there is
# vLLM's, not the caller's
_OWN_PLUMBING = re.compile(r"^vllm/entrypoints/|^vllm/engine/multiprocessing/")


def caller_type_check(site: Site) -> tuple[str, str] | None:
    """The argument and the class a site's check demands of its caller, when the check reads nothing else and the
    message names the class it wants (a refusal of what the caller built, not of a feature)."""
    if site.kind != "raise" or site.package != "vllm" or _OWN_PLUMBING.match(site.file):
        return None
    found = _CALLER_TYPE.match(site.condition or "")
    return (found["arg"], found["cls"]) if found and found["cls"] in site.template else None


def refused_input(atlas: Atlas, m: AtlasMatch, message: str, version: str | None,
                  models: tuple[str | None, str | None] = (None, None)) -> Remedy:
    """The inputs a refusal (a raise site, or an error vLLM logs) is about, with their flags and the advice."""
    out = Remedy()
    site = m.site
    literal = " ".join(p for p in site.template.replace("{{", "").replace("}}", "").split("{")[::1])
    if site.condition:  # the check says what it read; a value its message quotes (which model) is not an input
        literal = _HOLE.sub(" ", site.template)
    words = f"{site.template} {message}"
    request = _about_a_request(site, message, words)
    typed = caller_type_check(site)
    if typed is not None:
        # whoever calls vLLM (a script on the offline API, a framework, the server's own handler for one request)
        # built an object of another class: the call is the fix, in any release
        out.inputs.append("request")
        out.advice.append("fix-script")
        out.remediation.append(f"The check refused the class of the `{typed[0]}` it was handed, not a setting: the "
                               "code that calls vLLM (your script, or the framework in front of it) passed an object "
                               "this entry does not take (the message names what it takes) — pass that, or call the "
                               "method of vLLM's API that takes the object you have.")
        return out
    _whose(m, words, request, models, out)
    if site.package == "vllm":
        _what_the_release_lists(atlas, message, version, out)
    # (the log not saying its release: the flags of the releases that print this message)
    out.knobs += named_flags(atlas, literal, site.condition or "", version or site.last)
    _rank_share(atlas, site.file, site.function, site.condition or "", version, out)
    _checkpoint_property(atlas, site.condition or "", version, out)
    _task_not_served(atlas, site.condition or "", version, out)
    _world_size(atlas, site.condition or "", version, out)
    _platform_quantization(site.condition or "", out)
    out.knobs += [e for e in dict.fromkeys(_LIB_ENV.findall(site.template)) if e not in out.knobs]
    # a variable the check itself reads from the environment (`conf = os.environ.get('PYTORCH_CUDA_ALLOC_CONF')`):
    # its value is what was refused
    read = [e for e in dict.fromkeys(m[1] or m[2] for m in _ENV_READ.finditer(site.condition or ""))
            if e not in out.knobs]
    out.knobs += read
    out.inputs += [e for e in read if e not in out.inputs]
    return out


def _what_the_release_lists(atlas: Atlas, message: str, version: str | None, out: Remedy) -> None:
    """What a refusal's own list of accepted values says: empty (nothing passes), or older than the value given (a
    later release may take it)."""
    if _NOTHING_ALLOWED.search(message[:2000]):
        # the list the check compares against is empty in this release: no value passes it, whatever was given
        out.advice += [a for a in ("upgrade", "pin") if a not in out.advice]
        out.remediation.insert(0, "The refusal lists no value it would take (an empty list): no input passes this "
                                  "check as it ran — not a wrong choice of yours. Either the release fills that list "
                                  "wrongly (a regression: upgrade to a release that fixed it, or pin the release "
                                  "before it), or what fills it at run time found nothing on this host (a backend or "
                                  "plugin not installed or not detected: its own log line says so).")
    newer = _newer_than_listed(message)
    if newer is not None:
        # (a later release the atlas read is one to look at; past the newest read, none is known to take it)
        later = version is None or any(newer_release(r, version) for r in atlas.releases)
        out.inputs.append("checkpoint")
        if later:
            out.advice += [a for a in ("upgrade",) if a not in out.advice]
        out.remediation.insert(0, f"The value given ({newer[0]}) is newer than every one this release lists (up to "
                                  f"{newer[1]}): the code knows the versions that existed when it was written — "
                                  + ("a later release may take this one (its notes, or its supported-models page): "
                                     "upgrade, or " if later else "no release read lists it yet: ")
                                  + "use a version this release lists.")


def _whose(m: AtlasMatch, words: str, request: bool, models: tuple[str | None, str | None], out: Remedy) -> None:
    """Whose input it refused: a request's id (its sender's), a request, the model given, or a checkpoint's
    content."""
    site = m.site
    if site.kind == "raise" and _REQUEST_ID.search(site.template) and not request:
        out.inputs.append("request")
        out.advice.append("request")
        out.remediation.append("The check refused a request's id: the id comes from whoever sends the request (the "
                               "client, a proxy in front of the server, or the script calling vLLM) — send ids of the "
                               "form the check names, or put in front the part that builds them.")
    elif request:
        out.inputs.append("request")
        out.advice.append("request")
        out.remediation.append("The server refused this request, not itself: change what the client sends (its "
                               "length, schema, images, model name, parameters) — or, where a setting allows it, the "
                               "flag named here.")
        if _COUNT_MISMATCH.search(site.template):
            # the placeholders were counted in the prompt the processor expanded: the processor is one other side
            out.deps.append("transformers")
            out.remediation.append("The prompt's placeholders and the encoder's tokens disagree in number. One cause "
                                   "is the prompt carrying the media token itself; another, the Hugging Face "
                                   "processor (transformers') expanding another count than this vLLM release's model "
                                   "code expects — compare the installed transformers (`pip show transformers`) with "
                                   "the range this vLLM release's requirements name; others are processor kwargs "
                                   "that differ.")
    given = None if request else refused_model(m)
    if given is not None:  # (models: the drafter's and the target's, as the log gives them)
        model_remedy(m, given, flag_for(given, *models), out)
    content = _CHECKPOINT_WORDS.search(words) or _CHECKPOINT_FUNCS.search(site.function)
    if site.kind == "raise" and content and not request and given is None and not library_too_old(words):
        out.inputs.append("checkpoint")
        out.advice.append("checkpoint")
        out.remediation.append("The refusal is about the checkpoint's (or adapter's) content: use one in a layout "
                               "this release supports, or convert it.")


# what a check reads of the model that no flag sets: the checkpoint's config.json (`hf_config.x`), or a property
# the model's config derives from it (`model_config.is_matryoshka` is no field of ModelConfig)
_MODEL_ATTR = re.compile(r"\b(?:model_config|hf_config|hf_text_config)\.([a-z][a-z0-9_]{3,})\b(?!\s*\()")
HF_OVERRIDES_DOC = "https://docs.vllm.ai/en/latest/configuration/engine_args.html"


def _checkpoint_property(atlas: Atlas, condition: str, version: str | None, out: Remedy) -> None:
    """A check of the model's own config (a key of its config.json, or what ModelConfig derives from it): the
    checkpoint's config decides; `--hf-overrides` replaces a key of it where the checkpoint is right for it."""
    fields = atlas.config_fields("ModelConfig", version)
    read = [a for a in dict.fromkeys(_MODEL_ATTR.findall(condition)) if a not in fields and not a.startswith("hf_")]
    if not read or not fields or "--hf-overrides" not in atlas.cli_flags(version):
        return
    name = read[0]
    out.inputs += [i for i in (name, "checkpoint") if i not in out.inputs]
    if "checkpoint" not in out.advice:
        out.advice.append("checkpoint")
    out.knobs.append("--hf-overrides")
    out.remediation.append(
        f"The check reads the model's `{name}`, which no flag sets: it comes from the checkpoint's config.json (or "
        f"what vLLM derives from it). Fix the checkpoint's config, or — when the model really has the property — "
        f"override the key with `--hf-overrides '{{\"{name}\": …}}'` ({HF_OVERRIDES_DOC}).")


# a route whose handler the server never made (`handler = getattr(request.app.state, 'serving_embedding', None)`):
# vLLM sets up the APIs of the task its model runner was started for, and no other
_UNSERVED = re.compile(r"getattr\(request\.app\.state, '(serving_\w+)'")
_GENERATION_HANDLERS = ("serving_chat", "serving_completion", "serving_responses")
POOLING_DOC = "https://docs.vllm.ai/en/v0.11.2/models/pooling_models/"
TASK_DOC = "https://docs.vllm.ai/en/v0.9.1/models/pooling_models.html"


def _task_not_served(atlas: Atlas, condition: str, version: str | None, out: Remedy) -> None:
    """An API the server has no handler for: the model was started for another task; the runner (the task on older
    releases) decides which APIs a server has."""
    handler = _UNSERVED.search(condition)
    flags = atlas.cli_flags(version)
    if handler is None:
        return
    generate = handler.group(1) in _GENERATION_HANDLERS
    if "--runner" in flags:
        want = "`--runner generate`" if generate else ("`--runner pooling` (with `--convert embed` or `--convert "
                                                       "classify` when the checkpoint is a generative architecture)")
        knobs, doc = ["--runner", *(["--convert"] if not generate and "--convert" in flags else [])], POOLING_DOC
    elif "--task" in flags:
        want = "`--task generate`" if generate else "`--task embed` (or `score`, `classify` for those APIs)"
        knobs, doc = ["--task"], TASK_DOC
    else:
        return
    out.inputs += [k for k in knobs if k not in out.inputs]
    out.knobs += [k for k in knobs if k not in out.knobs]
    out.remediation.insert(0, f"The server has no handler for this API (`{handler.group(1)}` was never set up): "
                              f"vLLM serves the APIs of the task its model runner was started for. Start it with "
                              f"{want}, or send this request to a server started for that task ({doc}).")


# the number of GPUs one engine needs: vLLM's ParallelConfig.world_size is the tensor-parallel degree times the
# pipeline-parallel one (no flag sets it itself)
_WORLD_SIZE = re.compile(r"\b(?:parallel_config\.|self\.)world_size\b(?!_)")
WORLD_SIZE_DOC = "https://docs.vllm.ai/en/v0.10.2/serving/parallelism_scaling.html"


def _world_size(atlas: Atlas, condition: str, version: str | None, out: Remedy) -> None:
    """A check of the engine's world size (the GPUs one engine uses): the parallel degrees set it."""
    flags = atlas.cli_flags(version)
    sizes = [f for f in ("--tensor-parallel-size", "--pipeline-parallel-size") if f in flags]
    if _WORLD_SIZE.search(condition) is None or not sizes:
        return
    out.inputs += [f for f in sizes if f not in out.inputs]
    out.knobs += [f for f in sizes if f not in out.knobs]
    out.remediation.append("The check counts the GPUs one engine needs — its world size, `--tensor-parallel-size` × "
                           "`--pipeline-parallel-size` — against what it was given: lower the degrees, or give it "
                           f"that many GPUs (the placement group, the devices visible to it) ({WORLD_SIZE_DOC}).")


# a platform's list of the quantization methods it runs (`rocm_supported_quantization`, a TPU's, Neuron's,
# `Platform.supported_quantization`): the method comes from the checkpoint, the list from the GPU's platform
_PLATFORM_QUANT = re.compile(r"\b(?:\w+_support(?:ed)?_quantization|cls\.supported_quantization)\b")


def _platform_quantization(condition: str, out: Remedy) -> None:
    if _PLATFORM_QUANT.search(condition) is None:
        return
    out.inputs += [i for i in ("checkpoint", "gpu") if i not in out.inputs]
    out.advice += [a for a in ("checkpoint",) if a not in out.advice]
    out.host += [h for h in ("gpu",) if h not in out.host]
    out.remediation.append("This platform's build does not run the checkpoint's quantization method (the check reads "
                           "the platform's own list): use a checkpoint quantized with a method the platform lists, "
                           "or serve it on a GPU platform that runs this one — a later release may add it (its "
                           "notes say so).")


# `intermediate_size_per_partition`: vLLM's name for one tensor-parallel rank's share of a layer's size (the size
# divided by the TP degree); in a MoE layer, expert parallelism places whole experts on ranks instead of splitting each
_PER_PARTITION = re.compile(r"\b[a-z]\w{0,60}_per_partition\b")
_MOE = re.compile(r"moe|expert", re.IGNORECASE)
EXPERT_PARALLEL_DOC = "https://docs.vllm.ai/en/latest/serving/expert_parallel_deployment.html"


def _rank_share(atlas: Atlas, file: str, function: str, condition: str, version: str | None, out: Remedy) -> None:
    """A check of a size per tensor-parallel rank: the TP degree sets it, and in a MoE layer expert parallelism."""
    share = _PER_PARTITION.search(condition)
    flags = atlas.cli_flags(version)
    if share is None or "--tensor-parallel-size" not in flags:
        return
    knobs = ["--tensor-parallel-size"]
    line = (f"The check reads one tensor-parallel rank's share (`{share.group(0)}`: the size divided by the TP "
            "degree): another `--tensor-parallel-size` changes it")
    if _MOE.search(f"{file} {function}") and "--enable-expert-parallel" in flags:
        knobs.append("--enable-expert-parallel")
        line += (f"; in this MoE layer `--enable-expert-parallel` places whole experts on the ranks instead of "
                 f"splitting each one ({EXPERT_PARALLEL_DOC})")
    out.remediation.append(line + ".")
    out.knobs += [k for k in knobs if k not in out.knobs]


def named_flags(atlas: Atlas, literal: str, condition: str, version: str | None) -> list[str]:
    """Flags a message names in words: a flag's own words ("tensor parallel size", "chat template"), its dest
    (`max_num_seqs`), or a getter its check calls (`get_limit_per_prompt(…)` reads `limit_per_prompt`)."""
    flags = atlas.cli_flags(version)
    low = " ".join(literal.lower().split())
    out: list[str] = []
    for flag in flags:
        words = flag.lstrip("-").split("-")
        said = r"[\s_-]".join(map(re.escape, words))
        if len(words) >= 3 and words[-2:] == ["parallel", "size"]:
            # a degree of parallelism is said without its "size": "with tensor parallelism is not supported"
            said = "(?:" + said + "|" + r"[\s_-]".join(map(re.escape, words[:-1])) + "ism)"
        if len(words) >= 2 and re.search(r"\b" + said + r"\b", low):
            out.append(flag)
    argued = [a or b for a, b in _ARGUMENT.findall(literal)]
    out += [f for f in ("--" + n.replace("_", "-") for n in argued) if f in flags and f not in out]
    names = [a or b for a, b in _DEST.findall(literal)] + argued + _GETTER.findall(condition)
    for name in dict.fromkeys(names):
        for knob in atlas.knobs_for([f"?.{name}"], version):
            if knob.flag not in out and knob.flag.startswith("--"):
                out.append(knob.flag)
    return out


# a switch of vLLM's named for what it turns on (`VLLM_USE_V2_MODEL_RUNNER`, `VLLM_USE_FLASHINFER_SAMPLER`): a message
# that says those words ("requires the V2 GPU model runner") names the switch
_SWITCH_PREFIX = re.compile(r"^VLLM_(?:USE|ENABLE)_(?P<words>[A-Z0-9]+(?:_[A-Z0-9]+){1,4})$")


def named_switches(atlas: Atlas, message: str, version: str | None) -> list[str]:
    """vLLM's `VLLM_USE_…` / `VLLM_ENABLE_…` variables whose words the message says, in order (one other word may
    stand between two of them: "V2 GPU model runner" says V2_MODEL_RUNNER)."""
    low = " ".join(message.lower().split())
    return [name for name, said in _switch_words(atlas, version) if said.search(low)]


@lru_cache(maxsize=16)
def _switch_words(atlas: Atlas, version: str | None) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Each switch's words as one pattern, built once per atlas and release: every report of a refusal asks."""
    # with no release known, any release's: the words name the switch whichever release the log is from
    names = atlas.env_vars(version) if version else dict.fromkeys(n for r in atlas.releases for n in atlas.env_vars(r))
    out: list[tuple[str, re.Pattern[str]]] = []
    for name in names:
        hit = _SWITCH_PREFIX.match(name)
        if hit is not None:
            words = [re.escape(w) for w in hit["words"].lower().split("_")]
            out.append((name, re.compile(r"\b" + r"(?:[\s_-]+[\w.]+)?[\s_-]+".join(words) + r"\b")))
    return tuple(out)
