"""What the thirty-third batch's misses taught, general (issue 35): a refusal that names the variable to set is that
variable's fix; out of memory in vLLM's process is vLLM's memory share; another program reaching into a class of
vLLM's for what this release's class lacks is that program's age, not vLLM's bug; a wrapper's logger columns are not
the line; sleep mode that freed nothing, and structured output that cannot keep up with async scheduling. Lines in
the shapes public threads show (tests/cases-thirtythird holds the cases with their sources)."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def _claims(text: str) -> tuple[Report, list[Finding]]:
    report = build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags())))
    return report, [f for f in report.findings if f.severity in ("critical", "warning")]


def test_a_refusal_that_names_the_variable_to_set_makes_it_the_fix() -> None:
    _, claims = _claims("TypeError: Object of type <class 'torch.dtype'> is not serializable. Set "
                        "VLLM_ALLOW_INSECURE_SERIALIZATION=1 to allow fallback to pickle-based serialization.\n")
    top = claims[0]
    assert top.id == "told-variable:VLLM_ALLOW_INSECURE_SERIALIZATION" and top.confidence == "medium"
    assert top.knobs == ["VLLM_ALLOW_INSECURE_SERIALIZATION"] and "weigh what it relaxes" in top.remediation[0]


def test_a_variable_named_without_being_asked_for_is_no_fix() -> None:
    _, claims = _claims("ValueError: VLLM_ATTENTION_BACKEND=FLASHINFER is not supported on this platform\n")
    assert not any(f.id.startswith("told-variable") for f in claims)


CUMEM_OOM = (
    'Traceback (most recent call last):\n'
    '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 140, in wake_up\n'
    '    allocator.wake_up()\n'
    '  File "/usr/local/lib/python3.10/dist-packages/vllm/device_allocator/cumem.py", line 75, in create_and_map\n'
    '    python_create_and_map(*allocation_handle)\n'
    'RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n')


def test_out_of_memory_in_vllms_process_offers_its_memory_share_first() -> None:
    _, claims = _claims(CUMEM_OOM)
    top = claims[0]
    assert top.id == "below:cuda:cudaErrorMemoryAllocation"
    assert top.knobs[:1] == ["--gpu-memory-utilization"] and "--tensor-parallel-size" in top.knobs
    assert top.inputs == ["--gpu-memory-utilization"]
    assert any("conserving_memory" in s for s in top.sources)


def test_another_cuda_error_gets_no_memory_knobs() -> None:
    _, claims = _claims("RuntimeError: CUDA error: invalid argument\n")
    assert all("--gpu-memory-utilization" not in f.knobs for f in claims)


FASTCHAT = (
    "2025-03-24 22:04:27 | ERROR | stderr | Traceback (most recent call last):\n"
    '2025-03-24 22:04:27 | ERROR | stderr |   File "/srv/app/fastchat/serve/vllm_worker.py", line 57, in __init__\n'
    "2025-03-24 22:04:27 | ERROR | stderr |     self.tokenizer = llm_engine.engine.tokenizer\n"
    "2025-03-24 22:04:27 | ERROR | stderr | AttributeError: 'AsyncLLM' object has no attribute 'engine'\n")


def test_a_wrappers_logger_columns_are_not_the_line() -> None:
    parsed = parse_text(FASTCHAT)
    assert [p.exception for p in parsed.problems if p.kind == "exception"] == ["AttributeError"]
    loguru = parse_text("2024-01-05 10:00:00.123 | ERROR    | app.main:run:42 - ValueError: bad input\n")
    assert [p.message for p in loguru.problems] == ["bad input"]


def test_another_program_reaching_into_vllms_class_for_what_it_lacks_is_that_programs_age() -> None:
    _, claims = _claims(FASTCHAT)
    top = claims[0]
    assert top.id == "stale-caller:AsyncLLM.engine" and top.owner == "user-script" and "pin" in top.advice
    assert top.part == "engine" and top.confidence == "medium"


def test_the_same_error_raised_in_vllms_own_code_is_not_a_callers() -> None:
    _, claims = _claims(
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", line 10, in run\n'
        "    x = self.engine_core.engine\n"
        "AttributeError: 'AsyncLLM' object has no attribute 'engine'\n")
    assert not any(f.id.startswith("stale-caller") for f in claims)


def test_a_class_vllm_does_not_have_is_not_a_stale_caller() -> None:
    _, claims = _claims(FASTCHAT.replace("'AsyncLLM'", "'WorkerPool'"))
    assert not any(f.id.startswith("stale-caller") for f in claims)


def test_sleep_mode_that_freed_nothing_is_current_not_a_startup_notice() -> None:
    report, claims = _claims("INFO 02-25 19:13:26 worker.py:133] Sleep mode freed 0.00 GiB memory, 63.15 GiB memory "
                             "is still in use.\n")
    assert [f.id for f in claims] == ["sleep-mode-freed-nothing"] and report.verdict == "degraded"
    assert claims[0].knobs == ["PYTORCH_CUDA_ALLOC_CONF"]
    _, freed = _claims("INFO 04-24 14:05:59 worker.py:133] Sleep mode freed 23.74 GiB memory, 4.75 GiB memory is "
                       "still in use.\n")
    assert not freed


def test_grammar_advance_errors_offer_async_scheduling_off_even_when_the_line_is_cut() -> None:
    _, claims = _claims("ERROR 08-08 02:53:13 [backend_xgrammar.py:160] Failed to advance FSM for request\n")
    top = claims[0]
    assert top.id == "structured-output-fsm-advance-errors" and "--async-scheduling" in top.knobs


def test_a_class_name_vllm_shares_with_other_libraries_is_no_stale_caller() -> None:
    for cls, attr, where in (("Request", "bearer", "/app/gateway/auth.py"),
                             ("Sampler", "set_epoch", "/usr/lib/python3/dist-packages/accelerate/data_loader.py")):
        _, claims = _claims("Traceback (most recent call last):\n"
                            f'  File "{where}", line 10, in run\n    x = obj.{attr}\n'
                            f"AttributeError: '{cls}' object has no attribute '{attr}'\n")
        assert not any(f.id.startswith("stale-caller") for f in claims), cls


def test_a_way_to_see_more_is_no_variable_to_set() -> None:
    _, claims = _claims("RuntimeError: Engine loop failed. Set VLLM_LOGGING_LEVEL=DEBUG to see more details.\n")
    assert not any(f.id.startswith("told-variable") for f in claims)
