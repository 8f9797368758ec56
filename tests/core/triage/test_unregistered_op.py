"""`'_OpNamespace' 'NS' object has no attribute 'OP'` (torch/_ops.py): the namespace names whose compiled extension
is missing the operator. Real lines from public threads (URL beside each); none is a line of the evaluation cases."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings


def report_of(text: str) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags())))


# https://github.com/vllm-project/vllm/issues/13593 (a CPU source build whose vllm._C did not import)
CPU_BUILD = (
    "WARNING 03-06 13:44:18 [_custom_ops.py:21] Failed to import from vllm._C with "
    "ModuleNotFoundError(\"No module named 'vllm._C'\")\n"
    "INFO 03-06 13:44:19 [parallel_state.py:948] rank 0 in world size 1 is assigned as DP rank 0, "
    "PP rank 0, TP rank 0\n"
    "ERROR 03-06 13:44:19 [engine.py:409] '_OpNamespace' '_C' object has no attribute 'silu_and_mul' "
    "'_C::silu_and_mul' 'torch._ops._C'\n")
# https://github.com/vllm-project/vllm/issues/5454
RMS_NORM = "AttributeError: '_OpNamespace' '_C' object has no attribute 'rms_norm'\n"
# https://github.com/OpenBMB/MiniCPM-V/issues/800 (vLLM's FlashAttention build)
FA2 = ("AttributeError: Error in model execution (input dumped to /tmp/err_execute_model_input_20250206-214302.pkl): "
       "'_OpNamespace' '_vllm_fa2_C' object has no attribute 'varlen_fwd'\n")


def test_an_operator_of_vllms_own_extension_names_vllms_install() -> None:
    for text in (CPU_BUILD, RMS_NORM, FA2):
        top = report_of(text).findings[0]
        assert top.id.startswith("unregistered-op:_"), top.id
        assert top.owner == "vllm" and "vllm" in top.deps and top.severity == "critical"
        assert "Reinstall vLLM" in top.remediation[0]


def test_the_earlier_import_failure_is_named() -> None:
    top = report_of(CPU_BUILD).findings[0]
    assert "No module named 'vllm._C'" in top.summary


def test_another_packages_namespace_is_a_plugins_not_vllms() -> None:
    line = "RuntimeError: Dummy run failed: '_OpNamespace' '_C_ascend' object has no attribute 'some_op'\n"
    top = report_of(line).findings
    op = next(f for f in top if f.id == "unregistered-op:_C_ascend")
    assert op.owner == "plugin" and "disable-plugin" in op.advice and op.confidence == "low"
    assert "vllm" not in op.deps


def test_a_namespace_too_long_to_be_one_is_not_read() -> None:
    line = "AttributeError: '_OpNamespace' '" + "x" * 500 + "' object has no attribute 'y'\n"
    assert all(not f.id.startswith("unregistered-op") for f in report_of(line).findings)
