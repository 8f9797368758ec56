"""The simulated vLLM starts as a real one logs it: each phase's own lines (the forms of
tests/core/test_startup_phases.py's real logs), its SPECOPS_SIM_STARTUP_SECONDS spread across them, and
only the phases the command line asks for (no compile or CUDA graphs with --enforce-eager, no drafter for
ngram or without speculation)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from bot.core.startup import StartupPhases
from tests.sim.test_fake_vllm import TARGET, Sim, http, launch, wait_for, wait_ready

__all__ = ["launch"]  # the fixture, used by name


def phases(sim: Sim) -> list[tuple[str, float]]:
    read = StartupPhases()
    read.feed(sim.log())
    assert read.ready, sim.log()
    return [(t.phase.key, t.seconds) for t in read.times()]


@pytest.mark.parametrize(("argv", "expected"), [
    (["--speculative-config", json.dumps({"method": "mtp", "num_speculative_tokens": 3})],
     ["weights", "drafter", "compile", "kv_cache", "cudagraph", "api"]),
    (["--enforce-eager", "--speculative-config",
      json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4})],
     ["weights", "kv_cache", "api"]),
    ([], ["weights", "compile", "kv_cache", "cudagraph", "api"]),
])
def test_every_phase_the_command_line_asks_for_in_vllms_words(launch: Callable[..., Sim], argv: list[str],
                                                              expected: list[str]) -> None:
    sim = launch("serve", TARGET, *argv, env={"SPECOPS_SIM_STARTUP_SECONDS": "0.3"})
    wait_ready(sim)
    assert [key for key, _ in phases(sim) if key != "start"] == expected


def test_the_startup_time_is_spread_across_the_phases(launch: Callable[..., Sim]) -> None:
    sim = launch("serve", TARGET, "--speculative-config", json.dumps({"method": "mtp", "num_speculative_tokens": 3}),
                 env={"SPECOPS_SIM_STARTUP_SECONDS": "6"})
    wait_for(lambda: http(sim.url("/health"))[0] == 200, 20.0, "/health 200 after a 6 s start")
    times = dict(phases(sim))
    # the weights take the largest share (30%), torch.compile the next (25%): on the log's one-second clock
    assert times["weights"] >= 1 and times["compile"] >= 1
    assert sum(times.values()) == pytest.approx(6, abs=2)
    assert "Loading weights took" in sim.log() and "Graph capturing finished in" in sim.log()
