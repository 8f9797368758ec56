"""A check of vLLM's request parameters (`SamplingParams`, `PoolingParams`) refusing what a request set: the
parameters come from the request (or the program's `SamplingParams(…)`), so the request is the input at fault —
the fields the check reads (`self.min_p`, `self.logit_bias`) say which — whatever setting of the server the message
also names (`… not yet supported with speculative decoding`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.candidates import traceback_frames
from bot.core.triage.evidence import position

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State
    from bot.core.triage.findings import Finding

PARAM_FILES = ("vllm/sampling_params.py", "vllm/pooling_params.py")
# vLLM counting a prompt's media items against `--limit-mm-per-prompt` ("… but found 26 items in the same prompt")
_ITEMS_OVER_LIMIT = re.compile(r"limit-mm-per-prompt`?, but (?:found|passed) \d+ ")
# the model's processor taking no item of a modality at all (`At most 0 video(s) may be provided in one prompt`)
_NONE_TAKEN = re.compile(r"\bAt most 0 (?P<what>\w+)\(s\) may be provided")
MEDIA_ITEMS = ("The request carries more media items than the limit: send at most that many — a video as one item "
               "(its frames together, as one array), not a list of images — or raise the limit if the prompts "
               "need them (each allowed item reserves encoder memory at startup).")
_FIELD = re.compile(r"\bself\.([a-z][a-z0-9_]{1,40})\b")


def request_params(st: State) -> None:
    media_items(st)
    for f in st.findings:
        site = f.site
        if site is None or site.package != "vllm" or site.file not in PARAM_FILES or f.severity == "info" \
                or "request" in f.inputs:
            continue
        fields = [w for w in dict.fromkeys(_FIELD.findall(site.condition or "")) if not w.startswith("_")][:4]
        named = ", ".join(f"`{w}`" for w in fields)
        _to_the_request(f, "The request's sampling parameters were refused" + (f" ({named})" if named else "")
                        + " — or the server's defaults for them (`--override-generation-config`, the model's "
                          "generation_config.json): send requests without what the check names, or change the "
                          "setting it names where the server may.", fields)
        if _built_in_process(st, f):
            # a traceback through SamplingParams and no server handler in it: a program built the parameters
            f.remediation.insert(1, "As far as the log shows it, the traceback passes through no server handler: the "
                                    "parameters were likely built in a program (the offline `LLM` API, or a "
                                    "framework's wrapper around vLLM) — fix what that code passes.")
            f.advice = list(dict.fromkeys([*f.advice, "fix-script"]))


# a handler of vLLM's server, however the path is printed (`…/site-packages/vllm/entrypoints/…`, `vllm/entrypoints/…`)
_SERVER_FRAME = re.compile(r"(?:^|/)vllm/entrypoints/")


def _built_in_process(st: State, f: Finding) -> bool:
    """The refusal's own traceback shows frames, none of them a server handler's."""
    line = next((p for p in st.ev.parsed.problems if p.kind != "frame" and position(p.origin) == f.at), None)
    frames = [(q.frame_file or "").replace("\\", "/") for q in traceback_frames(st.ev.parsed.problems, line)] \
        if line is not None else []
    return bool(frames) and not any(_SERVER_FRAME.search(path) for path in frames)


def media_items(st: State) -> None:
    """A prompt with more media items than `--limit-mm-per-prompt` allows: the request's count and the server's limit
    are two readings of one refusal — the request (how it packs its media) first. A limit of 0 is the model's: this
    release's implementation of it takes none of that modality."""
    # the limit the user set (`non-default args: {'limit_mm_per_prompt': {'image': 0}}`): a 0 there is theirs
    limited = any(c.kind == "args" and isinstance(c.value, dict) and "limit_mm_per_prompt" in c.value
                  for c in st.ev.parsed.clues)
    for f in st.findings:
        none = next((m for e in [f.title, *f.evidence] if (m := _NONE_TAKEN.search(e)) is not None), None)
        if none is not None and not limited and f.site is not None and f.severity != "info" \
                and "upgrade" not in f.advice:
            # the limit may have been set where the log does not show it: at most medium
            _to_the_request(f, f"No {none['what']} is allowed: with no `--limit-mm-per-prompt` set in the log, this "
                               f"release's implementation of the model takes no {none['what']} input — send requests "
                               f"without it, or upgrade to a release whose implementation of the model adds "
                               f"{none['what']} (its supported-models table says which); if the limit was set to 0, "
                               "raise it.", medium=True)
            f.advice.append("upgrade")
            continue
        if f.site is None or f.site.package != "vllm" or f.severity == "info" or "request" in f.inputs \
                or not any(_ITEMS_OVER_LIMIT.search(e) for e in [f.title, *f.evidence]):
            continue
        _to_the_request(f, MEDIA_ITEMS, medium=True)


def _to_the_request(f: Finding, remedy: str, fields: list[str] | None = None, *, medium: bool = False) -> None:
    """The finding's input is the request (and the fields the check read), its first remedy what to send instead."""
    f.inputs = list(dict.fromkeys(["request", *(fields or []), *f.inputs]))
    f.advice = list(dict.fromkeys([*f.advice, "request"]))
    f.remediation.insert(0, remedy)
    if medium and f.confidence == "high":
        f.confidence = "medium"  # two readings of one refusal: the request's and the server's limit
