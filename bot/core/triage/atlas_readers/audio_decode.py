"""vLLM's audio loader refusing an upload (`Invalid or unsupported audio file.`, vllm/multimodal/media/audio.py
`load_audio`): it decodes with soundfile, then PyAV, and says this when neither can — a file neither reads, or
(every upload refused, a valid WAV too) neither decoder installed: the `vllm[audio]` extra."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

_UNDECODABLE = re.compile(r"\bInvalid or unsupported audio file\b")
SOURCE = "https://github.com/vllm-project/vllm/blob/v0.34.0/vllm/multimodal/media/audio.py#L523"


def audio_decode(st: State) -> None:
    for f in st.findings:
        if f.severity == "info" or not _UNDECODABLE.search(" ".join([f.title, *f.evidence[:1]])):
            continue
        f.deps = list(dict.fromkeys([*f.deps, "soundfile", "av"]))
        f.sources = list(dict.fromkeys([*f.sources, SOURCE]))
        f.remediation.insert(0, "vLLM decodes audio with soundfile, then PyAV: when every upload is refused (a plain "
                                "16 kHz WAV too), neither is installed — install the audio extra (`pip install "
                                "'vllm[audio]'`, or `soundfile` and `av` in the image); when only some are, those "
                                "files are in a format neither reads (convert them before sending).")
