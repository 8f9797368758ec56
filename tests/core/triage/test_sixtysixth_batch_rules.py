"""Rules from the sixty-sixth batch's misses, general: a check that quotes the model it was given as refused names
`--model`, not the checkpoint's content; an AttributeError on one of vLLM's own classes with no frames at all is a
defect of the release (said at low confidence, and only where no other reading placed the line); PyTorch refusing a
CUDA graph capture on the default stream is vLLM's capture path (switch it off, then upgrade); a user id the image
does not list is answered by `USER` and `HOME`."""

from __future__ import annotations

from tests.core.triage.reports import claims_of

_REFUSED_MODEL = ("Value error, Invalid repository ID or local directory specified: '{value}'.\n"
                  "Please verify the following requirements:\n")


def test_a_check_quoting_the_model_it_was_given_names_the_model_flag() -> None:
    (found,) = [f for f in claims_of(_REFUSED_MODEL.format(value="acme/tiny-model")) if f.site is not None]
    assert "--model" in found.inputs and "--model" in found.knobs
    assert "checkpoint" not in found.advice  # no weight was read: the value given, not a checkpoint's layout
    assert "acme/tiny-model" in found.remediation[0]
    # a value that is no model reference (words with spaces) is not taken for one
    (other,) = [f for f in claims_of(_REFUSED_MODEL.format(value="some words here")) if f.site is not None]
    assert "--model" not in other.inputs


def test_a_class_of_vllms_without_an_attribute_and_no_frames_is_the_release() -> None:
    line = "AttributeError: 'PrometheusStatLogger' object has no attribute 'gauge_something_new'.\n"
    (found,) = [f for f in claims_of(line) if f.id.startswith("missing-attribute:")]
    assert found.confidence == "low" and found.owner == "vllm" and "upgrade" in found.advice
    # a class vLLM does not have: nothing said of vLLM's classes
    assert not [f for f in claims_of("AttributeError: 'MyOwnWidget' object has no attribute 'x'.\n")
                if f.id.startswith("missing-attribute:")]
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
    assert found.knobs == ["USER", "HOME"] and "1000770000" in found.title
    assert not [f for f in claims_of("KeyError: 'getpwnam(): name not found'\n") if f.id == "below:unknown-uid"]


def test_a_float_conversion_tritons_code_generator_lacks_is_tritons() -> None:
    (found,) = [f for f in claims_of("Unsupported conversion from bf16 to f8E4M3FN\n") if f.id.startswith("below:")]
    assert found.owner == "triton" and "triton" in found.deps and found.title.startswith("Triton:")
    # another program's words for its own conversions are not Triton's
    assert not [f for f in claims_of("Unsupported conversion from float64 to Decimal\n") if f.owner == "triton"]
