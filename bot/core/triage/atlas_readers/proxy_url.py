"""A URL the HTTP client refused that is only `host:port`: what a proxy variable holds when it was set without its
scheme (`HTTP_PROXY=127.0.0.1:3128`). vLLM fetches a request's image, video or audio URL with aiohttp, which takes
its proxy from the environment (`trust_env`); a proxy without `http://` is no URL, and every fetch fails.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# the client's refusal of a URL (also as a logger printed it under its own prefix), holding a host and a port with no
# scheme before them
_BARE = re.compile(r"(?:^|[\s.])(?:InvalidURL|InvalidUrlClientError|InvalidSchema|MissingSchema|UnsupportedProtocol):"
                   r"\s*['\"]?(?P<host>[A-Za-z0-9][\w.-]{0,250}):(?P<port>\d{2,5})/?['\"]?\s*$")
_PROXY_VARS = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
AIOHTTP_PROXY_DOC = "https://docs.aiohttp.org/en/stable/client_advanced.html#proxy-support"


def proxy_url(st: State) -> None:
    for p in st.ev.parsed.problems:
        text = p.message if p.kind != "exception" else f"{p.exception}: {p.message}"
        bare = _BARE.search(text)
        if bare is None:
            continue
        st.findings.append(Finding(
            id="proxy-without-scheme", severity="critical", confidence="medium",
            title=f"The HTTP client refused `{bare['host']}:{bare['port']}` as a URL: a proxy set without its scheme",
            summary=("The URL the client refused is only a host and a port: what a proxy variable holds when it was "
                     "written without `http://`. The client takes its proxy from the environment (aiohttp's "
                     "`trust_env`, as vLLM's media fetching does), so every fetch of an image, video or audio URL "
                     "fails the same way."),
            evidence=[quoted(p)],
            remediation=[f"Give the proxy variables their scheme (`HTTP_PROXY=http://{bare['host']}:{bare['port']}`, "
                         "the same for `HTTPS_PROXY` and the lower-case names), or unset them where the server needs "
                         f"no proxy; `NO_PROXY` lists hosts to reach directly ({AIOHTTP_PROXY_DOC})."],
            sources=[AIOHTTP_PROXY_DOC], priority=30, inputs=list(_PROXY_VARS), knobs=list(_PROXY_VARS),
            at=position(p.origin)))
        return
