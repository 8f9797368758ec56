"""The general rules the thirteenth blind batch's first sight asked for (issue 35): a traceback cut before its
exception line, read from the `raise` under its last frame; argparse's refused choice (a slip of a listed value,
or a value of another release); bitsandbytes' quantization state in a checkpoint; pytest's report of a failure;
a crash inside Ray under vLLM's Ray executor; a start that crashed after reusing the compile cache; the engine
taking a request in as serving. Lines as vLLM and Python print them (the source beside each), none of them a line
of the evaluation cases."""

from __future__ import annotations

from bot.core.logparse import parse_text
from bot.core.report import Report, build_report
from bot.core.triage import diagnose
from bot.core.triage.atlas_readers.cut_raise import raised_sentence
from bot.core.triage.context import Flags
from bot.core.triage.evidence import Readings
from bot.core.triage.findings import Finding


def report(lines: list[str], **flags: object) -> Report:
    return build_report(diagnose(Readings(parsed=parse_text("\n".join(lines)), flags=Flags(**flags))))


def critical(r: Report) -> list[Finding]:
    return [f for f in r.findings if f.severity == "critical"]


# vLLM 0.10.2's MPClient.__init__ (https://github.com/vllm-project/vllm/blob/v0.10.2/vllm/v1/engine/core_client.py#L496),
# as Python prints the frame; the exception line itself is not in the paste
CUT_TIMEOUT = [
    '  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core_client.py", line 496, in __init__',
    '    raise TimeoutError("Timed out waiting for engines to send"',
]


def test_the_raise_under_the_last_frame_opens_the_sentence() -> None:
    assert raised_sentence('    raise TimeoutError("Timed out waiting for engines to send"') == (
        "TimeoutError", "Timed out waiting for engines to send")
    assert raised_sentence('    raise ValueError(f"{x} is bad")') is None  # a hole first: nothing to read
    assert raised_sentence("    raise") is None and raised_sentence("    return x") is None


def test_a_cut_traceback_is_placed_at_the_check_its_raise_opens() -> None:
    f = next(f for f in critical(report(CUT_TIMEOUT)) if f.site is not None)
    assert f.site.file == "vllm/v1/engine/core_client.py" and f.confidence == "medium"
    assert "Timed out waiting for engines" in f.title and "cut" in f.title
    # the release's check waits a constant; a later release's reads a variable: name it, with the upgrade
    assert "VLLM_ENGINE_READY_TIMEOUT_S" in f.knobs and "upgrade" in f.advice
    assert f.remediation[0].startswith("From vLLM 0.14.1 this check reads `VLLM_ENGINE_READY_TIMEOUT_S`")
    assert f.switch is None  # the check's own setting comes before turning the engine off


def test_a_cut_wrapper_stays_unsure() -> None:
    # vLLM 0.11.0's wait_for_engine_startup (https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/engine/utils.py):
    # a sentence that says a failure happened elsewhere ("See root cause above") names no cause
    r = report(['  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", line 785, in '
                'wait_for_engine_startup',
                '    raise RuntimeError("Engine core initialization failed. "'])
    placed = [f for f in critical(r) if f.site is not None]
    assert placed and all(f.confidence == "low" for f in placed)


def test_a_value_argparse_refused_is_a_slip_or_another_releases() -> None:
    # argparse's own words (Lib/argparse.py `_check_value`) for vLLM 0.6.x's --kv-cache-dtype choices
    slip = critical(report(["vllm serve: error: argument --kv-cache-dtype: invalid choice: 'fp8_e4m3fn' "
                            "(choose from 'auto', 'fp8', 'fp8_e5m2', 'fp8_e4m3')"]))[0]
    assert slip.inputs == ["--kv-cache-dtype"] and "upgrade" not in slip.advice
    assert "close to `fp8_e4m3`" in slip.remediation[0]
    other = critical(report(["vllm serve: error: argument --distributed-executor-backend: invalid choice: "
                             "'external_launcher' (choose from 'ray', 'mp')"]))[0]
    assert other.inputs == ["--distributed-executor-backend"] and "upgrade" in other.advice
    assert "nor a slip of one" in other.remediation[0]


def test_bitsandbytes_state_in_a_checkpoint_asks_for_the_bnb_flags() -> None:
    # https://github.com/vllm-project/vllm/issues/11725 (the traceback's last line: Python's KeyError of the key)
    f = critical(report(["KeyError: 'layers.17.mlp.down_proj.weight.absmax'"]))[0]
    assert f.part == "quantization" and {"--quantization", "--load-format"} <= set(f.knobs)
    assert "bitsandbytes" in f.remediation[0] and f.confidence == "medium"
    assert any("docs.vllm.ai" in s for s in f.sources)


