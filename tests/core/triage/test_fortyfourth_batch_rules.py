"""What the forty-fourth batch's misses taught, general (issue 35): a paste that drops a sentence's last full stop
still holds vLLM's sentence; a warning from the one-file config of older releases settles settings as the config
package's do; V0's memory-profiling line with a negative KV budget is the budget left to the cache; transformers 5's
tokenizer backends are transformers' tokenizer classes. Lines in the shapes public threads show
(tests/cases-fortyfourth)."""

from __future__ import annotations

from bot.core.atlas import load_atlas
from bot.core.template_match import Template
from tests.core.triage.reports import claims_of as _claims
from tests.core.triage.reports import report_of as _report


def test_a_sentences_last_full_stop_is_optional() -> None:
    t = Template.of(["At most ", "n", " ", "modality", "(s) may be provided in one request."])
    assert t.match("At most 1 image(s) may be provided in one request") is not None
    assert t.match("At most 1 image(s) may be provided in one request.") is not None
    assert t.match("At most 1 image(s) may be provided in one request!") is None
    # an ellipsis stays whole
    assert Template.of(["Loading ..."]).match("Loading ..") is None
    m = load_atlas().match("Pipeline parallelism is only supported through AsyncLLMEngine as performance will be "
                           "severely degraded otherwise")
    assert m is not None and m.exact


def test_a_warning_of_the_one_file_config_is_a_settled_setting() -> None:
    text = "awq quantization is not fully optimized yet. The speed can be slower than non-quantized models\n"
    r = _report(text, "0.4.3")
    assert r.verdict == "healthy" and not _claims(text, "0.4.3")


def test_v0s_negative_kv_budget_is_no_cache_blocks() -> None:
    text = ("INFO 02-26 09:54:05 worker.py:267] model weights take 5.20GiB; non_torch_memory takes 0.03GiB; PyTorch "
            "activation peak memory takes 1.42GiB; the rest of the memory reserved for KV Cache is -1.05GiB.\n")
    f = next(c for c in _claims(text) if c.id == "no-available-memory-cache-blocks")
    assert "--gpu-memory-utilization" in f.inputs
    assert not any(c.id == "no-available-memory-cache-blocks" for c in _claims(
        text.replace("is -1.05GiB", "is 1.05GiB")))


def test_transformers_5s_tokenizer_backends_are_tokenizer_classes() -> None:
    f = next(c for c in _report("AttributeError: TokenizersBackend has no attribute all_special_tokens_extended\n")
             .findings if c.id.startswith("library-class:transformers:"))
    assert f.owner == "transformers" and f.deps == ["transformers"]
