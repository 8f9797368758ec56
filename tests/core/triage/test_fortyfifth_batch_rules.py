"""What the forty-fifth batch's misses taught, general (issue 35): a check of the engine's world size is the parallel
degrees that make it; a line that calls an environment variable's value too small names that variable. Lines in the
shapes the fix PRs quote (tests/cases-fortyfifth)."""

from __future__ import annotations

from tests.core.triage.reports import claims_of as _claims


def test_a_check_of_the_engines_world_size_names_the_parallel_degrees() -> None:
    text = ("ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement "
            "group.Required number of devices: 2. Total number of devices: 1.\n")
    f = next(c for c in _claims(text, "0.7.3") if c.site is not None)
    assert {"--tensor-parallel-size", "--pipeline-parallel-size"} <= set(f.knobs)


def test_a_variable_called_too_small_is_named() -> None:
    text = ("(EngineCore_DP0 pid=17833) EZ9999[PID: 17833] 2025-12-23-07:36:19.237.396 (EZ9999):  HCCL_BUFFSIZE is "
            "too SMALL, maxBs = 512, h = 2048\n")
    f = next(c for c in _claims(text) if c.id.startswith("variable-too-small:"))
    assert f.knobs == ["HCCL_BUFFSIZE"] and "higher" in f.remediation[0]
    # lower-case words are prose, not a variable
    assert not any(c.id.startswith("variable-too") for c in _claims("the hccl_buffsize is too small here\n"))
