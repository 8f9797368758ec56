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
    # other words around the numbers are another check's; a split that works, or of one part, is no failure
    for line in ("AssertionError: size=52 is not divisible by channel=8\n",
                 "AssertionError: 7 is not divisible by 1\n"):
        assert not [f for f in claims_of(line) if f.id == "parallel-size-does-not-divide"]
    # the tensor-parallel size is the first number: more ranks than KV heads, a multiple of them fits
    tp12 = "INFO 01-01 00:00:00 [api_server.py:1] non-default args: {'model': 'm', 'tensor_parallel_size': 12}\n"
    (kv,) = [f for f in claims_of(tp12 + "AssertionError: 12 is not divisible by 8\n")
             if f.id == "parallel-size-does-not-divide"]
    assert "KV heads" in kv.title and "16" in kv.remediation[0]
    # a server whose tensor-parallel size is neither number: another split (a vision tower's), not claimed
    tp2 = "INFO 01-01 00:00:00 [api_server.py:1] non-default args: {'model': 'm', 'tensor_parallel_size': 2}\n"
    assert not [f for f in claims_of(tp2 + "AssertionError: 1000 is not divisible by 16\n")
                if f.id == "parallel-size-does-not-divide"]
    # the check's own traceback: its numbers decide, not the function's history
    framed = ('Traceback (most recent call last):\n'
              '  File "/opt/venv/lib/python3.12/site-packages/vllm/distributed/utils.py", line 41, in '
              'ensure_divisibility\n    assert numerator % denominator == 0, "{} is not divisible by {}".format(\n'
              "AssertionError: 52 is not divisible by 8\n")
    assert [f for f in claims_of(framed) if f.id == "parallel-size-does-not-divide"]


def test_a_class_transformers_does_not_define_points_at_remote_code() -> None:
    line = "ValueError: Tokenizer class AcmeTokenizer does not exist or is not currently imported.\n"
    assert [f for f in claims_of(line) if "--trust-remote-code" in f.knobs and "transformers" in f.deps]
    # remote code already trusted: not advised again
    args = "INFO 01-01 00:00:00 [api_server.py:1] non-default args: {'model': 'm', 'trust_remote_code': True}\n"
    assert not [f for f in claims_of(args + line) if "--trust-remote-code" in f.knobs]


def test_fields_a_class_does_not_define_are_named() -> None:
    text = ("pydantic_core._pydantic_core.ValidationError: 2 validation errors for AcmeArgs\n"
            "scale_dtype  Extra inputs are not permitted\nzp_dtype     Extra inputs are not permitted\n")
    (found,) = [f for f in claims_of(text) if f.id.startswith("extra-fields:")]
    assert found.inputs == ["scale_dtype", "zp_dtype"] and "upgrade" in found.advice
    # pydantic's own two-line form
    real = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for AcmeArgs\nscale_dtype\n"
            "  Extra inputs are not permitted [type=extra_forbidden, input_value=None, input_type=NoneType]\n")
    (two,) = [f for f in claims_of(real) if f.id.startswith("extra-fields:")]
    assert two.inputs == ["scale_dtype"]
    # a request's schema: the client's fields, not the server's release
    request = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ChatCompletionRequest\n"
               "foo  Extra inputs are not permitted\n")
    (sent,) = [f for f in claims_of(request) if f.id.startswith("extra-fields:")]
    assert "request" in sent.inputs and sent.severity != "critical" and "upgrade" not in sent.advice
    # another kind of validation error: no fields claimed as extra
    other = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for AcmeArgs\n"
             "scale  Input should be a valid number\n")
    assert not [f for f in claims_of(other) if f.id.startswith("extra-fields:")]
