"""A check of vLLM's request parameters (`SamplingParams`, `PoolingParams`) refusing what a request set: the
parameters come from the request (or the program's `SamplingParams(…)`), so the request is the input at fault —
the fields the check reads (`self.min_p`, `self.logit_bias`) say which — whatever setting of the server the message
also names (`… not yet supported with speculative decoding`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

PARAM_FILES = ("vllm/sampling_params.py", "vllm/pooling_params.py")
_FIELD = re.compile(r"\bself\.([a-z][a-z0-9_]{1,40})\b")


def request_params(st: State) -> None:
    for f in st.findings:
        site = f.site
        if site is None or site.package != "vllm" or site.file not in PARAM_FILES or f.severity == "info" \
                or "request" in f.inputs:
            continue
        fields = [w for w in dict.fromkeys(_FIELD.findall(site.condition or "")) if not w.startswith("_")][:4]
        named = ", ".join(f"`{w}`" for w in fields)
        f.inputs = list(dict.fromkeys(["request", *fields, *f.inputs]))
        f.advice = list(dict.fromkeys([*f.advice, "request"]))
        f.remediation.insert(0, "The request's parameters were refused" + (f" ({named})" if named else "")
                             + ": send requests without what the check names, or change the setting it names "
                               "where the server may.")
