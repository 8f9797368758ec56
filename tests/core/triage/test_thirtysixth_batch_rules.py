"""What the thirty-sixth batch's misses taught, general (issue 35): any shared object the loader cannot open is the
loader's (a Python extension module too, not only `lib*.so`); a program that passes vLLM an engine argument of a
newer release is the program's age (upgrade vLLM); a message's `VLLM_USE_V1=0` is no fix where the tracebacks already
run in the V0 engine. Lines in the shapes public threads show (tests/cases-thirtysixth)."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def _claims(text: str, version: str | None = None) -> list[Finding]:
    report = build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags(vllm_version=version))))
    return [f for f in report.findings if f.severity in ("critical", "warning")]


def test_an_extension_module_the_loader_cannot_open_is_the_loaders() -> None:
    top = _claims("ImportError: ascend_transport.so: cannot open shared object file: No such file or directory\n")[0]
    assert top.id == "below:loader:cannot-open-shared-object" and top.owner == "loader"
    assert any("LD_LIBRARY_PATH" in r for r in top.remediation)


TOO_NEW = "TypeError: __init__() got an unexpected keyword argument 'limit_mm_per_prompt'\n"


def test_an_engine_argument_of_a_newer_release_is_the_programs_age() -> None:
    top = _claims(TOO_NEW, "0.5.0")[0]
    assert top.id == "newer-argument:limit_mm_per_prompt" and top.advice == ["upgrade"]
    assert top.inputs == ["--limit-mm-per-prompt"] and top.owner == "other"


def test_no_claim_without_the_release_or_for_an_argument_every_release_has() -> None:
    assert not any(f.id.startswith("newer-argument") for f in _claims(TOO_NEW))
    assert not any(f.id.startswith("newer-argument") for f in _claims(TOO_NEW, "0.9.2"))
    common = "TypeError: __init__() got an unexpected keyword argument 'tensor_parallel_size'\n"
    assert not any(f.id.startswith("newer-argument") for f in _claims(common, "0.2.0"))


V0 = ("ValueError: Qwen2_5OmniModel has no vLLM implementation and the Transformers implementation is not compatible "
      "with vLLM. Try setting VLLM_USE_V1=0.\n"
      "Traceback (most recent call last):\n"
      '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/multiprocessing/engine.py", line 436, in '
      "run_mp_engine\n"
      "    engine = MQLLMEngine.from_vllm_config(\n")


def test_a_suggested_v0_switch_is_no_fix_where_the_v0_engine_already_runs() -> None:
    claims = _claims(V0, "0.8.5")
    assert claims and all("VLLM_USE_V1" not in f.knobs for f in claims)
    assert any("already in effect" in f.summary for f in claims)


def test_a_message_that_names_v1_on_is_no_v0_suggestion() -> None:
    claims = _claims(
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/llm_engine.py", line 500, in from_engine_args\n'
        "    vllm_config = engine_args.create_engine_config(usage_context)\n"
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", line 1200, in _raise_or_fallback\n'
        "    raise NotImplementedError(\n"
        "NotImplementedError: VLLM_USE_V1=1 is not supported with --quantization bitsandbytes.\n", "0.8.5")
    assert any("VLLM_USE_V1" in f.knobs for f in claims)
    assert not any("already in effect" in f.summary for f in claims)


def test_a_front_end_flag_or_another_librarys_class_is_no_newer_engine_argument() -> None:
    front = "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'api_server_count'\n"
    processor = "TypeError: Qwen2VLProcessor.__init__() got an unexpected keyword argument 'mm_processor_kwargs'\n"
    assert not any(f.id.startswith("newer-argument") for f in [*_claims(front, "0.8.5"), *_claims(processor, "0.6.1")])
