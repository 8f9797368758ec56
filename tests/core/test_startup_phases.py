"""The phases of a starting vLLM (weights, drafter, torch.compile, KV cache, CUDA graphs, API server), read
from real log lines, each with where it was seen:

- tests/fixtures/startup/real-vllm-0.32.0-cpu-draft-model.log: the whole output of a real `vllm serve` of the
  vLLM 0.32.0 CPU build (tests/support/realvllm.py's tiny models, `draft_model` drafting with the second one),
  2026-12-03, unchanged;
- tests/cases-fresh/vllm-23278-gpt-oss-120b-h100-negative-kv-cache-memory/log.txt (an H100 log of vLLM#23278);
- GPU lines quoted in public threads, in tests/fixtures/startup/ (README.md there names each thread; unchanged
  but for the lines left out).
"""

from __future__ import annotations

from pathlib import Path

from bot.core.startup import StartupHistory, StartupPhases, StartupRun, expectation, summary, waiting_line

ROOT = Path(__file__).resolve().parents[2]
CPU_LOG = ROOT / "tests" / "fixtures" / "startup" / "real-vllm-0.32.0-cpu-draft-model.log"
FIXTURES = ROOT / "tests" / "fixtures" / "startup"
H100_LOG = ROOT / "tests" / "cases-fresh" / "vllm-23278-gpt-oss-120b-h100-negative-kv-cache-memory" / "log.txt"


def phases_of(text: str) -> StartupPhases:
    phases = StartupPhases()
    phases.feed(text)
    return phases


def durations(phases: StartupPhases) -> list[tuple[str, float]]:
    return [(t.phase.key, t.seconds) for t in phases.times()]


def test_the_real_cpu_build_start_from_its_first_line_to_ready() -> None:
    phases = phases_of(CPU_LOG.read_text(encoding="utf-8"))
    # 18:27:04 first line; 18:27:26 "Starting to load model"; the drafter's own weights ("Loading weights took"
    # again, its shards bar) stay the drafter's, and end it at 18:27:26: what follows until "Warming up done."
    # 18:27:58 is the compile's; the KV cache until "init engine … took 35.00 s" 18:28:02; "Starting vLLM
    # server" 18:28:03, then uvicorn's "Application startup complete."
    assert durations(phases) == [("start", 22.0), ("weights", 0.0), ("drafter", 0.0), ("compile", 32.0),
                                 ("kv_cache", 4.0), ("api", 1.0)]
    assert phases.ready and phases.current() is None
    assert summary(phases.times()) == ("start 0:22 · weights 0:00 · drafter 0:00 · compile 0:32 · KV cache 0:04 · "
                                       "API server 0:01")


def test_the_real_cpu_build_mid_start_names_the_phase_and_its_time() -> None:
    lines = CPU_LOG.read_text(encoding="utf-8").splitlines()
    cut = next(i for i, line in enumerate(lines) if "Warming up model for the compilation" in line)
    phases = phases_of("\n".join(lines[: cut + 1]))
    assert phases.current() is not None and phases.current().key == "compile"  # type: ignore[union-attr]
    # the log's clock 12 s after "Warming up model…" (18:27:27): the compile began when the drafter's weights
    # were loaded (18:27:26), 13 s ago
    shown = waiting_line(phases, phases.last_stamp + 12, None, 40.0)  # type: ignore[operator]
    assert shown == "now: torch.compile 0:13 (after start 0:22 · weights 0:00 · drafter 0:00)"


def test_an_h100_log_with_the_older_wording() -> None:
    """vLLM#23278's log: "Model loading took 65.9651 GiB and 12.8 seconds", "torch.compile takes 5.55 s in
    total" (the older verb), "Available KV cache memory: -2.14 GiB"."""
    phases = phases_of(H100_LOG.read_text(encoding="utf-8"))
    # the excerpt begins after the weights' first line: 18:04:08 .. cache directory 18:04:16 .. 18:04:21 .. 18:04:22
    assert durations(phases) == [("start", 8.0), ("compile", 5.0), ("kv_cache", 1.0)]
    assert not phases.ready


def test_weights_then_the_drafter_whose_own_shards_stay_the_drafters() -> None:
    """vllm-project/vllm#49011 (turn 13): fastsafetensors shards, then `Loading drafter model...`."""
    log = (FIXTURES / "vllm-49011-weights-then-drafter.log").read_text(encoding="utf-8")
    phases = phases_of(log)
    assert [t.phase.key for t in phases.times()] == ["weights", "drafter"]
    assert phases.current() is not None and phases.current().key == "drafter"  # type: ignore[union-attr]


def test_torch_compile_then_profiling_and_the_kv_cache() -> None:
    """vllm-project/vllm#39559: the compile cache, `torch.compile took`, then CUDA-graph memory profiling and
    the KV cache size."""
    log = (FIXTURES / "vllm-39559-compile-then-kv-cache.log").read_text(encoding="utf-8")
    phases = phases_of(log)
    # compile from its first line to `torch.compile took`; the profiling run after it is the KV cache's
    assert durations(phases) == [("compile", 1.0), ("kv_cache", 2.0)]


