"""A refusal of the model vLLM was given: the check's message quotes the `--model` value itself (`Invalid repository
ID or local directory specified: '{model}'`, `Wrong GGUF model or invalid GGUF quant type: {model}`) after words
that say it could not be used. Then the value given is the input at fault — a repository id where the process needs
a path (a container, offline mode), a path that is not there, a name in a form the check does not take — and
`--model` is the fix, not the checkpoint's content (none was read)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.core.atlas import AtlasMatch
    from bot.core.triage.remedy import Remedy

MODEL_FLAG = "--model"
# the model argument as the code names it: a parameter `model`, ModelConfig's own field through a config; `self.model`
# only in ModelConfig's own code (elsewhere it is any object's model: a drafter's, a module's)
_MODEL_HOLE = re.compile(r"^(?:model|(?:self\.)?(?:vllm_config\.)?model_config\.model)$")
_OWN_FIELD = re.compile(r"^self\.model$")
# the words before the quoted value say it was refused, not merely reported (`Loading model {model}`)
_REFUSED_WORDS = re.compile(r"\b(?:invalid|wrong|not found|cannot find|could not (?:find|load|resolve)|"
                            r"does not exist|no such|unrecognized|not a valid)\b", re.IGNORECASE)
# the check could read neither a local directory nor a repository (not a value of the wrong form)
_LOCATION = re.compile(r"\blocal directory\b|\brepository id\b", re.IGNORECASE)


def refused_model(m: AtlasMatch, drafter: str | None = None) -> str | None:
    """The `--model` value a vLLM check refused, as the message quotes it; None when it refused something else —
    or the drafter's (the same loader reads the speculative config's model)."""
    site = m.site
    if site.kind != "raise" or site.package != "vllm":
        return None
    for source, value in m.holes.items():
        name = source.strip()
        own = _OWN_FIELD.match(name) is not None and site.function.startswith("ModelConfig.")
        hole = "{" + source + "}"
        at = site.template.find(hole)
        refusing = _REFUSED_WORDS.search(site.template[max(0, at - 100):at]) is not None
        if at < 0 or not (own or _MODEL_HOLE.match(name)) or not refusing:
            continue
        token = _value(value, site.template[at + len(hole):])
        if 0 < len(token) <= 512 and token != (drafter or "").strip():
            return token
    return None


def _value(value: str, after: str) -> str:
    """The hole's value up to the literal that follows the hole in the template (`'.` after `'{model}`): the hole runs
    on into the next words when the message spans lines; without such a literal, its first token."""
    literal = after.split("{", 1)[0][:2].strip()
    cut = value.split(literal, 1)[0] if literal and literal in value else (value.split() or [""])[0]
    return cut.strip(" '\"`.,;:")


def model_remedy(m: AtlasMatch, value: str, out: Remedy) -> None:
    """Name `--model` as the input refused and say what to give it."""
    out.inputs.append(MODEL_FLAG)
    out.knobs.append(MODEL_FLAG)
    line = (f"The check refused the model it was given, `{value}`: give `{MODEL_FLAG}` a value in the form the message "
            f"names.")
    if _LOCATION.search(m.site.template):
        line = (f"The check refused the model it was given, `{value}`: it could use it neither as a local directory "
                f"nor as a repository id. Give `{MODEL_FLAG}` what the process can reach — the local path of the model "
                f"(inside a container, the path there), or a repository id it can download (with `HF_HUB_OFFLINE=1` "
                f"only what is already in the cache; a gated repository needs a token with access).")
    out.remediation.append(line)
