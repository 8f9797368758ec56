"""A model vLLM started for generation although it also serves pooling tasks, whose weights then do not fit the
causal LM it built: the task (the runner) is the input at fault, not the checkpoint.

vLLM prints the tasks a model supports and the one it chose (`This model supports multiple tasks: {'embed',
'generate', …}. Defaulting to 'generate'.`); an embedding checkpoint of a decoder architecture (its tensors without
the causal LM's prefix or head) loaded that way fails in the weight loader (`There is no module or parameter named
'embed_tokens' in Qwen3ForCausalLM`). The fix is to say the task: `--task embed` (vLLM 0.6.6–0.12.0), `--runner
pooling` with `--convert embed` (0.10.2 on), as the atlas's flag spans say."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.evidence import latest_launch, position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

_CHOSEN = re.compile(r"supports multiple tasks: \{(?P<tasks>[^}]{1,200})\}\. Defaulting to '(?P<task>\w+)'")
_POOLING = ("embed", "embedding", "classify", "score", "reward")
_SOURCE = "https://github.com/vllm-project/vllm/blob/v0.9.2/vllm/config.py"
_RUNNER_SOURCE = "https://github.com/vllm-project/vllm/blob/v0.11.2/vllm/config/model.py"


def pooling_model_as_generator(st: State) -> None:
    """Add the task as the input when the latest launch chose 'generate' among pooling tasks and then failed
    loading the weights; the loader's finding no longer advises another checkpoint."""
    parsed = st.ev.parsed
    start = latest_launch(parsed)
    chosen = next((c for c in reversed(parsed.clues) if c.kind == "progress" and position(c.origin) >= start
                   and (m := _CHOSEN.search(c.origin.text or "")) and m["task"] == "generate"), None)
    if chosen is None:
        return
    hit = _CHOSEN.search(chosen.origin.text or "")
    assert hit is not None
    pooling = [t for t in re.findall(r"'(\w+)'", hit["tasks"]) if t in _POOLING]
    loaders = [f for f in st.findings if f.severity == "critical" and f.part == "model-loading"
               and (f.at is None or f.at > position(chosen.origin))]
    if not pooling or not loaders:
        return
    knobs, how = _task_flags(st.ev.context.vllm_version)
    for f in loaders:
        f.advice = [a for a in f.advice if a != "checkpoint"]
    st.findings.append(Finding(
        id="pooling-model-started-for-generation",
        title=f"The model was started for generation, and its weights do not fit: it also serves {', '.join(pooling)}",
        severity="critical", confidence="medium",
        summary=(f"vLLM chose the 'generate' task (`{hit.group(0)}`) and built the causal LM; loading the weights into "
                 "it then failed. A checkpoint made for embedding, scoring or classification (the decoder's tensors "
                 "without the causal LM's prefix or head) fails that way: the task is the input, not the checkpoint."),
        evidence=[f"{chosen.origin.where()}: {chosen.origin.text}"],
        remediation=[how, "If the model is meant to generate, the checkpoint is another model's: check its card."],
        sources=[_SOURCE, _RUNNER_SOURCE], priority=30, part="config", inputs=knobs[:1], knobs=knobs))


def _task_flags(version: str | None) -> tuple[list[str], str]:
    """The flags that choose a pooling task on this release (the atlas's spans), and the sentence saying so."""
    from bot.core.atlas import load_atlas
    from bot.core.triage.atlas_readers.releases import newer

    atlas = load_atlas()
    task, runner = atlas.flag_span("--task"), atlas.flag_span("--runner")
    has_task = task is not None and (version is None or not (newer(task[0], version) or newer(version, task[1])))
    has_runner = runner is not None and (version is None or not newer(runner[0], version))
    knobs: list[str] = []
    said: list[str] = []
    if has_task and task is not None:
        knobs.append("--task")
        said.append(f"`--task embed` (or classify, score, reward; vLLM {task[0]}–{task[1]})")
    if has_runner and runner is not None:
        knobs += ["--runner", "--convert"]
        said.append(f"`--runner pooling` with `--convert embed` (or classify; vLLM {runner[0]} on)")
    return knobs, "Start it for the task its weights were made for: " + " or ".join(said) + "."
