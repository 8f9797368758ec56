"""A request the server refused, read from what the client (or the validator) printed:

- `mistral_common.exceptions.InvalidMessageStructureException: Unexpected role 'user' after role 'tool'`: the Mistral
  tokenizer's library validates a chat request's messages and tools before it renders them; its `Invalid…Exception`
  classes each name a part of the request (the message order, an assistant or tool message, a tool's schema, a
  function call) — the client sent what the model's format does not allow, and vLLM answers that request with 400.
- `HTTP 400: Bad Request — {"error":{"message":"…","type":"BadRequestError",…}}`: vLLM's error body for a 400, quoted by
  the client, whose message no site of vLLM's words (a chat template's own check, for one); or a client's `HTTP 4xx`
  with the request model's validation errors (`1 validation error for UserMessage … extra_forbidden`). A message
  vLLM's own code words is placed at its site by the atlas, which names the setting when the check has one."""

from __future__ import annotations

import re

from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.candidates import Candidate
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.findings import Finding

# mistral_common/exceptions.py: the classes its request validator raises (not TokenizerException and
# UnsupportedTokenizerFeatureException, which are about the tokenizer files)
_REQUEST = re.compile(r"^Invalid(?:Request|SystemPrompt|MessageStructure|AssistantMessage|ToolMessage|ToolSchema|"
                      r"UserMessage|FunctionCall|Tool)Exception$")
EXCEPTIONS = "https://github.com/mistralai/mistral-common/blob/main/src/mistral_common/exceptions.py"
ANSWERED_400 = "https://github.com/vllm-project/vllm/pull/16769"


def mistral_request(cand: Candidate) -> Finding | None:
    p = cand.line
    exc = (p.exception or "").rsplit(".", 1)[-1]
    said = f"{p.origin.text} {' '.join(f.frame_file or '' for f in cand.frames)}"
    if p.kind != "exception" or not _REQUEST.match(exc) or "mistral_common" not in said:
        return None
    message = " ".join(p.message.split())
    return Finding(
        id=f"mistral-request-invalid:{exc}", title=f"The Mistral tokenizer refused the request's messages: {exc}",
        severity="critical", confidence="medium",
        summary=(f"mistral_common's request validator raised {exc}" + (f" ({message[:160]})" if message else "")
                 + ": the chat request the client sent breaks the model's message format (the order of roles, an "
                   "assistant or tool message, a tool's schema). The server refuses that request; it keeps serving "
                   "others."),
        evidence=[quoted(p)],
        remediation=["Change what the client sends to the order and fields the model's format allows (e.g. an "
                     "assistant turn between a tool result and the next user message); where the client is an "
                     "application, its release or setting that builds the conversation."],
        sources=[EXCEPTIONS, ANSWERED_400], priority=38, part="entrypoint", owner="mistral-common",
        inputs=["request"], advice=["request"])


# vLLM's `ErrorResponse`, flat (`{"object": "error", "message": …}`) or nested (`{"error": {"message": …}}`), quotes
# escaped when the body sits inside another; `type` is the error's class, BadRequestError for a 400
_ERROR_BODY = re.compile(r"""(?:\\?["']object\\?["']\s{0,3}:\s{0,3}\\?["']error\\?["']\s{0,3},|"""
                         r"""\\?["']error\\?["']\s{0,3}:\s{0,3}\{)\s{0,3}\\?["']message\\?["'].{0,1200}?"""
                         r"""\\?["']type\\?["']\s{0,3}:\s{0,3}\\?["']BadRequestError\\?["']""")
# a client's own words for the status, then pydantic's count of the request model's validation errors
_STATUS_VALIDATION = re.compile(r"\bHTTP 4\d\d\b.{0,200}?\b\d{1,5} validation errors? for [A-Z]\w{0,60}")
PROTOCOL = "https://github.com/vllm-project/vllm/blob/v0.8.5/vllm/entrypoints/openai/protocol.py"
SERVER_DOC = "https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html"


def answered_400(p: ProblemLine) -> Finding | None:
    """The request a client quotes the server's 400 for, when no site of vLLM's words its message."""
    text = p.origin.text or p.message
    if not (_ERROR_BODY.search(text) or _STATUS_VALIDATION.search(text)):
        return None
    return Finding(
        id="client-request-refused", title="The server refused the client's request (400: what the client sent "
                                           "failed a check)",
        severity="critical", confidence="medium",
        summary=("The client quotes the server's answer: a 400 with vLLM's error body (or the request model's "
                 "validation errors). What the client sent failed a check of the request — its messages' order or "
                 "roles (the chat template's own check), a field the request schema does not have (vLLM's request "
                 "models forbid extra fields), its length, its parameters. The server keeps serving; every request "
                 "built the same way fails the same way."),
        evidence=[quoted(p)],
        remediation=["Change what the client sends, as the error's message says (message order and roles, fields "
                     "the OpenAI API does not define, `max_tokens` within the context, parameters in range); where the "
                     "client is an application, its release or setting that builds the request. When the message "
                     "names a setting of the server (a chat template, a flag), that setting instead."],
        sources=[PROTOCOL, SERVER_DOC], priority=40, part="entrypoint", inputs=["request"], advice=["request"])
