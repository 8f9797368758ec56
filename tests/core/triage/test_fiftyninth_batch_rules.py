"""Rules from the fifty-ninth batch's misses, general: a feature the V1 engine does not support, named in words, keeps
the server on V0; vLLM's benchmark report with requests served and none failed is serving; a layer type a config
names that the model's code does not map."""

from __future__ import annotations

from tests.core.triage.reports import claims_of, report_of


def test_a_feature_the_v1_engine_lacks_keeps_the_server_on_v0() -> None:
    report = report_of("WARNING 05-29 16:18:03 [arg_utils.py:1586] Pipeline Parallelism without Ray distributed "
                       "executor or multiprocessing executor or external launcher is not supported by the V1 Engine. "
                       "Falling back to V0.\n")
    found = [f for f in report.findings if f.id == "v0-fallback:feature"]
    assert found and found[0].severity == "warning" and report.verdict == "degraded"
    # how the host runs (a device type, the GPU's capability) is a note, not a setting to change
    host = report_of("WARNING 05-29 16:18:03 [arg_utils.py:1586] Compute Capability < 8.0 is not supported by the "
                     "V1 Engine. Falling back to V0.\n")
    assert not [f for f in host.findings if f.id == "v0-fallback:feature"]


def test_a_benchmark_report_with_none_failed_is_serving() -> None:
    head = "============ Serving Benchmark Result ============\nSuccessful requests:                     1000\n"
    assert report_of(head + "Failed requests:                         0\n").verdict == "healthy"
    assert report_of(head + "Failed requests:                         200\n").verdict != "healthy"


def test_a_layer_type_the_models_code_does_not_map() -> None:
    found = [f for f in claims_of("(EngineCore pid=9824) KeyError: 'full_attention'\n")
             if f.id == "layer-type-unknown"]
    assert found and found[0].confidence == "low" and "upgrade" in found[0].advice and found[0].deps == ["transformers"]
    framed = [f for f in claims_of(
        'Traceback (most recent call last):\n  File "/venv/lib/python3.12/site-packages/vllm/model_executor/models/'
        'granitemoehybrid.py", line 330, in __init__\n    layer_class = ALL_DECODER_LAYER_TYPES[layer_type]\n'
        "KeyError: 'full_attention'\n") if f.id == "layer-type-unknown"]
    assert framed and framed[0].confidence == "medium"
    # another key, or the same word raised by code that is no model's, is not a layer type
    assert not [f for f in claims_of("KeyError: 'full_attention_x'\n") if f.id == "layer-type-unknown"]
    assert not [f for f in claims_of('Traceback (most recent call last):\n  File "/srv/app/run.py", line 3, in f\n'
                                     "KeyError: 'attention'\n") if f.id == "layer-type-unknown"]
