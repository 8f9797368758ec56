"""The problem lines the atlas is asked about, and the message inside the envelopes some of them come in."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace

from bot.core.parsed_log import ProblemLine
from bot.core.triage.evidence import position


@dataclass
class Candidate:
    line: ProblemLine
    frames: list[ProblemLine] = field(default_factory=list)  # the traceback that ended in this line
    before: list[ProblemLine] = field(default_factory=list)  # the problem lines just before it


# the more a kind of line says about a failure, the sooner it is placed
_RANKS = ("exception", "error", "warning", "loose")
_LEVEL_RANKS = {"ERROR": "error", "CRITICAL": "error", "WARNING": "warning", "WARN": "warning"}


def traceback_frames(problems: list[ProblemLine], line: ProblemLine) -> list[ProblemLine]:
    """The frames of the traceback a line ends; none for a line outside a traceback (no id to join them by)."""
    if line.traceback_id is None:
        return []
    return [q for q in problems if q.kind == "frame" and q.traceback_id == line.traceback_id]


def candidates(problems: list[ProblemLine], start: int, fallbacks: frozenset[str]) -> list[Candidate]:
    """Exceptions (with the frames of their traceback) first, then error lines, then warnings; once each."""
    frames = _frames_by_traceback(problems)
    detailed = _detailed_tracebacks(problems)
    ranked: dict[str, list[tuple[int, ProblemLine]]] = {rank: [] for rank in _RANKS}
    for n, p in enumerate(problems):
        rank = _rank(p)
        if rank in ranked and _open(p, start, fallbacks, detailed):
            ranked[rank].append((n, p))
    at: dict[str, int] = {}
    out: list[Candidate] = []
    for rank in _RANKS:
        for n, p in ranked[rank]:
            # a bare `assert` raises with no message: its class and traceback tell it apart
            key = p.message.strip()[:200] or (f"{p.exception}@{p.traceback_id}" if p.kind == "exception" else "")
            if not key:
                continue
            cand = Candidate(p, _frames_of(p, n, problems, frames), problems[max(0, n - 5):n])
            if key not in at:
                at[key] = len(out)
                out.append(cand)
            elif len(cand.frames) > len(out[at[key]].frames):
                out[at[key]] = cand  # the same exception printed again with its traceback: the frames say where
    # a traceback whose exception line the log (or the paste) does not hold: its frames still say where
    ended = {p.traceback_id for p in problems if p.kind == "exception"}
    for tb, fs in frames.items():
        if tb not in ended and position(fs[-1].origin) >= start:
            out.append(Candidate(fs[-1], fs))
    return out


def _frames_of(p: ProblemLine, n: int, problems: list[ProblemLine],
               frames: dict[int, list[ProblemLine]]) -> list[ProblemLine]:
    """The traceback an exception ends: its own, or — an exception line that lost its process prefix (a paste, a
    worker's stderr) — the frames right before it."""
    if p.traceback_id is not None:
        return _fullest_sibling(p, frames.get(p.traceback_id, []), problems, frames)
    if p.kind == "exception" and n > 0 and problems[n - 1].kind == "frame" and problems[n - 1].traceback_id is not None:
        return frames.get(problems[n - 1].traceback_id or 0, [])
    return []


# a worker named for its rank (`VllmWorker rank=1`, `Worker_TP1`, `EngineCore_DP0`): its siblings run the same code
_RANKED = re.compile(r"^(?P<base>.+?)(?: rank=\d+|_(?:TP|DP|PP|EP)\d+(?:_\w+)?)$")


def _fullest_sibling(p: ProblemLine, own: list[ProblemLine], problems: list[ProblemLine],
                     frames: dict[int, list[ProblemLine]]) -> list[ProblemLine]:
    """The ranks of one parallel group fail alike, and their tracebacks interleave in a log (a paste cuts some of
    them short): an exception's traceback is its own, or a sibling rank's fuller one that ends in the same exception
    or in none the log holds."""
    rank = _RANKED.match(p.origin.proc or "")
    if p.kind != "exception" or rank is None:
        return own
    ends = {q.traceback_id: q for q in problems if q.kind == "exception" and q.traceback_id is not None}
    best = own
    for tb, fs in frames.items():
        sibling = _RANKED.match(fs[-1].origin.proc or "")
        if sibling is None or sibling["base"] != rank["base"] or len(fs) <= len(best):
            continue
        end = ends.get(tb)
        if end is None or (end.exception == p.exception and end.message[:200] == p.message[:200]):
            best = fs
    return best


def _frames_by_traceback(problems: list[ProblemLine]) -> dict[int, list[ProblemLine]]:
    frames: dict[int, list[ProblemLine]] = {}
    for p in problems:
        if p.kind == "frame" and p.traceback_id is not None:
            frames.setdefault(p.traceback_id, []).append(p)
    return frames


def _detailed_tracebacks(problems: list[ProblemLine]) -> set[int | None]:
    # pydantic's `N validation error(s) for XConfig` heads the lines that say what failed: those are placed
    return {p.traceback_id for p in problems if p.kind == "exception" and p.traceback_id is not None
            and (p.config_field or p.exception in ("ValueError", "AssertionError"))}


def _rank(p: ProblemLine) -> str:
    if p.kind in ("exception", "loose"):
        return p.kind
    return _LEVEL_RANKS.get((p.origin.level or "").upper(), "")


def _open(p: ProblemLine, start: int, fallbacks: frozenset[str], detailed: set[int | None]) -> bool:
    """A line of the latest launch that no entry but a catch-all explains, and not a headline of details."""
    if p.kind == "frame" or position(p.origin) < start:
        return False
    if p.explained_by is not None and p.explained_by not in fallbacks:
        return False
    return not (p.exception == "ValidationError" and p.config_field is None and p.traceback_id in detailed)


_EMBEDDED_REPR = re.compile(r"\b([A-Z]\w*(?:Error|Exception))\((\")(.{16,1000}?)\"\)|"
                            r"\b([A-Z]\w*(?:Error|Exception))\((')([^']{16,1000})'\)")
_REPR_EXC_RE = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception))\((['\"])(.+)\2,?\)$", re.DOTALL)


def unwrapped(p: ProblemLine) -> ProblemLine:
    """The message inside two common envelopes: an exception logged by its repr (V0's engine logs
    `AssertionError('…')`), and the OpenAI server's JSON error body (`{"object":"error","message":"…"}`, or the
    same under `"error"`)."""
    text = p.message.strip()
    if text.startswith("{") and '"message"' in text:
        return _from_json(p, text)
    body = _CLIENT_QUOTED.search(text)
    if body is not None:  # a client's words before the body (`Error: HTTP 400: Bad Request — {…}`)
        return _from_json(p, text[body.start():])
    return _from_repr(p, text) or _from_tuple(p, text) or p


# where a client's log line starts quoting the server's JSON error body, after its own words
_CLIENT_QUOTED = re.compile(r'\{\s{0,3}"(?:object|error)"\s{0,3}:')


def _from_json(p: ProblemLine, text: str) -> ProblemLine:
    try:
        body, _ = json.JSONDecoder().raw_decode(text)  # what the client printed after the body is not the body's
    except ValueError:
        return p
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]  # the OpenAI API's own shape, which later releases answer with: {"error": {…}}
    if isinstance(body, dict) and isinstance(body.get("message"), str) and body["message"].strip():
        kind = body.get("type")
        return replace(p, kind="exception", message=body["message"].strip(),
                       exception=kind if isinstance(kind, str) and kind else p.exception)
    return p


def _from_repr(p: ProblemLine, text: str) -> ProblemLine | None:
    hit = _REPR_EXC_RE.match(text)
    if hit is None:
        # a wrapper's sentence that quotes the exception's repr: `…, error: ValueError("…")', please check …`
        inner = _EMBEDDED_REPR.search(text)
        if inner is None:
            return None
        cls, msg = (inner.group(1), inner.group(3)) if inner.group(1) else (inner.group(4), inner.group(6))
        return replace(p, kind="exception", message=msg.replace("\\'", "'"), exception=cls)
    return replace(p, kind="exception", message=hit[3].replace("\\'", "'"), exception=hit[1])


def _from_tuple(p: ProblemLine, text: str) -> ProblemLine | None:
    # `raise RuntimeError("a ", "b ")` prints the tuple of its arguments: the message is their concatenation
    if not (text.startswith("('") and text.endswith("')")):
        return None
    pieces = re.findall(r"'((?:[^'\\]|\\.)*)'", text)
    return replace(p, message="".join(pieces).strip()) if len(pieces) >= 2 else None
