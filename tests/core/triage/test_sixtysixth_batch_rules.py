"""Rules from the sixty-sixth batch's misses, general: a check that quotes the model it was given as refused names
`--model`, not the checkpoint's content; an AttributeError on one of vLLM's own classes with no frames at all is a
defect of the release (said at low confidence, and only where no other reading placed the line); PyTorch refusing a
CUDA graph capture on the default stream is vLLM's capture path (switch it off, then upgrade); a user id the image
does not list is answered by `USER` and `HOME`."""

from __future__ import annotations

from bot.core.atlas import AtlasMatch, Site
from bot.core.logparse import parse_text
from bot.core.triage.atlas_readers.model_given import refused_model
from bot.core.triage.context import Flags, build_context
from bot.core.triage.knowledge import load_kb
from tests.core.triage.reports import claims_of

_REFUSED_MODEL = ("Value error, Invalid repository ID or local directory specified: '{value}'.\n"
                  "Please verify the following requirements:\n")


def test_a_check_quoting_the_model_it_was_given_names_the_model_flag() -> None:
    (found,) = [f for f in claims_of(_REFUSED_MODEL.format(value="acme/tiny-model")) if f.site is not None]
    assert "--model" in found.inputs and "--model" in found.knobs
    assert "checkpoint" not in found.advice  # no weight was read: the value given, not a checkpoint's layout
    assert "`acme/tiny-model`" in found.remediation[0]
    assert found.inputs[0] == "--model" and "upgrade" not in found.advice
    # a bare name is a model argument too (a repository id without an owner, a relative directory)
    (bare,) = [f for f in claims_of(_REFUSED_MODEL.format(value="gpt2")) if f.site is not None]
    assert bare.inputs[0] == "--model" and "`gpt2`" in bare.remediation[0]
    # a GGUF reference in a form the check refuses: --model, in the form the message names (no reachability advice)
    gguf = ("ValueError: Wrong GGUF model or invalid GGUF quant type: acme/tiny-GGUF:Q4_K_XL.\n"
            " - It should be in repo_id:quant_type format.\n")
    (refused,) = [f for f in claims_of(gguf) if f.site is not None]
    assert refused.inputs[0] == "--model" and "HF_HUB_OFFLINE" not in refused.remediation[0]
    dotted = gguf.replace("acme/tiny-GGUF", "acme/Qwen2.5-7B-GGUF")
    (named,) = [f for f in claims_of(dotted) if f.site is not None]
    assert "`acme/Qwen2.5-7B-GGUF:Q4_K_XL`" in named.remediation[0]


def _match(template: str, holes: dict[str, str], function: str = "get_config") -> AtlasMatch:
    site = Site(id="s", package="vllm", file="vllm/x.py", function=function, kind="raise", exc="ValueError",
                level=None, template=template, condition=None, first="0.10.0", last="0.10.0", part="config")
    return AtlasMatch(site=site, exact=True, holes=holes, release="0.10.0", line=1, url="u", in_release=True,
                      gone_after=None, fixed_in=None, compare_url=None, knobs=(), condition_text=None)


def test_only_a_refused_model_argument_is_the_model_given() -> None:
    assert refused_model(_match("Invalid repository ID or local directory specified: '{model}'.",
                                {"model": "org/m"})) == "org/m"
    # the model named, not refused: which model a feature is not supported for
    assert refused_model(_match("LoRA is not supported for {model} yet.", {"model": "org/m"})) is None
    # another object's model (a drafter's, a module's) is no --model
    assert refused_model(_match("Invalid draft model: {self.model}", {"self.model": "org/d"},
                                function="SpeculativeConfig.__post_init__")) is None
    assert refused_model(_match("Invalid model: {self.model}", {"self.model": "org/m"},
                                function="ModelConfig.__post_init__")) == "org/m"