def test_cuda_graphs_captured_before_the_kv_cache_is_sized() -> None:
    """aivrar/vllm-windows-build#17 (the V2 model runner): the capture bars come before `Available KV cache
    memory`, so the order is not fixed — each phase is entered once, whichever comes first."""
    log = (FIXTURES / "vllm-windows-build-17-cuda-graphs-first.log").read_text(encoding="utf-8")
    phases = phases_of(log)
    assert durations(phases) == [("start", 2.0), ("cudagraph", 4.0), ("kv_cache", 1.0)]


def test_an_eagle_heads_compile_after_profiling_does_not_go_back() -> None:
    """noonghunna/club-3090#142 (EAGLE, 2x 3090): the backbone's compile ends, a minute of profiling, then
    the EAGLE head's compile cache line: the phase is not entered again; the time since the backbone's
    compile ended waits for the next phase to begin."""
    log = (FIXTURES / "club-3090-142-eagle-head-compile.log").read_text(encoding="utf-8")
    phases = phases_of(log)
    assert [t.phase.key for t in phases.times()] == ["compile"]
    assert phases.between() == 57.0
    assert waiting_line(phases, None, None, 90.0) == "now: after compile 0:57 (compile 0:00)"


def test_a_progress_bar_mid_way_begins_its_phase() -> None:
    """LMCache/LMCache#2522: `Capturing CUDA graphs (decode, FULL):   8%|…` redrawn with \\r, its line not
    ended yet; the KV cache lines before it are vllm-project/vllm#30515's."""
    whole, _, bar = (FIXTURES / "vllm-30515-lmcache-2522-kv-cache-then-a-bar.log").read_text(
        encoding="utf-8").rpartition("\n")
    phases = phases_of(whole)
    assert phases.current() is not None and phases.current().key == "kv_cache"  # type: ignore[union-attr]
    phases.peek(bar)  # the last line, not ended: the bar is still being drawn
    assert phases.current() is not None and phases.current().key == "cudagraph"  # type: ignore[union-attr]


def test_the_estimate_from_earlier_starts() -> None:
    one = StartupHistory((StartupRun(130.0, (("start", 20.0), ("weights", 41.0), ("compile", 50.0))),))
    assert expectation(one, phases_of("").current(), 0.0) == "expected ready in ~2 min"
    phases = phases_of("(EngineCore_DP0 pid=1) INFO 05-06 20:59:30 [gpu_model_runner.py:1] Starting to load "
                       "model /m...\n")
    assert waiting_line(phases, None, one, 25.0) == ("now: loading weights 0:00 · weights took 41 s last time; "
                                                      "expected ready in ~2 min")
    three = StartupHistory(tuple(StartupRun(r, (("weights", w),)) for r, w in ((100.0, 30.0), (60.0, 10.0),
                                                                               (70.0, 20.0))))
    assert three.phase_seconds("weights") == 20.0 and three.ready_seconds() == 70.0
    assert expectation(three, phases.current(), 65.0) == ("weights took 20 s (median of the last 3 starts); "
                                                          "expected ready in ~5 s")
    assert expectation(three, phases.current(), 80.0) == ("weights took 20 s (median of the last 3 starts); "
                                                          "slower than before (ready after 1:10 (median of the "
                                                          "last 3 starts))")
    assert expectation(StartupHistory(()), phases.current(), 1.0) is None
    quick = StartupHistory((StartupRun(9.0, (("weights", 0.0),)), StartupRun(8.0, (("weights", 1.0),))))
    assert expectation(quick, phases.current(), 2.0) == ("weights took under 1 s (median of the last 2 starts); "
                                                         "expected ready in ~6 s")


def test_a_run_is_what_the_store_keeps() -> None:
    phases = phases_of(CPU_LOG.read_text(encoding="utf-8"))
    run = phases.run(60.5)
    assert run.ready_seconds == 60.5
    assert run.phases == (("start", 22.0), ("weights", 0.0), ("drafter", 0.0), ("compile", 32.0), ("kv_cache", 4.0),
                          ("api", 1.0))


def test_the_start_phase_covers_the_silent_imports_before_the_first_line() -> None:
    """The wait knows when the server was started; its first lines come ~10 s later (Python imports)."""
    text = CPU_LOG.read_text(encoding="utf-8")
    phases = phases_of(text)
    first = phases.spans[0].start
    phases.launched(first - 9)  # started 9 s before its first line (18:27:04)
    assert durations(phases)[0] == ("start", 31.0)
    phases.launched(first + 5)  # a later moment changes nothing: the first line was logged after the start
    assert durations(phases)[0] == ("start", 31.0)
    cut = phases_of("\n".join(line for line in text.splitlines() if "Starting to load model" in line))
    cut.launched(cut.spans[0].start - 20)  # a log whose first line is a phase's: the start before it is added
    assert [k for k, _ in durations(cut)] == ["start", "weights"] and durations(cut)[0] == ("start", 20.0)
