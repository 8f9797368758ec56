"""A chat template handed a message's content as a list of parts: `can only concatenate str (not "list") to str`
from a template that joins `message['content']` with strings. vLLM renders content either as a string or as the
OpenAI list of parts (`--chat-template-content-format`, auto-detected from the template by default); a template
written for strings that gets the list — the format forced to `openai`, or detected wrongly — fails on every request
that reaches it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.candidates import traceback_frames
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.atlas_readers.same_line import step_back
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State

FLAG = "--chat-template-content-format"
SOURCES = ("https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html#chat-template",
           "https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/entrypoints/chat_utils.py")
_LIST_INTO_STR = re.compile(r"can only concatenate str \(not \"list\"\) to str|"
                            r"unsupported operand type\(s\) for \+: '(?:str|list)' and '(?:list|str)'")
# where a template renders: Jinja's compiled template, transformers' or vLLM's chat rendering
_RENDERING = re.compile(r"<template>|jinja2/|chat_template|chat_utils\.py|/renderers?/")


def content_format(st: State) -> None:
    if any(f.id == "chat-content-format" for f in st.findings):
        return
    for line in st.ev.parsed.problems:
        if line.kind != "exception" or not _LIST_INTO_STR.search(line.message):
            continue
        frames = traceback_frames(st.ev.parsed.problems, line)
        if frames and not any(_RENDERING.search(f.frame_file or "") for f in frames):
            continue  # a list joined to a string in code that renders no template: not this
        _claim(st, line, rendered=bool(frames))
        return


def _claim(st: State, line: ProblemLine, *, rendered: bool) -> None:
    from bot.core.atlas import load_atlas  # the atlas loads only when a line needs it

    span = load_atlas().flag_span(FLAG)
    since = f" (vLLM {span[0]} on)" if span is not None else ""
    at = position(line.origin)
    if rendered:  # the site these words match is Python's, not the template's cause
        step_back(st, at, lambda f: f.id.startswith(("atlas-frame:", "atlas:")) and f.confidence != "high")
    st.findings.append(Finding(
        id="chat-content-format", severity="critical", confidence="medium" if rendered else "low",
        title="The chat template got a message's content as a list of parts where it joins strings",
        summary=("Python refused to join a list to a string — what a chat template written for plain-string content "
                 "does when vLLM hands it the OpenAI form (`[{\"type\": \"text\", …}]`). vLLM picks the form with "
                 f"`{FLAG}`{since}: `auto` detects it from the template, `openai` forces the list, `string` the text."
                 + ("" if rendered else " The log shows no frames: that the template raised it is read from the "
                                        "words alone.")),
        evidence=[quoted(line)],
        remediation=[f"Serve with `{FLAG} string` (or leave it `auto` if it was forced to `openai`): the template "
                     "then gets each message's content as text.",
                     "Or use a template that reads content parts (`--chat-template FILE`) when clients send images "
                     "or other parts."],
        sources=list(SOURCES), priority=32, part="entrypoint", inputs=[FLAG], knobs=[FLAG, "--chat-template"],
        host=[], owner=None, at=at, level=line.origin.level or "EXCEPTION"))
