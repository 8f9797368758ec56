"""The Hugging Face Hub's refusals of a model download (HTTP 401, 403, 404), wherever the log prints them."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors import State

_HUB_HTTP_RE = re.compile(r"\b(?P<code>401|403|404)\b[^\n]{0,80}?(?:for url|url):?\s*(?P<url>https://huggingface\.co/\S+)")
_WHY = {"401": "no token, or a token the Hub does not accept",
        "403": "the token has no access to this repository (a gated model whose licence was not accepted "
               "for this account)",
        "404": "the repository or revision does not exist, or is private and the token cannot see it"}


def hub_refusals(st: State) -> None:
    """A gated model whose licence is not accepted, a token missing or without access, or a name that does not
    exist."""
    if any(f.part == "hub" for f in st.findings):
        return
    for p in [*st.ev.parsed.problems, *st.ev.parsed.loose]:
        hm = _HUB_HTTP_RE.search(p.message) or _HUB_HTTP_RE.search(p.origin.text or "")
        if hm is None:
            continue
        code, url = hm["code"], hm["url"]
        repo = "/".join(url.removeprefix("https://huggingface.co/").split("/")[:2])
        st.findings.append(Finding(
            id="hub-access-refused", title=f"The Hugging Face Hub refused the model download ({code}): {repo}",
            severity="critical", confidence="high",
            summary=f"HTTP {code} from the Hub for {url}: {_WHY[code]}.",
            evidence=[quoted(p)],
            remediation=[f"Open https://huggingface.co/{repo} logged in as the account whose token the server uses, "
                         "accept the licence if it is gated, then give the server that token (`HF_TOKEN`) — or "
                         "download the model where you have access and serve it from a local path.",
                         "Check the name and revision for a 404."],
            priority=30, part="model-loading", owner="huggingface_hub", knobs=["HF_TOKEN"],
            inputs=["HF_TOKEN", "checkpoint"], host=["permissions"] if code in ("401", "403") else []))
        return
