"""The general rules the twelfth blind batch's first sight asked for (issue 35): what a message tells its reader to
install, a library it calls out of date (before the checkpoint), only vLLM's own flags taken from a message, an
optional import's placeholder is no prompt's, a refusal in a function reading an adapter from disk, the multi-LoRA
kernels, and the environment variables of the component that raised. Real lines from public threads (URL beside
each), none of them a line of the evaluation cases."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.atlas_readers.env_vars import component_env
from bot.core.triage.atlas_readers.named_in_words import installs_named, library_too_old
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def report(lines: list[str], **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text("\n".join(lines)), flags=Flags(**flags))))


def top(r: Report) -> Finding:
    return next(f for f in r.findings if f.severity == "critical")


def test_what_the_message_says_to_install_is_the_fix() -> None:
    # https://github.com/vllm-project/vllm/issues/13452
    f = top(report(["ImportError: please install vllm[video] for video support"]))
    assert "vllm[video]" in f.deps and f.part == "multimodal"
    assert "request" not in f.advice and "pip install 'vllm[video]'" in f.remediation[0]


def test_install_words_name_packages_not_urls_or_pronouns() -> None:
    assert installs_named("pip install git+https://github.com/huggingface/transformers.git") == []
    assert installs_named("Please install it with pip") == []
    assert installs_named("Please install vllm[audio] for audio support") == ["vllm[audio]"]


def test_a_library_out_of_date_comes_before_the_checkpoint() -> None:
    # https://github.com/xorbitsai/inference/issues/4561 (the line as vLLM's ModelConfig re-raised it)
    line = ("Value error, The checkpoint you are trying to load has model type `qwen3_vl` but Transformers does not "
            "recognize this architecture. This could be because of an issue with the checkpoint, or because your "
            "version of Transformers is out of date.")
    assert library_too_old(line) == "transformers"
    f = top(report([line]))
    assert "transformers" in f.deps and "checkpoint" not in f.advice
    # `pip install --upgrade` is the library's command, not a vLLM flag
    assert not any(k in ("--upgrade", "--help") for k in f.knobs)
    assert "transformers" in f.remediation[0]


def test_a_refusal_while_reading_an_adapter_is_the_adapters() -> None:
    # https://github.com/modelscope/ms-swift/issues/5252
    f = top(report(["ERROR 08-05 06:13:35 [core.py:588] ValueError: While loading /root/.cache/modelscope/hub/models/"
                    "swift/test_lora, expected target modules in ['qkv', 'v_proj', 'proj', 'output', 'q_proj', "
                    "'up_proj', 'down_proj', 'gate_proj', 'k_proj'] but received ['language_model.model.layers.0."
                    "self_attn.o_proj']. Please verify that the loaded LoRA module is correct"], vllm_version="0.10.0"))
    assert f.part == "lora" and "checkpoint" in f.advice


def test_the_punica_kernels_are_lora() -> None:
    # https://github.com/vllm-project/vllm/issues/3793
    f = top(report(["RuntimeError: No suitable kernel. h_in=16 h_out=3424 dtype=Float out_dtype=BFloat16"]))
    assert f.part == "lora"


def test_the_component_that_raised_names_its_own_variables() -> None:
    from bot.core.atlas import load_atlas

    fix, names = component_env(load_atlas(), "vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py", None)
    assert names and all(n.startswith("VLLM_NIXL_") for n in names) and "grep -i nixl" in fix[0]
    # a stem many variables share is a family, not one component's settings
    assert component_env(load_atlas(), "vllm/platforms/rocm.py", None) == ([], [])
    assert component_env(load_atlas(), "vllm/utils/__init__.py", None) == ([], [])


def test_a_failure_a_warmup_logged_is_a_note_not_a_failing_server() -> None:
    # https://github.com/vllm-project/vllm/pull/34169 (the run log of a CPU server that went on serving)
    r = report([
        "(APIServer pid=1) INFO 02-11 14:53:03 [serving.py:188] Warming up chat template processing...",
        "(APIServer pid=1) ERROR 02-11 14:53:04 [serving.py:217] Chat template warmup failed",
        "(APIServer pid=1) ERROR 02-11 14:53:04 [serving.py:217] Traceback (most recent call last):",
        "(APIServer pid=1) ERROR 02-11 14:53:04 [serving.py:217]   File \"/opt/venv/lib/python3.12/site-packages/vllm/"
        "entrypoints/openai/chat_completion/serving.py\", line 204, in warmup"])
    assert r.verdict not in ("failing", "degraded")
    assert all(f.severity == "info" for f in r.findings), [(f.id, f.severity) for f in r.findings]
