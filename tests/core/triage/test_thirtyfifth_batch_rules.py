"""What the thirty-fifth batch's misses taught, general (issue 35): Triton's PTX assembler says when it is older than
the GPU (`is not defined for option 'gpu-name'`) and when the PTX needs a newer GPU (`requires .target sm_70`); a
CUDA driver error in PyTorch's virtual-memory path offers expandable segments off as a switch. Lines in the shapes
public threads show (tests/cases-thirtyfifth holds the cases with their sources)."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def _claims(text: str) -> list[Finding]:
    report = build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags())))
    return [f for f in report.findings if f.severity in ("critical", "warning")]


def test_a_ptxas_older_than_the_gpu_is_the_toolkits_not_vllms() -> None:
    claims = _claims("(EngineCore_DP0 pid=93) Internal Triton PTX codegen error\n"
                     "(EngineCore_DP0 pid=93) ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'\n")
    top = claims[0]
    assert top.owner == "triton" and top.inputs == ["gpu"] and "cuda-toolkit" in top.host
    assert top.remediation[0].startswith("Use a Triton (or an image) built with a CUDA toolkit that knows this GPU")
    assert top.summary.startswith("Triton's PTX assembler (ptxas) printed this")


def test_ptx_that_needs_a_newer_gpu_is_tritons_release() -> None:
    claims = _claims("ptxas /tmp/t.ptx, line 57; error : Modifier '.evict_last' on 'ld' requires .target sm_70 or "
                     "higher\nptxas fatal : Ptx assembly aborted due to errors\n")
    top = claims[0]
    assert top.owner == "triton" and "triton" in top.deps and "gpu" in top.host


def test_a_driver_error_in_pytorchs_virtual_memory_path_offers_expandable_segments_off() -> None:
    top = _claims("RuntimeError: CUDA driver error: device not ready\n")[0]
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False" in top.knobs


def test_a_line_that_only_mentions_ptxas_is_no_finding() -> None:
    assert not _claims("INFO 03-01 10:00:00 [compiler.py:10] using ptxas from /usr/local/cuda/bin\n")


def test_ptxas_in_an_nvcc_build_is_the_builds_not_tritons() -> None:
    top = _claims("ptxas /tmp/tmpxft_0001_compute_70.ptx, line 1024; error : Instruction 'ldmatrix' requires "
                  ".target sm_75 or higher\n")[0]
    assert top.owner != "triton" and "triton" not in top.deps and "TORCH_CUDA_ARCH_LIST" in top.remediation[0]
