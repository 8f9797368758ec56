"""Rules from the sixty-ninth batch's misses, general: vLLM's short names for the parallel sizes (`tp_size`) are their
flags; vLLM's own divisibility check (`12 is not divisible by 8`) names the parallel size that does not divide a model
dimension; transformers naming a class it does not define (`Tokenizer class X does not exist or is not currently
imported`) points at the checkpoint's own code (`--trust-remote-code`) or a transformers that defines it; pydantic
refusing fields a class does not define names those fields and a release that knows them."""

from __future__ import annotations

from tests.core.triage.reports import claims_of


def test_a_short_name_for_the_tensor_parallel_size_is_its_flag() -> None:
    text = ('Traceback (most recent call last):\n'
            '  File "/opt/venv/lib/python3.10/site-packages/vllm/model_executor/models/acme.py", line 53, in __init__\n'
            "    assert self.total_num_kv_heads % tp_size == 0\n"
            "AssertionError\n")
    (found,) = [f for f in claims_of(text) if f.id.startswith("frame:")]
    assert "tensor_parallel_size" in found.inputs or "--tensor-parallel-size" in found.knobs


def test_a_dimension_the_parallel_size_does_not_divide() -> None:
    (found,) = [f for f in claims_of("AssertionError: 52 is not divisible by 8\n")
                if f.id == "parallel-size-does-not-divide"]
    assert found.knobs[0] == "--tensor-parallel-size" and found.confidence == "low"
    assert "1, 2, 4" in found.remediation[0]
    # the server's own tensor-parallel size: the reading is surer
    args = "INFO 01-01 00:00:00 [api_server.py:1] non-default args: {'model': 'm', 'tensor_parallel_size': 8}\n"
    (sure,) = [f for f in claims_of(args + "AssertionError: 52 is not divisible by 8\n")
               if f.id == "parallel-size-does-not-divide"]
    assert sure.confidence == "medium"
    # other words around the numbers are another check's
    assert not [f for f in claims_of("AssertionError: size=52 is not divisible by channel=8\n")
                if f.id == "parallel-size-does-not-divide"]


def test_a_class_transformers_does_not_define_points_at_remote_code() -> None:
    line = "ValueError: Tokenizer class AcmeTokenizer does not exist or is not currently imported.\n"
    assert [f for f in claims_of(line) if "--trust-remote-code" in f.knobs and "transformers" in f.deps]


def test_fields_a_class_does_not_define_are_named() -> None:
    text = ("pydantic_core._pydantic_core.ValidationError: 2 validation errors for AcmeArgs\n"
            "scale_dtype  Extra inputs are not permitted\nzp_dtype     Extra inputs are not permitted\n")
    (found,) = [f for f in claims_of(text) if f.id.startswith("extra-fields:")]
    assert found.inputs == ["scale_dtype", "zp_dtype"] and "upgrade" in found.advice
    # another kind of validation error: no fields claimed as extra
    other = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for AcmeArgs\n"
             "scale  Input should be a valid number\n")
    assert not [f for f in claims_of(other) if f.id.startswith("extra-fields:")]
