"""Rules from the sixty-fifth batch's misses, general: a check that reads a variable from the environment itself
(`os.environ.get('PYTORCH_CUDA_ALLOC_CONF')`) names that variable as what it refused."""

from __future__ import annotations

from tests.core.triage.reports import claims_of


def test_a_check_reading_the_environment_names_the_variable_it_refused() -> None:
    line = "AssertionError: Expandable segments are not compatible with memory pool.\n"
    (found,) = [f for f in claims_of(line, version="0.20.1") if f.site is not None]
    assert "PYTORCH_CUDA_ALLOC_CONF" in found.knobs and "PYTORCH_CUDA_ALLOC_CONF" in found.inputs
    # a check that reads no variable names none
    other = [f for f in claims_of("ValueError: Either SamplingParams or PoolingParams must be provided.\n",
                                  version="0.7.3") if f.site is not None]
    assert other and not any(k.isupper() for f in other for k in f.knobs)
