"""pydantic refusing fields a model class does not define (`2 validation errors for VllmConfig` / `scale_dtype  Extra
inputs are not permitted`): what was handed over — a config file, a checkpoint's quantization config, a request —
carries fields this release's class does not know, most often written by a newer release of whatever wrote them
(a quantization tool, a newer vLLM's config). The fields are named; a release that knows them, or the fields left
out, is the fix."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State

_FOR = re.compile(r"^\d{1,3} validation errors? for (?P<cls>[A-Z]\w{0,80})")
# the field and pydantic's words on one line as pasted (`scale_dtype  Extra inputs …`), or as the parser joins
# pydantic's own two lines (`scale_dtype` then `  Extra inputs are not permitted [type=extra_forbidden, …]`)
_EXTRA = re.compile(r"^(?P<field>[A-Za-z_][\w.]{0,80}):?\s{1,20}Extra inputs are not permitted\b")
PYDANTIC_DOC = "https://docs.pydantic.dev/latest/errors/validation_errors/#extra_forbidden"


_NEXT_LINES = 12  # a header's field lines (each field and its message) follow it


def extra_fields(st: State, p: ProblemLine, exc: str) -> Finding | None:
    head = _FOR.match(p.message.strip()) if exc == "ValidationError" else None
    if head is None:
        return None
    at = position(p.origin)
    # (positions are lines in a paste and byte offsets in a file read: the lines after it are counted, not measured)
    after = sorted((q for q in [*st.ev.parsed.problems, *st.ev.parsed.loose] if position(q.origin) > at),
                   key=lambda q: position(q.origin))[:_NEXT_LINES]
    # (the next header's fields are its own)
    ends = next((k for k, q in enumerate(after) if _FOR.search(q.message.strip())), len(after))
    fields = [m["field"] for q in after[:ends] if (m := _EXTRA.match(q.message.strip())) is not None]
    if not fields:
        return None
    named = ", ".join(f"`{f}`" for f in fields)
    if head["cls"].endswith("Request"):
        # a request's schema: the client sent fields this server's API does not define
        return Finding(
            id=f"extra-fields:{head['cls']}", title=f"The request carries fields the server does not take: {named}",
            severity="warning", confidence="medium",
            summary=(f"pydantic refused {named} in a `{head['cls']}`: this server's API does not define them (a "
                     "client written for another server or release), and it forbids fields it does not know."),
            evidence=[quoted(p)], remediation=[f"Leave {named} out of the request, or serve with a release whose API "
                                               "defines them."],
            sources=[PYDANTIC_DOC], priority=40, part="entrypoint", inputs=["request", *fields],
            advice=["request"], at=at, per_request=True)
    return Finding(
        id=f"extra-fields:{head['cls']}", title=f"`{head['cls']}` refused fields it does not define: {named}",
        severity="critical", confidence="medium",
        summary=(f"pydantic refused {named}: this release's `{head['cls']}` does not define them, and forbids fields "
                 "it does not know. What supplied them (a config file, a checkpoint's quantization config, a tool's "
                 "output) was written for a release that has them."),
        evidence=[quoted(p)],
        remediation=[f"Install the release of the reader that knows {named} (vLLM, or the library that defines "
                     f"`{head['cls']}`: a newer one when a newer tool wrote them), or leave the fields out of what "
                     "supplies them."],
        sources=[PYDANTIC_DOC], priority=40, inputs=fields, advice=["upgrade"], at=at)
