"""What the twenty-third batch's misses taught, general (issue 35): a CUDA source named by its file alone, an
exception's text continued on the next line read by the lower layers' catalogs, a flag one release quotes and another
does not, a file URL a request names; and the twenty-fourth batch's: a flag the parser refused is the input, a field
this release does not define may be a later API's. Real lines from public threads (tests/cases-twentythird and
tests/cases-twentyfourth hold them with their sources)."""

from __future__ import annotations

from bot.core.atlas import load_atlas
from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.below import named_source
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def _claims(text: str) -> tuple[Report, list[Finding]]:
    report = build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags())))
    return report, [f for f in report.findings if f.severity in ("critical", "warning")]


def test_a_cuda_source_named_by_its_file_alone_is_vllms_csrc() -> None:
    assert named_source("Failed: Cuda error custom_all_reduce.cuh:455 'invalid argument'") == \
        ("csrc/custom_all_reduce.cuh", "455", None)
    assert named_source("Failed: Cuda error not_a_vllm_file.cu:12 'invalid argument'") is None
    assert named_source("Failed: Cuda error activation_kernels.cu:70 'invalid argument'") is None  # in several folders
    _, claims = _claims("Failed: Cuda error custom_all_reduce.cuh:455 'invalid argument'\n")
    assert claims, "no claim"
    assert claims[0].part == "parallel" and "--disable-custom-all-reduce" in claims[0].knobs


def test_an_exception_continued_on_the_next_line_reaches_the_catalogs() -> None:
    _, claims = _claims("RuntimeError: [enforce fail at .../gloo/transport/tcp/device.cc:84]\n"
                        "  ifa != nullptr. Unable to find address for: ^lo\n")
    assert claims, "no claim"
    top = claims[0]
    assert top.part == "parallel" and any(k.startswith("GLOO_SOCKET_IFNAME") for k in top.knobs)
    assert "network" in top.host


def test_a_collective_timeout_offers_eager_mode_too() -> None:
    _, claims = _claims("[E ProcessGroupNCCL.cpp:475] [Rank 4] Watchdog caught collective operation timeout: "
                        "WorkNCCL(SeqNum=20518, OpType=ALLREDUCE, NumelIn=106496, NumelOut=106496, "
                        "Timeout(ms)=1800000) ran for 1800270 milliseconds before timing out.\n")
    assert claims, "no claim"
    assert "--enforce-eager" in claims[0].knobs


def test_a_flag_quoted_by_one_release_and_not_another_still_matches() -> None:
    m = load_atlas().match("The file path data/x.jpg must be a subpath of --allowed-local-media-path /srv/images.",
                           exc="ValueError")
    assert m is not None and m.site.file.startswith("vllm/multimodal/")


def test_a_file_url_a_request_names_is_the_requests() -> None:
    _, claims = _claims("(APIServer pid=1) ERROR 04-17 10:18:30 [serving_chat.py:255] ValueError: The file path "
                        "data/x.jpg must be a subpath of --allowed-local-media-path /srv/images.\n")
    assert claims, "no claim"
    top = claims[0]
    assert top.part == "multimodal" and "request" in top.inputs and "request" in top.advice


def test_a_check_of_the_media_flags_own_value_is_the_servers_setting() -> None:
    _, claims = _claims("ValueError: Invalid `--allowed-local-media-path`: The path /nope does not exist.\n")
    assert not any("request" in f.inputs for f in claims)


def test_a_world_smaller_than_tp_x_pp_is_named_without_a_launcher_told_as_fact() -> None:
    _, claims = _claims("RuntimeError: world_size (2) is not equal to tensor_model_parallel_size (4) x "
                        "pipeline_model_parallel_size (1)\n")
    assert claims and claims[0].id == "world-size-from-an-outside-launcher" and claims[0].part == "parallel"


def test_a_flag_no_release_has_is_the_input_the_parser_refused() -> None:
    _, claims = _claims("vllm: error: unrecognized arguments: --temperature 0.8\n")
    assert claims and claims[0].id == "cli-refused" and "--temperature" in claims[0].inputs


def test_a_field_this_release_does_not_define_may_be_a_later_apis() -> None:
    body = ("openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': \"[{'type': 'extra_forbidden', "
            "'loc': ('body', 'max_completion_tokens'), 'msg': 'Extra inputs are not permitted', 'input': 300}]\", "
            "'type': 'BadRequestError', 'param': None, 'code': 400}\n")
    _, claims = _claims(body)
    top = next(f for f in claims if f.id == "request-body-refused")
    assert {"request", "upgrade"} <= set(top.advice)
