"""A chat template that refuses the conversation it was given: a Jinja template calls `raise_exception('…')`
(transformers hands templates that function; it raises `jinja2.exceptions.TemplateError` with the template's own
words: "Conversation roles must alternate user/assistant/…", "System role not supported"). The template is the
model's rule for what a conversation may hold, so what is at fault is the request's messages — or the template, when
the client's messages are the ones it must accept. A syntax or undefined-name error of a template is another class
(TemplateSyntaxError, UndefinedError): the template's own defect, not read here."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.candidates import traceback_frames
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.atlas_readers.same_line import step_back
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State

SOURCES = ("https://github.com/huggingface/transformers/blob/main/src/transformers/utils/chat_template_utils.py",
           "https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html#chat-template")
# the class itself, not a subclass: `raise_exception` raises TemplateError; syntax and undefined-name errors subclass it
_REFUSED = re.compile(r"(?:^|[\s.])TemplateError: (?P<said>.{3,400})")
_TEMPLATE_FRAME = re.compile(r"^<template>$|chat_template_utils\.py$")


def template_refusal(st: State) -> None:
    for line in st.ev.parsed.problems:
        if line.kind != "exception" or line.exception != "TemplateError":
            continue
        frames = traceback_frames(st.ev.parsed.problems, line)
        # with frames, one of them is the template's code or transformers' raise_exception; a bare line is the class
        # the template's own refusal raises
        if frames and not any(_TEMPLATE_FRAME.search(f.frame_file or "") or f.frame_function == "raise_exception"
                              for f in frames):
            continue
        _claim(st, line, bool(frames))
        return


def _claim(st: State, line: ProblemLine, framed: bool) -> None:
    said = line.message.strip()
    if any(f.id == "chat-template-refused" for f in st.findings) or _REFUSED.search(
            line.origin.text or f"TemplateError: {said}") is None:
        return
    at = position(line.origin)
    # the frame's site (transformers' utility) carried the template's words, not their cause
    step_back(st, at, lambda f: f.id.startswith(("atlas-frame:", "atlas:")) and f.confidence != "high")
    st.findings.append(Finding(
        id="chat-template-refused", severity="critical", confidence="medium" if framed else "low",
        title="The model's chat template refused the conversation it was given",
        summary=(f"The chat template raised its own refusal: \"{clip(said, 200)}\". A template states which "
                 "conversations the model takes (which roles, in which order, whether a system message or images "
                 "may appear); a request whose messages break that rule is refused before the model runs — a "
                 "client-side error the server answers with an error status."),
        evidence=[quoted(line)],
        remediation=["Send messages the template accepts — what its words ask for (roles alternating user/assistant, "
                     "no system message, one image where it takes one); a client or playground that builds the "
                     "conversation is the one to change.",
                     "If clients must send such conversations, serve with a template that accepts them "
                     "(`--chat-template FILE`) — the model was trained on its own template's shape."],
        sources=list(SOURCES), priority=32, part="entrypoint", inputs=["request"], knobs=["--chat-template"],
        advice=["request"], host=[], owner=None, at=at, level=line.origin.level or "EXCEPTION"))
