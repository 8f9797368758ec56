"""What a message tells its reader to do, in its own words: the fix a refusal names (another checkpoint, an upgrade,
a flag to give or a setting to move). The words never invent a flag: one counts only when a vLLM release has it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.core.atlas import Atlas
    from bot.core.triage.findings import Advice


# what a message tells its reader to do, in its own words (a refusal that names its fix)
_TOLD: tuple[tuple[re.Pattern[str], str, str | None, str | None], ...] = tuple(
    (re.compile(p, re.IGNORECASE), text, advice, knob) for p, text, advice, knob in (
        (r"\buse (?:a|another|the correct|a different) (?:\w+ ){0,3}checkpoint\b|\bcheckpoint that (?:includes|has|"
         r"contains)\b|re-?(?:export|quantiz|convert)\w* the (?:model|checkpoint)", "use another checkpoint",
         "checkpoint", None),
        # "Int8 not supported on SM120. Use FP8 quantization instead": the model quantized another way
        (r"\buse (?:an? )?[\w-]{2,12} quantiz(?:ation|ed (?:checkpoint|model|weights))(?: method)? instead\b",
         "the model quantized the way it names (such a checkpoint, or `--quantization` where vLLM quantizes online)",
         "checkpoint", "--quantization"),
        (r"\b(?:disable|turn off|without) speculative decoding\b|\bremove (?:the )?--speculative-config",
         "serve without speculative decoding (drop `--speculative-config`)", None, "--speculative-config"),
        (r"\b(?:upgrade|update) (?:vllm|to (?:a )?(?:newer|later|the latest))\b|\bnewer version of vllm\b",
         "upgrade vLLM", "upgrade", None),
        (r"\breduce (?:the )?(?:number of )?(?:speculative|draft) tokens\b|\blower num_speculative_tokens\b",
         "fewer speculative tokens", "lower-k", "--speculative-config"),
        (r"\b(?:shorten|reduce the length of|fewer tokens in) (?:the|your) (?:prompt|input|request)\b",
         "send a shorter request", "request", None),
    ))


# a message that names the setting to give: `you must explicitly provide --kv-transfer-config`, `Set
# dtype=torch.float16` — a flag only when some vLLM release the atlas read has it (the words never invent one)
_TOLD_FLAG = re.compile(r"\b(?:must|need to|needs to|please|should|have to|try)\s+(?:explicitly\s+|also\s+)?"
                        r"(?:provide|pass|passing|set|setting|specify|add|adding|use|using|give)\s+"
                        r"`?(?P<flag>--[a-z][a-z0-9-]+)", re.IGNORECASE)
# "Consider … running with --quantization awq": the flag (and its value) a message says to run with
_TOLD_RUN = re.compile(r"\b(?:run|running|launch|launching|restart|restarting|start|starting)\s+(?:it\s+|vllm\s+|the "
                       r"(?:server|engine|model)\s+)?with\s+`?(?P<flag>--[a-z][a-z0-9-]+)(?:[ =](?P<value>[a-z0-9_.]"
                       r"[\w.-]{0,30}))?", re.IGNORECASE)
# (`Set dtype=torch.float16`, `Set --max_model_len to 32768 or lower`: a flag as the command line spells it too;
# after `to`, only what reads as a value — a number, a word with a digit (`float16`), a boolean, `auto`, `none`,
# `half`, or quoted — not `to avoid this`)
_TOLD_SET = re.compile(r"\bset\s+`?(?:--)?(?P<name>[a-z][a-z0-9_-]{1,40}[a-z0-9])`?\s*"
                       r"(?:=\s*`?(?P<value>[\w.\-]{1,40})|\bto\s+(?:`(?P<quoted>[\w.\-]{1,40})`|"
                       r"(?P<plain>\d[\w.\-]{0,39}|[a-z][\w.\-]{0,38}\d[\w.\-]{0,40}|true|false|auto|none|half)\b)?)",
                       re.IGNORECASE)

# "Increase gpu_memory_utilization or tensor_parallel_size", "try reducing `max_num_seqs`": the settings a message
# tells to move (a name with an underscore or a flag, so plain words are not taken for settings)
_SETTING = r"`?(?:--[a-z][a-z0-9-]+|[a-z][a-z0-9]*(?:_[a-z0-9]+)+)`?"
_TOLD_CHANGE = re.compile(r"\b(?:increas|decreas|reduc|lower|rais)(?:e|es|ing)?\s+(?:the\s+)?(?:value\s+of\s+)?"
                          rf"(?P<names>{_SETTING}(?:\s*(?:,|\bor\b|\band\b|/)\s*{_SETTING}){{0,3}})",
                          re.IGNORECASE)


def told_flags(atlas: Atlas, text: str, version: str | None) -> tuple[list[str], list[str]]:
    """The vLLM flags a message tells its reader to give, as remedies and knobs (the flag is also the input)."""
    remedies: list[str] = []
    knobs: list[str] = []
    wanted: list[tuple[str, str | None]] = [(m["flag"].lower(), None) for m in _TOLD_FLAG.finditer(text)]
    wanted += [(m["flag"].lower(), (m["value"] or "").rstrip(".") or None) for m in _TOLD_RUN.finditer(text)]
    wanted += [("--" + m["name"].lower().replace("_", "-"), m["value"] or m["quoted"] or m["plain"])
               for m in _TOLD_SET.finditer(text)]
    changed = [("--" + n.strip("`-").lower().replace("_", "-"), _base(m.group(0).split()[0].lower()))
               for m in _TOLD_CHANGE.finditer(text) for n in re.findall(_SETTING, m["names"], re.IGNORECASE)]
    wanted += [(flag, None) for flag, _ in changed]
    verbs = dict(changed)
    for flag, value in wanted:
        if flag in knobs or atlas.flag_span(flag) is None:
            continue
        shown = f"`{flag} {value.removeprefix('torch.')}`" if value else f"`{flag}`"
        verb = verbs.get(flag)
        remedies.append(f"The message itself says to {verb} {shown}." if verb and not value else
                        f"The message itself names the setting: give {shown} to the server.")
        knobs.append(flag)
    return remedies, knobs


def told_in(text: str, spec: bool) -> tuple[list[str], list[Advice], list[str]]:
    """What the message itself says to do, as remedies, kinds of advice and knobs."""
    out: list[str] = []
    advice: list[Advice] = []
    knobs: list[str] = []
    for rx, what, kind, knob in _TOLD:
        if rx.search(text):
            if knob == "--speculative-config" and not spec:
                continue
            out.append(f"The message itself names the fix: {what}.")
            if kind:
                advice.append(kind)  # type: ignore[arg-type]
            if knob:
                knobs.append(knob)
    return out, advice, knobs


def _base(verb: str) -> str:
    """The verb as an instruction says it (`reducing` → `reduce`, `lowers` → `lower`)."""
    stem = verb.removesuffix("ing") if verb.endswith("ing") else verb.removesuffix("s")
    return stem + "e" if stem.endswith(("reduc", "increas", "decreas", "rais")) else stem
