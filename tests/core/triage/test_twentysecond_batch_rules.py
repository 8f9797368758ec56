"""Refusals read by their words and frames: a registry's list of names, a degree of parallelism said without its
"size", a setting called an argument, an error body in the OpenAI shape, an egg install, a missing attribute
torch's `Module.__getattr__` raises, a prefix without its time (issue 35, the twenty-second batch). Real lines from
public threads (tests/cases-twentysecond holds them with their sources)."""

from __future__ import annotations

from bot.core.atlas import load_atlas
from bot.core.line_kinds import split_prefix
from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.atlas_readers.refused_input import named_flags
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def _top(text: str) -> tuple[Report, list[Finding]]:
    report = build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags())))
    return report, [f for f in report.findings if f.severity in ("critical", "warning")]


def test_a_prefix_without_its_time_still_gives_the_level_and_file() -> None:
    origin, msg = split_prefix("WARNING [envs.py:2057] Unknown vLLM environment variable detected: VLLM_BUILD_URL")
    assert (origin.level, origin.source_file, origin.stamp) == ("WARNING", "envs.py", None)
    assert msg.startswith("Unknown vLLM")
    # a warning is not the raise the same sentence has elsewhere: no critical claim
    report, claims = _top("WARNING [envs.py:2057] Unknown vLLM environment variable detected: VLLM_BUILD_URL\n")
    assert report.verdict != "failing" and not any(f.severity == "critical" for f in claims)


def test_parallelism_and_an_argument_named_in_words() -> None:
    atlas = load_atlas()
    said = named_flags(atlas, "Prequant BitsAndBytes models with tensor parallelism is not supported. Please try "
                              "with pipeline parallelism.", "", "0.7.3")
    assert {"--tensor-parallel-size", "--pipeline-parallel-size"} <= set(said)
    said = named_flags(atlas, "does not match the quantization method specified in the `quantization` argument "
                              "(gptq_marlin).", "", "0.5.0.post1")
    assert "--quantization" in said


def test_a_registry_refusing_a_name_is_the_flag_that_gave_it() -> None:
    _, claims = _top("KeyError: 'invalid tool call parser: kimi_k2 (chose from { deepseek_v3,granite,hermes,"
                     "llama3_json,mistral,pythonic })'\n")
    assert claims, "no claim"
    top = claims[0]
    assert top.id == "cli-refused" and top.inputs == ["--tool-call-parser"] and "upgrade" in top.advice
    assert top.part == "entrypoint"


def test_a_missing_attribute_raised_by_torch_getattr_is_the_vllm_layers() -> None:
    log = ('(EngineCore_DP0 pid=1)   File "/x/site-packages/torch/nn/modules/module.py", line 1962, in __getattr__\n'
           "(EngineCore_DP0 pid=1)     raise AttributeError(\n"
           "(EngineCore_DP0 pid=1) AttributeError: 'QKVParallelLinear' object has no attribute 'orig_dtype'\n")
    _, claims = _top(log)
    top = next(f for f in claims if f.id.startswith("missing-attribute:"))
    assert top.owner == "vllm" and top.part == "quantization" and "upgrade" in top.advice
    assert not any(f.owner == "torch" for f in claims)


def test_an_error_body_in_the_openai_shape_is_read_for_its_message() -> None:
    body = ('{"error":{"message":"\\"auto\\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to '
            'be set","type":"BadRequestError","param":null,"code":400}}\n')
    _, claims = _top(body)
    assert claims, "no claim"
    assert {"--enable-auto-tool-choice", "--tool-call-parser"} <= set(claims[0].knobs)
    assert claims[0].part == "entrypoint"


def test_an_egg_install_is_vllms_own_tree() -> None:
    from bot.core.parts import repo_path

    egg = ("/opt/conda/lib/python3.11/site-packages/vllm-0.6.6.post2.dev29+g6036d4db.d20250103.cpu-py3.11-linux-"
           "ppc64le.egg/vllm/distributed/communication_op.py")
    assert repo_path(egg) == "vllm/distributed/communication_op.py"
    assert repo_path("/x/site-packages/lmcache/integration/vllm/a.py") is None


def test_a_registry_message_whose_words_name_no_flag_is_no_refusal_of_a_flag() -> None:
    _, claims = _top("KeyError: 'invalid colour scheme: mauve (chose from { red,green })'\n")
    assert not any(f.id == "cli-refused" for f in claims)


def test_torchs_getattr_over_a_class_vllm_does_not_have_stays_unplaced() -> None:
    log = ('  File "/x/site-packages/torch/nn/modules/module.py", line 1962, in __getattr__\n'
           "    raise AttributeError(\n"
           "AttributeError: 'MyOwnAdapterThing' object has no attribute 'weight'\n")
    _, claims = _top(log)
    assert not any(f.id.startswith("missing-attribute:") for f in claims)


def test_a_level_and_a_file_mid_line_is_another_programs_logger() -> None:
    origin, _ = split_prefix("2024-01-01 app - ERROR [utils.py:88] boom")
    assert origin.level is None and origin.source_file is None


ACCESS = '(APIServer pid=1) INFO:     127.0.0.1:4000 - "{method} {path} HTTP/1.1" {status}\n'


def test_refused_requests_beside_answered_ones_are_one_clients_not_the_servers() -> None:
    answered = ACCESS.format(method="POST", path="/v1/chat/completions", status="200 OK")
    for refused in (ACCESS.format(method="GET", path="/v1/models", status="401 Unauthorized"),
                    ACCESS.format(method="POST", path="/generate", status="404 Not Found")):
        report, claims = _top(answered + refused)
        assert not claims and report.verdict != "failing", refused
        report, claims = _top(refused)  # every request refused: that is the failure
        assert report.verdict == "failing" and claims, refused


def test_a_scanners_404_is_no_refused_route() -> None:
    report, claims = _top(ACCESS.format(method="GET", path="/robots.txt", status="404 Not Found")
                          + ACCESS.format(method="GET", path="/", status="404 Not Found"))
    assert not claims and report.verdict != "failing"


def test_errno_99_outside_uvicorns_bind_is_not_the_host_flag() -> None:
    _, claims = _top("OSError: [Errno 99] Cannot assign requested address\n")
    assert not any(f.id == "host-address-not-assignable" for f in claims)
    _, claims = _top("ERROR:    [Errno 99] error while attempting to bind on address ('::1', 8000, 0, 0): cannot "
                     "assign requested address\n")
    assert claims and claims[0].id == "host-address-not-assignable" and "--host" in claims[0].inputs
