"""Rules from the forty-sixth batch's misses, general: a paste whose escape bytes a decoder replaced; the switch of
the part that raised when the traceback is cut above it, named for the release the frames' code lines fit; a cut
traceback's last line building a class of vLLM's; a structured-output backend failing on the grammar a request
sent; CUDA graphs captured for smaller steps than asked; two NCCL ranks on one GPU; an out-of-tree override that
does not take what vLLM passes; another package importing a name vLLM no longer has; a constructor's own words for a
keyword it does not take."""

from __future__ import annotations

from bot.core.history import load_history
from bot.core.lines import without_colour
from bot.core.logparse import parse_text
from bot.core.report import build_report
from bot.core.triage import diagnose
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from tests.core.triage.reports import claims_of, report_of

_PREFIX = "(EngineCore_0 pid=7) ERROR 05-02 10:00:00 [core.py:700] "
_SITE = "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py"
_ENGINE_FRAMES = "".join(_PREFIX + line + "\n" for line in (
    "EngineCore failed to start.",
    "Traceback (most recent call last):",
    f'  File "{_SITE}", line 690, in run_engine_core',
    "    engine_core = EngineCoreProc(*args, **kwargs)",
    f'  File "{_SITE}", line 500, in __init__',
    "    super().__init__(vllm_config, executor_class, log_stats,"))


def test_colour_codes_whose_escape_byte_a_decoder_replaced_are_removed() -> None:
    line = "\ufffd[1;36m(EngineCore_0 pid=5)\ufffd[0;0m INFO 01-01 00:00:00 [core.py:1] started"
    assert without_colour(line) == "(EngineCore_0 pid=5) INFO 01-01 00:00:00 [core.py:1] started"


