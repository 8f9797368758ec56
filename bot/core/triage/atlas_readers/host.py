"""What the evidence says about the deployment a finding advises: the GPU it runs on, whether it drafts."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core import gpus

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

_GPU_HINT = re.compile(r"nvidia|geforce|tesla|quadro|\brtx\b|\bgpu\b|cuda device", re.IGNORECASE)


def has_spec(st: State) -> bool:
    from bot.core.triage.detectors.common import spec_decoding

    return spec_decoding(st.ev) == "on"


def gpu_of(st: State) -> gpus.Gpu | None:
    ctx = st.ev.context
    if ctx.gpu:
        found = gpus.lookup(ctx.gpu)
        if found is not None:
            return found
    for p in st.ev.parsed.problems:
        text = p.origin.text or p.message
        if _GPU_HINT.search(text):
            found = gpus.find_in(text)
            if found is not None:
                return found
    return None
