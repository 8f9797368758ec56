"""The API server failing to parse text a request carried: Python's JSON (or UTF-8) decoder raising in the API server
process, from the standard library's own frames — a tool call's `arguments`, a schema, a field a client sends as a
JSON string. One request failed; a server that answers afterwards went on serving.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import owners
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.parsed_log import ProblemLine
    from bot.core.triage.detectors.state import State

_DECODE_ERRORS = frozenset({"JSONDecodeError", "UnicodeDecodeError"})
# an access line of the server answering (uvicorn's `"GET /health HTTP/1.1" 200 OK`)
_ANSWERED = re.compile(r'"(?:GET|POST|PUT|DELETE) \S{1,300} HTTP/[\d.]{1,3}" 2\d\d\b')
JSON_DOC = "https://docs.python.org/3/library/json.html#json.JSONDecodeError"


def request_decode(st: State) -> None:
    problems = st.ev.parsed.problems
    for p in problems:
        if p.kind != "exception" or (p.exception or "").rsplit(".", 1)[-1] not in _DECODE_ERRORS:
            continue
        frames = [q for q in problems if q.kind == "frame" and q.traceback_id == p.traceback_id]
        if not _in_the_api_server(p, frames):
            continue
        at = position(p.origin)
        answered = any(position(q.origin) > at and _ANSWERED.search(q.message) for q in st.ev.parsed.loose)
        st.findings.append(_finding(p, answered))
        return


def _in_the_api_server(p: ProblemLine, frames: list[ProblemLine]) -> bool:
    """Raised in the API server (its process, or the OpenAI server's code), from frames that are only the standard
    library's decoder and the server's own."""
    mine = (p.origin.proc or "").startswith("APIServer") or any(
        "vllm/entrypoints/" in (f.frame_file or "") for f in frames)
    owned = [owners.of_path(f.frame_file or "") for f in frames if f.frame_file]
    plain = all(o is not None and (o.name == "python" or o.name == "vllm") for o in owned)
    return mine and plain and (not owned or any(o is not None and o.name == "python" for o in owned))


def _finding(p: ProblemLine, answered: bool) -> Finding:
    return Finding(
        id="api-server-request-decode", severity="warning" if answered else "critical", confidence="low",
        title=f"The API server could not parse text a request carried ({p.exception}: {p.message[:80]})",
        summary=("Python's decoder raised in the API server: JSON (or text) that came with a request — a tool call's "
                 "`arguments` replayed by the client, a `response_format` schema, a field sent as a JSON string — "
                 "is not well formed. " + ("The server answered afterwards: that request failed, the server went on."
                                           if answered else "The log does not show the server answering after it.")),
        evidence=[quoted(p)],
        remediation=["Find the request (the access line at the same time) and fix what the client sends: the text "
                     "the decoder names is not well-formed JSON. A vLLM release that checks the text first answers "
                     f"such a request with a 400 instead of a traceback ({JSON_DOC})."],
        sources=[JSON_DOC], priority=45, part="entrypoint", inputs=["request"], advice=["request"],
        at=position(p.origin))
