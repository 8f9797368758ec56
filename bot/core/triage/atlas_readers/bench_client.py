"""vLLM's benchmark client quoting the server's 404 (`Initial test run failed - … Error: Not Found`): the server
does not serve what the benchmark asked — the model name it sends (the benchmark's `--model`, or its
`--served-model-name`, against the server's `--served-model-name`) or the endpoint path. The line's finding names
those settings."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.triage.remedy import CLIENT_FILES

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

# the status as an HTTP client quotes it, not any 404 (a count of tokens, a port)
_NOT_FOUND = re.compile(r"\bNot Found\b|\b(?:HTTP|[Ss]tatus|[Cc]ode)\W{0,3}404\b"
                        r"|\b404\W{1,3}(?:Client Error|Not Found)")


def bench_not_found(st: State) -> None:
    for f in st.findings:
        if f.site is None or not f.site.file.startswith(CLIENT_FILES) or f.severity == "info":
            continue
        if not _NOT_FOUND.search(" ".join(f.evidence[:1])):
            continue
        f.inputs = list(dict.fromkeys([*f.inputs, "--served-model-name", "request"]))
        f.knobs = list(dict.fromkeys([*f.knobs, "--model", "--served-model-name"]))
        f.advice = list(dict.fromkeys([*f.advice, "request"]))
        f.remediation.insert(0, "The server answered 404: it does not serve what the benchmark asked. Check the model "
                                "name the benchmark sends (its `--model`, or its own `--served-model-name`) against "
                                "the server's `--served-model-name` (`GET /v1/models` lists what it serves), and the "
                                "benchmark's endpoint and `--backend` against the routes the server has.")
