"""`KeyError: 'full_attention'`: a model's layer type, read from the config's `layer_types`, that this vLLM's code for
the model has no entry for. transformers names the layer types a config holds (`full_attention`,
`sliding_attention`, `linear_attention`, …) and renames or rewrites them between its releases when it loads a config;
vLLM's model code maps the names of the transformers it was made for. A newer transformers (or a checkpoint whose
config uses newer names) meets an older vLLM's map: upgrade vLLM, or install the transformers that release pins."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.candidates import traceback_frames
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.atlas_readers.same_line import step_back
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# the layer types transformers' configs name (`layer_types`), as a KeyError quotes them
_LAYER_TYPE = re.compile(r"^'(?P<name>(?:full|sliding|linear|chunked|hybrid|global|local)_attention|mamba2?|"
                         r"attention|conv|recurrent|moe)'$")
SOURCES = ("https://github.com/huggingface/transformers/blob/main/src/transformers/configuration_utils.py",)


def layer_types(st: State) -> None:
    if any(f.id == "layer-type-unknown" for f in st.findings):
        return
    for line in st.ev.parsed.problems:
        hit = _LAYER_TYPE.match(line.message.strip()) if line.exception == "KeyError" else None
        if hit is None:
            continue
        frames = traceback_frames(st.ev.parsed.problems, line)
        if frames and not any("model_executor/models/" in (f.frame_file or "") for f in frames):
            continue  # raised elsewhere than a model's code: another mapping
        if not frames and "_" not in hit["name"]:
            continue  # a bare `'attention'` or `'moe'` is any mapping's key: only a model's frame says it is this
        at = position(line.origin)
        step_back(st, at, lambda f: f.id.startswith("words:KeyError"))  # the bare key's generic reading
        st.findings.append(Finding(
            id="layer-type-unknown", severity="critical", confidence="medium" if frames else "low",
            title=f"The model's code has no entry for the layer type `{hit['name']}` its config names",
            summary=("vLLM's code for this model maps the layer types of the transformers release it was made for; "
                     f"the config (as the installed transformers loaded it) names `{hit['name']}`, which it does "
                     "not know — transformers renamed or rewrote the config's `layer_types`, or the checkpoint uses "
                     "newer names."),
            evidence=[quoted(line)],
            remediation=["Upgrade vLLM to a release whose model code knows the name (and the transformers it pins), "
                         "or install the transformers release this vLLM pins (`pip show vllm` lists its "
                         "requirement)."],
            sources=list(SOURCES), priority=36, part="models", owner="transformers" if frames else None,
            inputs=["layer_types"],
            deps=["transformers"], advice=["upgrade"], at=at, level=line.origin.level or "EXCEPTION"))
        return
