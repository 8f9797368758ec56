"""Rules from the seventy-first batch's misses, general: `vllm bench`'s refusal of its own arguments or dataset is the
benchmark's failure (not a symptom of the server's answers) and its words are no part of the server; a refusal
listing an empty set of accepted values admits nothing; a model check naming only vLLM's own Transformers-backend
classes says vLLM has no implementation of the architecture."""

from __future__ import annotations

from tests.core.triage.reports import claims_of, report_of


def test_the_benchmarks_refusal_of_its_own_arguments_fails_the_benchmark() -> None:
    line = ("vllm bench <bench_type> [options] serve: error: Cannot use 'random' dataset with --dataset-path. Please "
            "specify the appropriate --dataset-name (e.g., 'sharegpt', 'custom', 'sonnet') for your dataset file: x\n")
    assert report_of(line).verdict == "failing"


def test_a_refusal_that_admits_nothing() -> None:
    line = "ValueError: Multi-modal content is not supported on backend 'vllm'; use one of [].\n"
    (found,) = claims_of(line)
    assert {"upgrade", "pin"} <= set(found.advice) and found.part != "multimodal"  # the benchmark's words
    # a list with values in it is a choice to make, not a defect
    listed = "ValueError: Multi-modal content is not supported on backend 'vllm'; use one of ['vllm-chat'].\n"
    assert not [f for f in claims_of(listed) if "pin" in f.advice]


def test_vllms_own_transformers_backend_named_by_a_model_check() -> None:
    line = "Model architectures ['TransformersModel'] failed to be inspected.\n"
    (found,) = claims_of(line)
    assert "checkpoint" in found.advice and "--model-impl" not in found.knobs
    assert not any("--model-impl transformers" in r for r in found.remediation)
    # an architecture of the checkpoint's own: the switch to the Transformers backend stays a way to prove it
    own = "Model architectures ['AcmeForCausalLM'] failed to be inspected.\n"
    assert not [f for f in claims_of(own) if "vLLM named its own Transformers backend" in " ".join(f.remediation)]
