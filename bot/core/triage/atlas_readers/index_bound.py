"""A compiled kernel's device-side index check (`Assertion `index out of bounds: 0 <= tmp16 < 40960` failed`, the
check Inductor writes into the kernels it generates): a table of N rows was indexed past its end, and the process is
gone. A table sized to the model's positions (the rotary embedding's cos/sin cache has max_position_embeddings rows)
is indexed past its end by a sequence longer than the model's positions: `--max-model-len` above them, which vLLM
refuses unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 lets it start. With a drafter, the drafter's own positions are the
table (the knowledge base's entry says so); without one, the bound read against the length the log shows decides
how sure this is."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bot.core.parsed_log import ProblemLine
from bot.core.triage.atlas_readers.candidates import traceback_frames
from bot.core.triage.atlas_readers.host import has_spec
from bot.core.triage.atlas_readers.quoting import quoted
from bot.core.triage.evidence import position
from bot.core.triage.findings import Finding

if TYPE_CHECKING:
    from bot.core.triage.detectors.state import State

_BOUND = re.compile(r"index out of bounds: 0 <= .{1,160}? < (?P<n>\d{3,9})\b")
_ROTARY = re.compile(r"rotary|(?<![a-z])rope(?![a-z])|cos_sin")
ROPE_DOC = "https://docs.vllm.ai/en/latest/configuration/engine_args.html"


def index_bound(st: State) -> None:
    lines = [*st.ev.parsed.problems, *st.ev.parsed.loose]
    line = next((p for p in lines if p.kind != "frame" and _BOUND.search(p.origin.text or p.message)), None)
    if line is None or any(f.id == "index-past-positions" for f in st.findings):
        return
    drafter = has_spec(st)
    hit = _BOUND.search(line.origin.text or line.message)
    assert hit is not None
    rows = int(hit["n"])
    length = st.ev.context.max_model_len
    if length is not None and length <= rows:
        return  # every position the server admits fits the table: another table of N rows
    seen = length is not None
    # the log ties N to the model's positions (vLLM's own warning quoting max_position_embeddings, a rotary frame);
    # otherwise N may as well be the vocabulary (a token id past it), and the positions are one reading of two
    tied = _positions_named(st, line, rows)
    st.findings.append(Finding(
        id="index-past-positions", severity="critical", confidence="medium" if tied else "low",
        title=f"A compiled kernel indexed a table of {rows} rows past its end"
              + (f" — and the server admits {length} positions" if seen else ""),
        summary=(f"The kernel's own bounds check fired: an index reached {rows} or more in a table of {rows} rows. "
                 + (f"The server runs with max_model_len {length}, more than {rows}. " if seen else "")
                 + (f"The log ties {rows} to the model's positions: the rotary cos/sin cache (max_position_embeddings "
                    f"rows) is indexed past its end once a sequence passes {rows} tokens." if tied else
                    f"If {rows} is the model's max_position_embeddings (its config.json), a sequence longer than the "
                    f"model's positions indexed the rotary table past its end (--max-model-len set above them); if it "
                    f"is the vocabulary size, a token id past the vocabulary (a tokenizer that does not match the "
                    f"model).")),
        evidence=[quoted(line)],
        remediation=[*([f"With a drafter, its own positions are a table too, often shorter than the target's: if "
                        f"the drafter's config.json says {rows}, the drafter caps the length."] if drafter else []),
                     f"Keep `--max-model-len` at or below the model's max_position_embeddings ({rows} if that is "
                     "what config.json says) — VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 only lets a longer length start, the "
                     "model's tables stay their size — or give the model more positions the way its card says "
                     "(rope scaling through `--hf-overrides`), which sizes the tables to the new length."],
        sources=[ROPE_DOC], priority=40, part="config", knobs=["--max-model-len", "--hf-overrides"],
        inputs=["--max-model-len", "VLLM_ALLOW_LONG_MAX_MODEL_LEN"], at=position(line.origin),
        level=line.origin.level or "EXCEPTION", is_bug=False))


def _positions_named(st: State, line: ProblemLine, rows: int) -> bool:
    said = re.compile(rf"max_position_embeddings['\"]?(?:=|: ){rows}\b")
    if any(said.search(p.origin.text or p.message) for p in [*st.ev.parsed.problems, *st.ev.parsed.loose]):
        return True
    frames = traceback_frames(st.ev.parsed.problems, line)
    return any(_ROTARY.search(f"{q.frame_file or ''} {q.frame_function or ''}") for q in frames)