def test_pytests_report_is_a_traceback() -> None:
    # pytest's long report (the `E` gutter, then `path:line: Exception`) of vLLM 0.12.0's own assert in
    # Scheduler._preempt_request (https://github.com/vllm-project/vllm/blob/v0.12.0/vllm/v1/core/sched/scheduler.py#L759)
    r = report(["E       AssertionError: Only running requests can be preempted",
                "vllm/v1/core/sched/scheduler.py:759: AssertionError"], vllm_version="0.12.0")
    f = critical(r)[0]
    assert r.verdict == "failing" and f.part == "scheduler" and f.owner == "vllm"
    assert f.site is not None and f.site.function == "Scheduler._preempt_request"
    assert "None" not in f.title and "in `None`" not in " ".join(f.evidence)
    # without the words the atlas holds, the place pytest names still says whose code and which part
    g = critical(report(["E       AssertionError", "vllm/v1/core/sched/scheduler.py:759: AssertionError"]))[0]
    assert g.part == "scheduler" and "None" not in g.title


def test_a_crash_inside_ray_is_the_ray_executors() -> None:
    # https://github.com/vllm-project/vllm/issues/29076 (the traceback's Ray frames; its exception line not kept)
    r = report([
        "(EngineCore_DP0 pid=1553) ERROR 11-20 06:17:57 [core.py:710] EngineCore encountered a fatal error.",
        "(EngineCore_DP0 pid=1553) ERROR 11-20 06:17:57 [core.py:710] Traceback (most recent call last):",
        '(EngineCore_DP0 pid=1553) ERROR 11-20 06:17:57 [core.py:710]   File "/usr/local/lib/python3.12/dist-packages/'
        'ray/dag/compiled_dag_node.py", line 2525, in _execute_until',
        "(EngineCore_DP0 pid=1553) ERROR 11-20 06:17:57 [core.py:710]     result = self._dag_output_fetcher.read("
        "timeout)",
        '(EngineCore_DP0 pid=1553) ERROR 11-20 06:17:57 [core.py:710]   File "/usr/local/lib/python3.12/dist-packages/'
        'ray/experimental/channel/common.py", line 312, in read',
        "(EngineCore_DP0 pid=1553) ERROR 11-20 06:17:57 [core.py:710]     outputs = self._read_list(timeout)",
    ])
    ray = next(f for f in critical(r) if f.owner == "ray")
    assert ray.part == "parallel" and "--distributed-executor-backend" in ray.knobs
    assert r.plan and "--distributed-executor-backend mp" in r.plan[0]
    # "EngineCore encountered a fatal error" says a failure happened; it names no cause
    assert not any(f.confidence == "high" and f.severity in ("critical", "warning") for f in r.findings)


# https://github.com/vllm-project/vllm/issues/19596's startup lines, and a start that reused the cache
_CACHED = "INFO 06-13 11:36:41 [backends.py:115] Directly load the compiled graph(s) for shape None from the cache, " \
          "took 1.203 s"
_CRASH = ["ERROR 06-13 11:37:08 [core.py:515] EngineCore failed to start.",
          "ERROR 06-13 11:37:08 [core.py:515] Traceback (most recent call last):",
          'ERROR 06-13 11:37:08 [core.py:515]   File "/home/doit/AI/vllm/vllm/v1/engine/core.py", line 83, in __init__',
          "ERROR 06-13 11:37:08 [core.py:515]     self._initialize_kv_caches(vllm_config)"]


def test_a_start_that_crashed_after_reusing_the_compile_cache_switches_it_off() -> None:
    r = report([_CACHED, *_CRASH])
    f = next(f for f in r.findings if f.id == "compile-cache-then-crash")
    assert f.part == "compilation" and f.confidence == "low" and "VLLM_DISABLE_COMPILE_CACHE" in f.knobs
    assert r.plan and "VLLM_DISABLE_COMPILE_CACHE=1" in r.plan[0]


def test_no_cache_candidate_without_a_cache_load_or_after_serving() -> None:
    assert not any(f.id == "compile-cache-then-crash" for f in report(_CRASH).findings)
    served = [_CACHED, "INFO 06-13 11:37:01 [launcher.py:37] Application startup complete.", *_CRASH]
    assert not any(f.id == "compile-cache-then-crash" for f in report(served).findings)


def test_the_engine_taking_a_request_in_is_serving() -> None:
    # https://github.com/vllm-project/vllm/issues/16692 (vLLM 0.8.4's engine logs each request it adds)
    r = report(["INFO 04-16 10:35:13 [async_llm.py:228] Added request chatcmpl-8f878979543841479d089e13a1da85f4.",
                "INFO 04-16 10:35:13 [ray_distributed_executor.py:578] RAY_CGRAPH_get_timeout is set to 300"])
    assert r.verdict == "healthy"
