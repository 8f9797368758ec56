"""A refusal of the model vLLM was given: the check's message quotes the `--model` value itself (`Invalid repository
ID or local directory specified: '{model}'`, `Wrong GGUF model …: {model}`) in words that say it could not be used.
Then the value given is the input at fault — a repository id where the process needs a path (a container, offline
mode), a path that is not there, a name that does not resolve — and `--model` is the fix, not the checkpoint's
content (none was read)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.core.atlas import AtlasMatch
    from bot.core.triage.remedy import Remedy

# the model argument as the code names it: a parameter `model`, ModelConfig's own field, or reached through a config
_MODEL_HOLE = re.compile(r"^(?:model|(?:(?:self\.)?(?:vllm_config\.)?model_config|self)\.model)$")
# the words before the quoted value say it was refused, not merely reported (`Loading model {model}`)
_REFUSED_WORDS = re.compile(r"\b(?:invalid|wrong|specified|not found|cannot find|could not (?:find|load|resolve)|"
                            r"does not exist|no such|unrecognized|not a valid)\b", re.IGNORECASE)
# what a model argument looks like: a repository id (`org/name`, `org/name:quant`) or a path
MODEL_FLAG = "--model"
_MODEL_VALUE = re.compile(r"^[\w.~-]*/[\w./~:-]+$|^[\w.-]+:[\w.-]+$")


def model_given(m: AtlasMatch, out: Remedy) -> bool:
    """Name `--model` as the input refused when the message quotes the model's value as refused; True if so."""
    site = m.site
    if site.kind != "raise" or site.package != "vllm":
        return False
    for source, value in m.holes.items():
        hole = "{" + source + "}"
        at = site.template.find(hole)
        value = value.strip(" '\"`")
        if at < 0 or not _MODEL_HOLE.match(source.strip()) or not _MODEL_VALUE.match(value):
            continue
        if not _REFUSED_WORDS.search(site.template[max(0, at - 100):at]):
            continue
        flag = MODEL_FLAG
        out.inputs.append(flag)
        out.knobs.append(flag)
        out.remediation.append(
            f"The check refused the model it was given, `{value}`: it could use it neither as a local directory nor "
            f"as a repository id. Give `{flag}` what the process can reach — the local path of the model (inside a "
            f"container, the path there), or a repository id it can download (with `HF_HUB_OFFLINE=1` only what is "
            f"already in the cache; a gated repository needs a token with access).")
        return True
    return False