def test_a_class_of_vllms_without_an_attribute_and_no_frames_is_the_release() -> None:
    # Python's own wording, as printed (no period; with a suggestion; and as an issue's title quotes it)
    for line in ("AttributeError: 'PrometheusStatLogger' object has no attribute 'gauge_something_new'\n",
                 "AttributeError: 'PrometheusStatLogger' object has no attribute 'gauge_x'. Did you mean: 'gauge_y'?\n",
                 "AttributeError: 'PrometheusStatLogger' object has no attribute 'gauge_something_new'.\n"):
        (found,) = [f for f in claims_of(line) if f.id.startswith("missing-attribute:")]
        assert found.confidence == "low" and found.owner == "vllm" and "upgrade" in found.advice
    # a class vLLM does not have, a one-word name other libraries use, a vendored copy's, the public API's that
    # programs hold: nothing said of vLLM's classes
    for cls in ("MyOwnWidget", "Tensor", "Request", "LLM", "SamplingParams"):
        assert not [f for f in claims_of(f"AttributeError: '{cls}' object has no attribute 'x'\n")
                    if f.id.startswith("missing-attribute:")], cls
    # the user's own frame above it: the frames decide, not the bare reading
    framed = ('Traceback (most recent call last):\n  File "/home/me/run.py", line 3, in <module>\n'
              "    logger.gauge_something_new.set(1)\n" + line)
    assert not [f for f in claims_of(framed) if f.id.startswith("missing-attribute:") and f.confidence == "low"]


def test_a_cuda_graph_captured_on_the_default_stream_is_vllms_capture_path() -> None:
    line = ("RuntimeError: CUDA graphs must be captured on a non-default stream. (However, after capture, it's ok "
            "to replay them on the default stream.)\n")
    (found,) = [f for f in claims_of(line) if f.id.startswith("below:cuda:")]
    assert found.owner == "torch" and found.part == "compilation"
    assert found.knobs[0] == "--enforce-eager" and "upgrade" in found.advice


def test_a_user_id_the_image_does_not_list_is_set_by_user_and_home() -> None:
    (found,) = [f for f in claims_of("KeyError: 'getpwuid(): uid not found: 1000770000'\n")
                if f.id == "below:unknown-uid"]
    assert set(found.knobs) == {"USER", "HOME"} and "1000770000" in found.title
    # a longer number is not cut to a user id
    assert not [f for f in claims_of("KeyError: 'getpwuid(): uid not found: 12345678901'\n")
                if f.id == "below:unknown-uid"]
    assert not [f for f in claims_of("KeyError: 'getpwnam(): name not found'\n") if f.id == "below:unknown-uid"]


def test_a_float_conversion_tritons_code_generator_lacks_is_tritons() -> None:
    (found,) = [f for f in claims_of("Unsupported conversion from bf16 to f8E4M3FN\n") if f.id.startswith("below:")]
    assert found.owner == "triton" and "triton" in found.deps and found.title.startswith("Triton:")
    # another program's words for its own conversions are not Triton's
    assert not [f for f in claims_of("Unsupported conversion from float64 to Decimal\n") if f.owner == "triton"]


def test_the_length_a_launch_admits_is_the_latest_launchs() -> None:
    kb = load_kb()
    start = ("INFO 01-01 00:00:02 [core.py:1] Initializing a V1 LLM engine (v0.10.0) with config: model='m', "
             "max_seq_len=65536, download_dir=None\n")
    assert build_context(Flags(), parse_text(start), kb).max_model_len == 65536
    earlier = "INFO 01-01 00:00:00 [api_server.py:1] non-default args: {'model': 'm', 'max_model_len': 16384}\n"
    latest = "INFO 01-01 00:00:01 [api_server.py:1] non-default args: {'model': 'm'}\n"
    assert build_context(Flags(), parse_text(earlier + latest + start), kb).max_model_len == 65536
    # the latest launch says no length: an earlier launch's is not this run's
    assert build_context(Flags(), parse_text(earlier + latest), kb).max_model_len is None
    # `Starting vLLM API server` comes at the end of a launch, not its start
    ready = "INFO 01-01 00:00:03 [api_server.py:1] Starting vLLM API server 0 on http://127.0.0.1:8000\n"
    assert build_context(Flags(), parse_text(earlier + start + ready), kb).max_model_len == 65536


def test_a_refused_drafter_path_is_the_speculative_config() -> None:
    args = ("INFO 01-01 00:00:00 [api_server.py:1] non-default args: {'model': 'acme/m', 'speculative_config': "
            "{'method': 'eagle', 'model': '/models/eagle-draft'}}\n")
    (found,) = [f for f in claims_of(args + _REFUSED_MODEL.format(value="/models/eagle-draft")) if f.site is not None]
    assert "--model" not in found.inputs and found.inputs[0] == "--speculative-config"
    assert "checkpoint" not in found.advice and "drafter" in found.remediation[0]
    # the same path as the target's too (an MTP drafter read from the target): the target is loaded first
    both = args.replace("'model': 'acme/m'", "'model': '/models/eagle-draft'")
    (target,) = [f for f in claims_of(both + _REFUSED_MODEL.format(value="/models/eagle-draft")) if f.site is not None]
    assert target.inputs[0] == "--model"
