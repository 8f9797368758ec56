"""What the forty-third batch's misses taught, general (issue 35): argparse's refusal of a flag's value is that flag
whatever the reason; the loader's EACCES is the file's permissions; a Hub 404 for one file at one revision is the
revision; Mistral's checkpoint format is a part its flag switches; the same exception printed again with its
traceback is read from the traceback; an access line of a route the server lacks is read without its opening quote;
vLLM's config resolution lines are startup progress; Dynamo's and Inductor's frames are torch.compile's. Lines in the
shapes public threads show (tests/cases-fortythird)."""

from __future__ import annotations

from bot.core.switches import by_id, for_frame
from tests.core.triage.reports import claims_of as _claims
from tests.core.triage.reports import report_of as _report


def test_argparse_refusing_a_flags_value_for_any_reason_names_the_flag() -> None:
    text = ("vllm serve: error: argument --compilation-config/-O: 1 validation error for CompilationConfig\n"
            "  Input should be an object [type=dataclass_type, input_value=3, input_type=int]\n")
    f = next(c for c in _claims(text, "0.11.2") if c.id == "cli-refused")
    assert f.inputs == ["--compilation-config"] and "--compilation-config" in f.knobs


def test_the_loader_refused_for_permission_is_the_files_permissions() -> None:
    denied = _claims("python3: error while loading shared libraries: /root/.local/lib/libpython3.12.so.1.0: cannot "
                     "open shared object file: Permission denied\n")
    assert any("permissions" in f.host for f in denied)
    missing = _claims("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory\n")
    assert not any("permissions" in f.host for f in missing)


_HUB = ("requests.exceptions.HTTPError: 404 Client Error: Not Found for url: "
        "https://huggingface.co/acme/model-x/resolve/{rev}/config.json\n")


def test_a_hub_404_for_a_file_at_a_revision_names_the_revision() -> None:
    f = next(c for c in _claims(_HUB.format(rev="resolve%2F6_5")) if c.id == "hub-file-not-at-revision")
    assert "--revision" in f.inputs and {"--tokenizer-revision", "--code-revision"} <= set(f.knobs)
    assert "a path" in f.summary
    plain = next(c for c in _claims(_HUB.format(rev="main")) if c.id == "hub-file-not-at-revision")
    assert "a path" not in plain.summary
    # a repository's own 404 (no file path) is the access finding
    assert any(c.id == "hub-access-refused" for c in _claims(
        "404 Client Error: Repository Not Found for url: https://huggingface.co/api/models/acme/none\n"))


def test_mistrals_checkpoint_format_is_switched_by_its_flag() -> None:
    sw = for_frame("vllm/tokenizers/mistral.py", "find_tokenizer_file")
    assert sw is not None and sw.id == "mistral-format"
    off = sw.for_release("0.20.1")
    assert off is not None and off.knob == "--tokenizer-mode"


def test_an_exception_printed_again_with_its_traceback_is_read_from_the_traceback() -> None:
    text = ("AttributeError: 'RoutedExperts' object has no attribute 'tp_size'\n"
            'File "vllm/model_executor/layers/quantization/moe_wna16.py", line 483, in moe_wna16_weight_loader\n'
            "    tensor = loaded_weight.view(layer.tp_size, -1, loaded_weight.size(1))[tp_rank]\n"
            "AttributeError: 'RoutedExperts' object has no attribute 'tp_size'\n")
    f = next(c for c in _claims(text) if c.id.startswith("frame:"))
    assert f.part == "quantization" and f.owner == "vllm"


def test_an_access_line_without_its_opening_quote_is_still_a_route_not_served() -> None:
    assert any(c.id == "api-route-not-served" for c in _claims('POST /generate HTTP/1.1" 404 Not Found\n'))
    assert not any(c.id == "api-route-not-served" for c in _claims('GET /favicon.ico HTTP/1.1" 404 Not Found\n'))


def test_vllms_config_resolution_lines_are_startup_progress() -> None:
    text = ("INFO 11-28 23:41:18 [model.py:638] Resolved architecture: Qwen3ForCausalLM\n"
            "INFO 11-28 23:41:18 [model.py:1756] Using max model len 40960\n")
    assert _report(text).verdict == "healthy"


def test_dynamos_and_inductors_frames_are_torch_compiles() -> None:
    from bot.core.owners import Owner
    from bot.core.parsed_log import Origin, ProblemLine
    from bot.core.triage.atlas_readers.frame_first import _library_switch
    from bot.core.triage.frames import Raiser

    frame = ProblemLine(kind="frame", origin=Origin(1), message="",
                        frame_file="/usr/lib/python3/site-packages/torch/_inductor/utils.py",
                        frame_function="copy_misaligned_inputs")
    sw = _library_switch(Raiser(frame, Owner("torch", "torch"), None))
    assert sw is not None and sw == by_id("torch-compile")
    other = ProblemLine(kind="frame", origin=Origin(1), message="",
                        frame_file="/usr/lib/python3/site-packages/torch/nn/functional.py", frame_function="linear")
    assert _library_switch(Raiser(other, Owner("torch", "torch"), None)) is None
