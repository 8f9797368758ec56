"""A client that sends `Authorization: Bearer None`: its API key came out as Python's None, printed into the header
— the variable or option it reads the key from is unset — and a server started with `--api-key` answers 401 to
every request. The OpenAI clients (and vLLM's own `vllm bench serve`) read `OPENAI_API_KEY`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

_BEARER_NONE = re.compile(r"\bBearer None\b")
# 401 as the HTTP status (an access log's `" 401`, `Error code: 401`, `401 error`), not any number 401 in a line
_REFUSED = re.compile(r"\b401 (?:error|unauthorized)\b|\b(?:status(?:[ _]code)?|code|HTTP(?:/[\d.]+)?)\W{0,3}401\b"
                      r"|\" 401\b|\bunauthorized\b", re.IGNORECASE)
# the Hugging Face Hub refusing a download (`401 Client Error: Unauthorized for url: https://huggingface.co/…`): the
# hub's token, not the client's key to this server
_HUB = re.compile(r"huggingface\.co|HfHubHTTPError|RepositoryNotFoundError|GatedRepoError")
SERVER_DOC = "https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html"


def client_key(st: State) -> None:
    line = next((p for p in [*st.ev.parsed.problems, *st.ev.parsed.loose][:400]
                 if _BEARER_NONE.search((p.origin.text or p.message)[:2000])), None)
    if line is None or any(f.id == "client-key-none" for f in st.findings):
        return
    # a header printed while requests are answered is no failure: only a refusal of the key makes it one
    if not any(_REFUSED.search(t) and not _HUB.search(t) for t in ((p.origin.text or p.message)[:2000]
                                                                     for p in [*st.ev.parsed.problems,
                                                                               *st.ev.parsed.loose][:400])):
        return
    st.findings.append(Finding(
        id="client-key-none", severity="critical", confidence="medium",
        title="The client sends `Authorization: Bearer None`: its API key is unset",
        summary=("The request's header carries the word None where the key belongs: the client formatted a missing "
                 "key into the header instead of leaving the header out. A server started with `--api-key` refuses "
                 "it (401); one without a key ignores it."),
        evidence=[quoted(line)],
        remediation=["Give the client its key — `OPENAI_API_KEY` for the OpenAI clients and `vllm bench serve`, or the "
                     "client's own option — the same value the server was started with (`--api-key` or "
                     "`VLLM_API_KEY`); or a client release that leaves the header out when no key is set."],
        sources=[SERVER_DOC], priority=30, part="entrypoint", inputs=["OPENAI_API_KEY", "request"],
        knobs=["OPENAI_API_KEY"], advice=["request"], at=position(line.origin)))
