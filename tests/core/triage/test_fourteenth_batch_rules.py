"""The general rules the fourteenth blind batch's first sight asked for (issue 35): a fallback notice is a note; a
prompt the scheduler refused stays current after the server serves on; a model vLLM started for generation among
pooling tasks, whose weights then do not fit, names the task; the interpreter's own words never place a site at
high confidence; a CUTLASS entry point without code for the device's capability is the build's. Lines as vLLM
prints them (the source beside each), none of them a line of the evaluation cases."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings


def report(lines: list[str], **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text("\n".join(lines)), flags=Flags(**flags))))


def test_a_fallback_notice_is_a_note_not_a_degraded_server() -> None:
    # vLLM's own warning (https://github.com/vllm-project/vllm/blob/v0.11.2/vllm/config/model.py) while serving
    r = report(["INFO 10-02 09:00:01 [async_llm.py:273] Added request chatcmpl-3f2a9c1d5e.",
                "WARNING 10-02 09:00:01 [model.py:600] This model does not support `--mm-encoder-tp-mode data`. "
                "Falling back to `--mm-encoder-tp-mode weights`."])
    assert r.verdict == "healthy"
    assert any("fallback notice" in n for n in r.notes)


def test_a_refused_prompt_stays_current_after_the_server_serves_on() -> None:
    # the V0 scheduler refusal as vLLM 0.5.5 words it
    # (https://github.com/vllm-project/vllm/blob/v0.5.5/vllm/core/scheduler.py), then a stats line of the same engine
    r = report(["WARNING 08-20 10:01:02 scheduler.py:895] Input prompt (5000 tokens) is too long and exceeds limit "
                "of 4096",
                "INFO 08-20 10:01:05 metrics.py:406] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
                "12.1 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.3%, CPU KV "
                "cache usage: 0.0%."])
    refused = next(f for f in r.findings if "too long" in f.title)
    assert refused.severity == "warning" and "request" in refused.inputs and r.verdict == "degraded"


def test_a_pooling_model_started_for_generation_names_the_task() -> None:
    # the task line as vLLM 0.8.3 printed it (https://github.com/vllm-project/vllm/issues/25802), then the weight
    # loader's refusal in vLLM's words (AutoWeightsLoader._load_module,
    # https://github.com/vllm-project/vllm/blob/v0.8.5.post1/vllm/model_executor/models/utils.py)
    r = report(["INFO 09-27 11:06:29 [config.py:600] This model supports multiple tasks: {'generate', 'reward', "
                "'score', 'embed', 'classify'}. Defaulting to 'generate'.",
                "ValueError: There is no module or parameter named 'norm' in Qwen3ForCausalLM"],
               vllm_version="0.8.5")
    task = next(f for f in r.findings if f.id == "pooling-model-started-for-generation")
    assert task.inputs == ["--task"] and task.knobs == ["--task"] and task.confidence == "medium"
    assert "--task embed" in task.remediation[0] and "--runner" not in task.remediation[0]  # 0.8.5 has no --runner
    assert not any("checkpoint" in f.advice for f in r.findings if f.severity == "critical")
    # the same failure with no task line: nothing said of the task
    alone = report(["ValueError: There is no module or parameter named 'norm' in Qwen3ForCausalLM"])
    assert not any(f.id == "pooling-model-started-for-generation" for f in alone.findings)


def test_the_interpreters_words_place_no_site_at_high_confidence() -> None:
    # a reporter's summary quoting the exception (https://github.com/vllm-project/vllm-ascend/issues/9024's shape)
    r = report(["- error: IndexError: list index out of range"])
    assert not any(f.confidence == "high" for f in r.findings if f.severity in ("critical", "warning"))


def test_a_cutlass_entry_point_without_code_for_the_device_is_the_builds() -> None:
    # vLLM's CUTLASS entry point words (csrc/quantization/w8a8/cutlass/scaled_mm_entry.cu), on one line
    r = report(["NotImplementedError: No compiled cutlass_scaled_mm for a compute capability less than CUDA device "
                "capability: 120"])
    f = next(f for f in r.findings if f.severity == "critical")
    assert f.id == "gpu-not-in-kernel-build" and "sm_120" in f.title and f.inputs == ["gpu"]
    assert f.site is not None and "scaled_mm_entry.cu" in f.site.file and "upgrade" in f.advice
