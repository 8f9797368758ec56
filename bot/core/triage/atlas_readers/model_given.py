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
SPEC_FLAG = "--speculative-config"
# the model argument as the code names it: a parameter `model`, ModelConfig's own field through a config; `self.model`
# only in ModelConfig's own code (elsewhere it is any object's model: a drafter's, a module's)
_MODEL_HOLE = re.compile(r"^(?:model|(?:self\.)?(?:vllm_config\.)?model_config\.model)$")
_OWN_FIELD = re.compile(r"^self\.model$")
# the words before the quoted value say it was refused, not merely reported (`Loading model {model}`)
_REFUSED_WORDS = re.compile(r"\b(?:invalid|wrong|not found|cannot find|could not (?:find|load|resolve)|"
                            r"does not exist|no such|unrecognized|not a valid)\b", re.IGNORECASE)
# the check could read neither a local directory nor a repository (not a value of the wrong form)
_LOCATION = re.compile(r"\blocal directory\b|\brepository id\b", re.IGNORECASE)


def refused_model(m: AtlasMatch) -> str | None:
    """The model value a vLLM check refused, as the message quotes it (the target's `--model`, or the drafter's, which
    the same loader reads); None when it refused something else."""
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
        if 0 < len(token) <= 512:
            return token
    return None


def _value(value: str, after: str) -> str:
    """The hole's value: up to the closing quote the template puts after it (`'{model}'.`), else its first token — the
    hole runs on into the next words when the message spans lines (`…:Q4_K_XL.\n - It should …`)."""
    literal = after.split("{", 1)[0][:2].strip()
    if literal[:1] in ("'", '"', "`") and literal in value:
        return value.split(literal, 1)[0].strip(" '\"`")
    return (value.split() or [""])[0].strip(" '\"`").rstrip(".,;:")


def flag_for(value: str, drafter: str | None, target: str | None) -> str:
    """The flag that gave a refused model value: the drafter's (`--speculative-config`'s `model` key) only when it is
    the drafter's and not the target's too (the target is loaded first)."""
    mine = value.strip()
    return SPEC_FLAG if drafter and mine == drafter.strip() and mine != (target or "").strip() else MODEL_FLAG


def model_remedy(m: AtlasMatch, value: str, flag: str, out: Remedy) -> None:
    """Name the flag that gave the refused value and say what to give it."""
    out.inputs.append(flag)
    out.knobs.append(flag)
    whose, give = (("the drafter's model", "the speculative config's `model` key (`--speculative-config "
                    "'{\"model\": …}'`)") if flag == SPEC_FLAG else ("the model", f"`{flag}`"))
    line = f"The check refused {whose} it was given, `{value}`: give {give} a value in the form the message names."
    if _LOCATION.search(m.site.template):
        line = (f"The check refused {whose} it was given, `{value}`: it could use it neither as a local directory nor "
                f"as a repository id. Give {give} what the process can reach — the local path (inside a container, "
                f"the path there), or a repository id it can download (with `HF_HUB_OFFLINE=1` only what is already "
                f"in the cache; a gated repository needs a token with access).")
    out.remediation.append(line)