def test_the_frames_code_lines_say_which_releases_a_log_without_its_release_comes_from() -> None:
    hist = load_history()
    assert hist is not None
    lines = [("vllm/v1/engine/core.py", "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
             ("vllm/v1/engine/core.py", "__init__", "super().__init__(vllm_config, executor_class, log_stats,")]
    fit = hist.releases_fitting(lines)
    assert fit and fit[-1] != hist.releases[-1]
    assert set(fit) <= set(hist.releases_fitting(lines[:1]))
    assert hist.releases_fitting([("vllm/v1/engine/core.py", "__init__", "no such line at all")]) == []


def test_a_check_of_an_attention_backend_below_cut_engine_frames_gets_the_backend_switch_of_their_release() -> None:
    text = _ENGINE_FRAMES + ("ValueError: Head size 80 is not supported by FlashAttention. Supported head sizes are: "
                             "[32, 64, 96, 128, 160, 192, 224, 256].\n")
    report = report_of(text)
    first = report.plan[0] if report.plan else ""
    assert "VLLM_ATTENTION_BACKEND" in first and "VLLM_USE_V1" not in first, report.plan
    # told the release, the switch is that release's
    newer = report_of(text, version="0.20.1")
    assert newer.plan and "--attention-backend" in newer.plan[0], newer.plan


def test_a_cut_traceback_whose_last_line_builds_a_class_of_vllms_is_in_that_class_part() -> None:
    text = _ENGINE_FRAMES.replace("super().__init__(vllm_config, executor_class, log_stats,",
                                  "self.kv_cache_manager = KVCacheManager(")
    framed = [f for f in claims_of(text) if f.id.startswith("atlas-frame:")]
    assert framed and framed[0].part == "kv-cache", [(f.id, f.part) for f in claims_of(text)]


def test_a_backend_failing_to_compile_a_requests_grammar_is_that_requests_and_a_manager_start_is_not() -> None:
    site = "/opt/venv/lib/python3.12/site-packages"
    frames = f"""\
Traceback (most recent call last):
  File "{site}/vllm/v1/structured_output/__init__.py", line 120, in _async_create_grammar
    return self.backend.compile_grammar(request_type, grammar_spec)
  File "{site}/vllm/v1/structured_output/backend_guidance.py", line 90, in compile_grammar
    ll_matcher = llguidance.LLMatcher(self.ll_tokenizer, grammar_spec)
  File "{site}/llguidance/_lib.py", line 40, in __init__
    raise ValueError(err)
ValueError: grammar has no rules
"""
    claims = claims_of(frames)
    assert any("request" in f.inputs and "request" in f.advice for f in claims), [(f.id, f.inputs) for f in claims]
    start = frames.replace("_async_create_grammar", "__init__").replace("compile_grammar", "__init__")
    assert not any("request" in f.inputs for f in claims_of(start))


def test_a_capture_size_vllm_lowered_costs_cuda_graphs_above_it() -> None:
    line = "WARNING 03-01 08:00:00 [vllm.py:1800] Truncating max_cudagraph_capture_size to 24\n"
    with_k = build_report(diagnose(Readings(parsed=parse_text(line), flags=Flags(num_speculative_tokens=5))))
    spec = [f for f in with_k.findings if f.id == "cudagraph-capture-size-truncated"]
    plain = [f for f in claims_of(line) if f.id == "cudagraph-capture-size-truncated"]
    assert plain and plain[0].confidence == "low" and "--max-cudagraph-capture-size" in plain[0].inputs
    assert "--compilation-config" in plain[0].knobs
    # low even with k: the line proves how far the graphs reach, not that the batches served go past it
    assert spec and spec[0].confidence == "low" and "at most 4 request(s)" in spec[0].summary
    assert not any(f.id == "cudagraph-capture-size-truncated"
                   for f in claims_of("WARNING 03-01 08:00:00 [vllm.py:1800] Capturing CUDA graphs up to 512\n"))


def test_nccl_invalid_usage_and_a_duplicate_gpu_name_the_devices_each_rank_sees() -> None:
    usage = claims_of("RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)\n")
    assert any("device-visibility" in f.host for f in usage), [(f.id, f.host) for f in usage]
    dup = claims_of("node1:77:77 [1] init.cc:900 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA "
                    "device 1a000\nRuntimeError: NCCL error: invalid usage\n")
    assert any("device-visibility" in f.host for f in dup)


def test_an_out_of_tree_override_refusing_a_keyword_vllm_passes_is_the_plugins() -> None:
    claims = claims_of("TypeError: AcmeClusterExecutor.execute_model() got an unexpected keyword argument "
                       "'non_block'\n")
    found = [f for f in claims if f.id.startswith("foreign-signature:")]
    assert found and found[0].owner == "plugin" and found[0].part == "parallel"
    assert {"pin", "disable-plugin"} <= set(found[0].advice) and "non_block" in found[0].inputs
    # a class of vLLM's own is no foreign override
    assert not any(f.id.startswith("foreign-signature:") for f in claims_of(
        "TypeError: MultiprocExecutor.execute_model() got an unexpected keyword argument 'non_block'\n"))


def test_another_package_importing_a_name_vllm_dropped_is_that_packages_age() -> None:
    text = """\
Traceback (most recent call last):
  File "/srv/env/lib/python3.11/site-packages/acme_rollout/engine.py", line 12, in <module>
    from vllm.outputs import RequestOutputFactory
ImportError: cannot import name 'RequestOutputFactory' from 'vllm.outputs' (/srv/env/vllm/outputs.py)
"""
    found = [f for f in claims_of(text, version="0.20.1") if f.id.startswith("stale-import:")]
    assert found and "pin" in found[0].advice and "acme_rollout" in found[0].deps
    assert "0.10.2" in found[0].remediation[0]
    # the release that has it: not the caller's age
    assert not any(f.id.startswith("stale-import:") for f in claims_of(text, version="0.6.3"))


def test_a_constructors_own_words_for_a_keyword_place_no_site_and_name_the_keyword() -> None:
    claims = claims_of("TypeError: Unexpected keyword argument 'prompt_adapter_request'\n")
    assert not any(f.confidence == "high" for f in claims), [(f.id, f.confidence) for f in claims]
    words = [f for f in claims if f.id.startswith("words:")]
    assert words and "prompt_adapter_request" in words[0].inputs and "fix-script" in words[0].advice
    assert words[0].part is None


def test_a_programs_requirement_of_a_vllm_range_is_the_programs_and_says_which_way_to_move() -> None:
    words = "vllm>=0.9.0,<=0.10.1 is required for a normal functioning of this module, but found vllm=={}."
    newer = claims_of(f"ImportError: {words.format('0.11.2')} To fix: set `SKIP_VLLM_CHECK=1` to skip this check.\n")
    found = [f for f in newer if f.id == "vllm-range-required"]
    assert found and found[0].owner == "other" and found[0].advice == ["pin"] and found[0].knobs == ["SKIP_VLLM_CHECK"]
    assert not any(f.owner == "transformers" for f in newer)  # transformers' utility's words, not its requirement
    older = [f for f in claims_of(f"ImportError: {words.format('0.8.5')}\n") if f.id == "vllm-range-required"]
    assert older and older[0].advice == ["upgrade"]
    # another package's requirement stays what it was
    assert not any(f.id == "vllm-range-required" for f in claims_of(
        "ImportError: tokenizers>=0.19,<0.20 is required for a normal functioning of this module, but found "
        "tokenizers==0.21.0.\n"))


def test_nan_in_a_response_is_a_numerical_fault_and_with_a_drafter_the_drafter_is_ruled_out_first() -> None:
    body = 'HTTP 500 {"error": {"message": "Out of range float values are not JSON compliant: inf"}}\n'
    plain = [f for f in claims_of(body) if f.id == "nonfinite-output"]
    assert plain and plain[0].severity == "warning" and plain[0].part is None and "--dtype" in plain[0].knobs
    spec = build_report(diagnose(Readings(parsed=parse_text(body), flags=Flags(num_speculative_tokens=4))))
    found = [f for f in spec.findings if f.id == "nonfinite-output"]
    assert spec.verdict == "degraded" and found and found[0].part == "drafter"
    assert "--speculative-config" in found[0].knobs
