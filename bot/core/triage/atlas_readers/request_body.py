"""A request the OpenAI-compatible server refused field by field: pydantic's errors for the request body, as the
server returns them in its 400 (`[{'type': 'extra_forbidden', 'loc': ('body', 'stream_otpions'), …}]`) and as a
client prints them (`openai.BadRequestError: Error code: 400 - {…}`).

vLLM's request models forbid fields they do not define, so a misspelled field, or one a newer API has and this
release does not, is refused whole: the fix is in what the client sends."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.quoting import clip, quoted
from bot.core.triage.findings import Advice, Confidence, Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# pydantic v2's error dicts (https://docs.pydantic.dev/latest/errors/validation_errors/), the location under `body`
_BODY_RE = re.compile(r"'type': '(?P<type>\w{1,60})', 'loc': \('body', '(?P<field>[^']{1,80})'(?:, [^)]{0,80})?\), "
                      r"'msg': '(?P<msg>[^']{1,200})'")
# the body itself missing (`'loc': ('body',)`): the request arrived with no body at all
_NO_BODY_RE = re.compile(r"'type': 'missing', 'loc': \('body',\), 'msg': 'Field required'")
PYDANTIC_ERRORS_DOC = "https://docs.pydantic.dev/latest/errors/validation_errors/"
_WHAT = {"extra_forbidden": "a field this server's API does not define — a misspelling, or a field of a newer API "
                            "than this vLLM release has",
         "missing": "no value for a field this API requires"}


def request_body_refusals(st: State) -> None:
    """The first request body the server refused, with the field and why."""
    if any(f.id == "request-body-refused" for f in st.findings):
        return
    for p in [*st.ev.parsed.problems, *st.ev.parsed.loose]:
        if _NO_BODY_RE.search(p.origin.text or p.message):
            st.findings.append(_no_body(p))
            return
        m = _BODY_RE.search(p.origin.text or p.message)
        if m is None:
            continue
        field, kind = m["field"], m["type"]
        what = _WHAT.get(kind, f"a value the API does not accept ({clip(m['msg'], 100)})")
        st.findings.append(_refused(
            p, f"The server refused a request: `{field}` ({kind})", "high",
            f"The OpenAI-compatible server validated the request body and refused it: `{field}` is {what}. The "
            "server itself is up; every request the client builds this way is refused.",
            f"Change what the client sends: {'drop or rename' if kind == 'extra_forbidden' else 'fix'} `{field}` (the "
            "client library's version and options decide it; a newer vLLM may accept a field a newer API added).",
            # a field this release does not define may be one a later release's API added, as the remedy says
            ["request", "upgrade"] if kind == "extra_forbidden" else ["request"]))
        return


def _no_body(p: ProblemLine) -> Finding:
    """The whole body missing: the server read no JSON from the request, whatever the client meant to send."""
    return _refused(
        p, "The server got a request without a body (`loc ('body',)`: Field required)", "medium",
        "The OpenAI-compatible server found no body in the request: the validation error is about the body as a "
        "whole, not a field of it. The server itself is up; the request reached it empty.",
        "Find what emptied the request between the client and the server: a method without a body, a request "
        "sent with an empty body, a proxy that drops bodies, or a client that asks to switch protocols "
        "(`Connection: Upgrade`, HTTP/2 over cleartext) — which the server's HTTP/1.1 parser may answer without the "
        "body — and send a plain HTTP/1.1 POST with the JSON body.", ["request", "fix-script"])


def _refused(p: ProblemLine, title: str, confidence: Confidence, summary: str, remedy: str,
             advice: list[Advice]) -> Finding:
    return Finding(id="request-body-refused", title=title, severity="critical", confidence=confidence,
                   summary=summary, evidence=[quoted(p)], remediation=[remedy], sources=[PYDANTIC_ERRORS_DOC],
                   priority=30, part="entrypoint", inputs=["request"], advice=advice)
