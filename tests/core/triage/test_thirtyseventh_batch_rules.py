"""What the thirty-seventh batch's misses taught, general (issue 35): an AttributeError on a Hugging Face tokenizer
class is the installed transformers against this vLLM; a kernel without the model's dtype on this device is the
dtype's (`--dtype`); a check of one tensor-parallel rank's share is the TP degree's, and in a MoE layer expert
parallelism's. Lines in the shapes public threads show (tests/cases-thirtyseventh)."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding

_VLLM_FRAME = ('  File "/usr/local/lib/python3.12/site-packages/vllm/transformers_utils/tokenizer.py", line 97, in '
               'get_cached_tokenizer\n    tokenizer_all_special_tokens_extended = (\n')


def _claims(text: str, version: str | None = None) -> list[Finding]:
    report = build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags(vllm_version=version))))
    return [f for f in report.findings if f.severity in ("critical", "warning")]


def test_an_attribute_missing_from_a_hugging_face_tokenizer_is_the_installed_transformers() -> None:
    for text in ("AttributeError: LlamaTokenizerFast has no attribute added_tokens_encoder_extended\n",
                 "Traceback (most recent call last):\n" + _VLLM_FRAME
                 + "AttributeError: 'CachedGemmaTokenizerFast' object has no attribute 'special_tokens_map_x'\n"):
        f = next(c for c in _claims(text, "0.9.2") if c.id.startswith("library-class:"))
        assert (f.owner, f.part, f.deps) == ("transformers", "tokenizer", ["transformers"]), text
        assert "vLLM 0.9.2" in f.remediation[0]
        # the words alone do not say who read the attribute: a low claim about "the code that ran"; vLLM's frame does
        framed = text.startswith("Traceback")
        assert f.confidence == ("medium" if framed else "low"), text
        assert ("vLLM reads" in f.summary) == framed and ("the code that ran" in f.summary) != framed


def test_vllms_own_tokenizer_classes_and_another_programs_calls_are_not_transformers_to_answer_for() -> None:
    assert not any(c.id.startswith("library-class:")
                   for c in _claims("AttributeError: 'MistralTokenizer' object has no attribute 'vocab_x'\n"))
    script = ('Traceback (most recent call last):\n  File "/home/me/serve_batch.py", line 12, in <module>\n'
              '    tok.build_inputs()\nAttributeError: \'Qwen2TokenizerFast\' object has no attribute '
              '\'build_inputs\'\n')
    assert not any(c.id.startswith("library-class:") for c in _claims(script))


def test_a_kernel_without_the_models_dtype_names_the_dtype_to_serve_in() -> None:
    f = next(c for c in _claims('ERROR 03-02 10:00:00 [core.py:700] RuntimeError: "silu_and_mul_kernel" not '
                                "implemented for 'Half'\n") if c.id.startswith("kernel-dtype:"))
    assert f.inputs == ["--dtype"] and f.knobs == ["--dtype"] and f.part == "platform"
    assert "--dtype float16" not in f.remediation[0] and "--dtype float32" in f.remediation[0]
    # an index or 8-bit type is no choice of --dtype
    for dtype in ("Long", "Float8_e4m3fn", "Bool"):
        text = f'RuntimeError: "index_select_out_cuda_impl" not implemented for \'{dtype}\'\n'
        assert not any(c.id.startswith("kernel-dtype:") for c in _claims(text)), dtype


def test_a_check_of_one_tensor_parallel_ranks_share_is_the_tp_degrees_and_in_moe_expert_parallelisms() -> None:
    text = ("ValueError: The output_size of gate's and up's weight = 192 is not divisible by weight quantization "
            "block_n = 128.\n")
    f = next(c for c in _claims(text, "0.31.0") if c.owner == "vllm")
    assert {"--tensor-parallel-size", "--enable-expert-parallel"} <= set(f.knobs) <= set(f.knobs + f.inputs)
    assert not any("Nothing this names is yours to set" in r for r in f.remediation)
