"""vLLM's process-wide distributed state found already set up: `data parallel group is already initialized`,
`torch.distributed is already initialized but the torch world size does not match …`. vLLM keeps its parallel
groups in module globals of `parallel_state.py` and checks each is unset before it builds it; within one process
they are set by the first engine. Finding one set means this process built an engine before (a second `LLM` in one
program, a notebook cell run again) or another framework initialized torch.distributed first."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

ADVICE = ("This process already holds vLLM's parallel state from an engine it built before: a second `LLM` (or "
          "engine) in one program, a notebook cell run again, or a framework that set up torch.distributed first. "
          "Build one engine per process — reuse the first, or run each in its own process; to replace one in place, "
          "delete it and call `vllm.distributed.parallel_state.destroy_model_parallel()` and "
          "`destroy_distributed_environment()` before building the next.")

DEFECT = "Nothing this names is yours to set"
# where vLLM sets up its process-wide distributed state (parallel_state.py; V0's workers' init_distributed_environment)
_STATE_FILES = frozenset({"parallel_state.py", "worker.py", "hpu_worker.py", "xpu_worker.py", "neuron_worker.py"})


def second_engine(st: State) -> None:
    for f in st.findings:
        site = f.site
        if site is None or site.package != "vllm" or site.file.rsplit("/", 1)[-1] not in _STATE_FILES \
                or "already initialized" not in f.title or f.severity == "info":
            continue
        # the program's, not a defect of the release: the upgrade the default reading offered does not apply
        f.remediation = [ADVICE, *(r for r in f.remediation if r != ADVICE and not r.startswith(DEFECT))]
        f.owner = "user-script"
        f.advice = [*(a for a in f.advice if a != "upgrade"), "fix-script"] if "fix-script" not in f.advice \
            else f.advice
