"""What several kinds of detector use: the words they fill in, the evidence lines they quote, whether the
deployment speculates at all."""

from __future__ import annotations

import re
import string
from typing import Any, Literal

from bot.core.parsed_log import Origin
from bot.core.triage.acceptance import Curve
from bot.core.triage.evidence import Evidence, Window

MAX_EVIDENCE_CHARS = 400
P1_MARGIN = 0.15  # below the method's typical first-position rate by more than this: low


class _Params(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def fill(text: str, params: dict[str, Any]) -> str:
    try:
        return string.Formatter().vformat(text, (), _Params(params))
    except (ValueError, IndexError, KeyError):
        return text


def line_evidence(origin: Origin | None, prefix: str = "") -> str:
    if origin is None:
        return prefix
    text = origin.text if len(origin.text) <= MAX_EVIDENCE_CHARS else origin.text[:MAX_EVIDENCE_CHARS] + " …"
    return f"{prefix}{origin.where()}: {text}"


def base_params(ev: Evidence) -> dict[str, Any]:
    ctx = ev.context
    w = ev.window
    return {
        "host": ctx.host or "<host>",
        "version": ctx.version_text(),
        "method": ctx.method or "speculative decoding",
        "target": ctx.target_model or "the target model",
        "mean": f"{w.mean:.2f}" if w else "n/a",
        "samples": len(w.samples) if w else 0,
    }


def window_evidence(w: Window, curve: Curve) -> list[str]:
    out = []
    counts = f": accepted {w.accepted} of {w.drafted} drafted tokens ({w.rate:.1f}%)" if w.counts_known else ""
    ceiling = f" of at most {curve.ceiling:.0f} (k = {curve.k})" if curve.ceiling else ""
    out.append(f"mean acceptance length {w.mean:.2f}{ceiling} over {len(w.samples)} sample(s){counts}")
    if w.per_position:
        out.append(f"per-position acceptance: {', '.join(f'{x:.3f}' for x in w.per_position)} — {curve.describe()}")
    last = w.samples[-1].origin if w.samples else None
    if last is not None and last.text:
        out.append(line_evidence(last, "last sample, "))
    return out


_SPEC_FRAME = re.compile(r"spec_decode/|/(?:\w*eagle\w*|\w*mtp\w*|\w*dflash\w*|medusa|ngram_proposer)\.py$")


def spec_decoding(ev: Evidence) -> Literal["on", "off", "unknown"]:
    """Does the deployment speculate? On: a method, k or drafter is known, the log has SpecDecoding lines, or a
    traceback runs through the speculative-decoding code. Off: the server's own arguments were read and name no
    speculative config, and nothing else says so."""
    ctx = ev.context
    if ctx.method or ctx.num_speculative_tokens or ctx.drafter or ev.window is not None or ev.parsed.samples:
        return "on"
    if any(p.kind == "frame" and _SPEC_FRAME.search((p.frame_file or "").replace("\\", "/"))
           for p in ev.parsed.problems):
        return "on"
    args = [c.value for c in ev.parsed.clues if c.kind == "args" and isinstance(c.value, dict)]
    if args and not any(a.get("speculative_config") or a.get("speculative_model") for a in args):
        return "off"
    return "unknown"
