"""What the thirty-ninth batch's misses taught, general (issue 35): a warning vLLM's configuration logs while it
settles the settings is a note, not a degraded server; a model config class without a field vLLM's model code reads
is the release's support for the architecture against the checkpoint; an OpenAI client's `Error code: 4xx` is one
request the server refused; a checkpoint's JSON files named in a refusal make the checkpoint the input. Lines in the
shapes public threads show (tests/cases-thirtyninth)."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def _report(text: str, version: str | None = None) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text(text), flags=Flags(vllm_version=version))))


def _claims(text: str, version: str | None = None) -> list[Finding]:
    return [f for f in _report(text, version).findings if f.severity in ("critical", "warning")]


def test_a_warning_of_the_configuration_settling_the_settings_is_a_note() -> None:
    # vLLM 0.13.0's own warning (vllm/config/compilation.py, CompilationConfig.set_splitting_ops_for_v1)
    warning = "WARNING 12-01 10:00:00 [compilation.py:935] Using piecewise compilation with empty splitting_ops\n"
    r = _report(warning, "0.13.0")
    assert r.verdict == "healthy" and not _claims(warning, "0.13.0")
    assert any("settled the settings" in n for n in r.notes)
    serving = warning + ("INFO:     Application startup complete.\n"
                         "INFO 12-01 10:00:20 [loggers.py:123] Engine 000: Avg prompt throughput: 120.5 tokens/s, Avg "
                         "generation throughput: 40.1 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: "
                         "1.2%, Prefix cache hit rate: 0.0%\n")
    assert _report(serving, "0.13.0").verdict == "healthy" and not _claims(serving, "0.13.0")


def test_a_model_config_class_without_a_field_vllm_reads_is_the_architectures_support() -> None:
    text = "AttributeError: 'Gemma9VisionConfig' object has no attribute 'hidden_size'\n"
    f = next(c for c in _claims(text, "0.8.2") if c.id.startswith("library-class:config:"))
    assert f.part == "models" and "upgrade" in f.advice and f.deps == ["transformers"]
    assert f.confidence == "low" and "the code that ran" in f.summary  # no frame says it was vLLM's model code
    # vLLM's own config classes are vLLM's to answer for
    assert not any(c.id.startswith("library-class:config:")
                   for c in _claims("AttributeError: 'EAGLEConfig' object has no attribute 'hidden_size'\n"))


def test_an_openai_clients_4xx_is_one_request_the_server_refused() -> None:
    text = ("openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': 'Cannot request more than 5 "
            "logprobs.', 'type': 'BadRequestError', 'param': None, 'code': 400}\n")
    f = next(c for c in _claims(text) if c.site is not None)
    assert "request" in f.inputs and "request" in f.advice


def test_a_checkpoints_params_json_named_in_a_refusal_makes_the_checkpoint_the_input() -> None:
    text = ("ValueError: Failed to load mistral 'params.json' config for model org/Some-Model-FP8. Please check if the "
            "model is a mistral-format model and if the config file exists.\n")
    f = next(c for c in _claims(text, "0.9.2") if c.site is not None)
    assert "checkpoint" in f.inputs and "checkpoint" in f.advice
