"""What a SpecDecoding metrics message says, field by field: its labels read by their words, their values as text.

`metrics_lines.py` turns these fields into samples and judges the numbers; this module knows only vLLM's wordings
across releases (and fair variants of them). Every form is documented in shared/reference/vllm-logs.md.
"""

from __future__ import annotations

import re
from functools import lru_cache

# ... and its per-position lines: `acceptance at token 0: 0.91` (`Acceptance rate at token 1: 0.34` in some copies)
TOKEN_RATE_RE = re.compile(r"^\s*acceptance(?: rate)? at (?:token|position) \d+:\s*(?P<v>\d*\.\d+|\d+)\s*$",
                           re.IGNORECASE)
# words that make a line worth reading as SpecDecoding metrics (lower-case); the fields decide whether it is
SPEC_KEYS = ("acceptance", "num_accepted_tokens", "accepted throughput", "drafted throughput",
             "number of accepted tokens", "system efficiency", "specdecoding metrics", "speculative metrics")
SPEC_HEADERS = ("specdecoding metrics", "speculative metrics")


def looks_like_spec(text: str) -> bool:
    """A SpecDecoding line, a fragment of one, or a variant of its wording: its header, or a field read off it."""
    low = text.lower()
    if any(h in low for h in SPEC_HEADERS):
        return True
    if any(k in low for k in SPEC_KEYS) or ("tokens" in low and ("accepted" in low or "drafted" in low)):
        return bool(spec_fields(text))
    return False


# A metrics message is read as (label, value) pairs, whatever separates them (`,` `;` `|` ` - `), whichever
# of `:` or `=` ends a label, in any order and case: a label is a run of words before `:`/`=`, its value what
# follows up to the next label. Labels map to fields by their words, not by their exact text, so a doubled
# word, another word order or an extra field does not stop the line from being read.
_LABEL_RE = re.compile(r"([A-Za-z][A-Za-z_ \-]*?)\s*(?<![<>!])[:=](?!=)")
_NUMBER_RE = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|\bnan\b|\binf\b", re.IGNORECASE)
_PER_SECOND_RE = re.compile(r"\s*(?:tokens?|tok|t)\s*/\s*s\b", re.IGNORECASE)
_UNIT_WORDS = frozenset({"tokens", "token", "tokens/s", "s", "reqs", "req", "requests", "of"})
_SEPARATORS = " \t,;|-"


def _label_words(label: str) -> tuple[str, ...]:
    words = re.split(r"[\s_\-]+", label.lower().strip())
    while words and words[0] in _UNIT_WORDS:  # the unit of the value before: `987 tokens, Drafted`
        words.pop(0)
    out: list[str] = []
    for w in words:
        if w and (not out or out[-1] != w):  # a doubled word reads as one
            out.append(w)
    return tuple(out)


# The words `_field_of` decides by (a label is read once: `_label` caches what it names)
_ACCEPT = frozenset({"acceptance", "accept", "accepted", "acceptance-rate"})
_DRAFT = frozenset({"draft", "drafted"})
_POSITION = frozenset({"position", "per-position"})
_RATES = frozenset({"rate", "rates"})
_THROUGHPUT = frozenset({"throughput", "tps"})
_COUNTER = frozenset({"number", "num"})
_AVERAGE = frozenset({"avg", "average", "mean"})
_ACCEPTED_COUNT = frozenset({"total", "count", "accepted"})
_DRAFTED_COUNT = frozenset({"total", "count", "drafted", "draft"})
# labels that name the mean without saying `mean`
_MEAN_ALIASES = frozenset({("al",), ("mal",), ("acceptance", "length")})
# a throughput's field by the other words of its label, the first that matches
_THROUGHPUT_FIELDS: tuple[tuple[frozenset[str], str], ...] = (
    (frozenset({"accepted", "acceptance"}), "atps"),
    (_DRAFT, "dtps"),
)
# V0's `Number of ... tokens` and the offline example's `num_..._tokens` (`ex_`): (word, example's field,
# V0's field); a label holding two of these words is named by the earlier one
_COUNTER_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("drafts", "ex_drafts", "ex_drafts"),
    ("speculative", "k", "k"),
    ("emitted", "em_v0", "em_v0"),
    ("accepted", "ex_acc", "acc_v0"),
    ("draft", "ex_dr", "dr_v0"),
    ("drafted", "ex_dr", "dr_v0"),
)


def _field_of(words: tuple[str, ...]) -> str | None:
    """Which SpecDecoding field a label names, by its words (vLLM's across releases, and fair variants)."""
    w = frozenset(words)
    if not w:
        return None
    acc = not w.isdisjoint(_ACCEPT)
    if not w.isdisjoint(_POSITION) or {"per", "pos"} <= w:
        return "pp" if acc or not w.isdisjoint(_RATES) else None
    if ("mean" in w and (acc or "length" in w)) or words in _MEAN_ALIASES:
        return "mean"
    if not w.isdisjoint(_THROUGHPUT):
        return next((name for needs, name in _THROUGHPUT_FIELDS if not w.isdisjoint(needs)), None)
    if "efficiency" in w:
        return "eff"
    if not w.isdisjoint(_COUNTER):
        return _counter_field(w)
    return _rate_or_count_field(w, acc)


def _counter_field(w: frozenset[str]) -> str | None:
    example = "num" in w and "number" not in w
    for word, example_name, v0_name in _COUNTER_FIELDS:
        if word in w:
            return example_name if example else v0_name
    return None


def _rate_or_count_field(w: frozenset[str], acc: bool) -> str | None:
    """The rate (Form A's, or Form B's average) and the interval's bare counts (`Accepted: 987 tokens`)."""
    if acc and "rate" in w and not w.isdisjoint(_DRAFT):
        return "avg_rate" if not w.isdisjoint(_AVERAGE) else "rate"
    if "accepted" in w and w <= _ACCEPTED_COUNT:
        return "acc"
    if ("drafted" in w or w == {"draft"}) and w <= _DRAFTED_COUNT:
        return "dr"
    return None


@lru_cache(maxsize=4096)
def _label(label: str) -> tuple[tuple[str, ...], str | None]:
    """A label's words and the field they name; labels repeat line after line, so each is read once."""
    words = _label_words(label)
    return words, _field_of(words)


def _labelled(msg: str) -> list[tuple[tuple[str, ...], str | None, str]]:
    marks = list(_LABEL_RE.finditer(msg))
    out: list[tuple[tuple[str, ...], str | None, str]] = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(msg)
        words, name = _label(m[1])
        out.append((words, name, msg[m.end():end].strip(_SEPARATORS)))
    return out


_RATE_RE = re.compile(r"\s*(?P<v>-?(?:\d+(?:\.\d*)?|\.\d+)|nan)(?:\s*\(\s*[x×]\s*(?P<n>\d{1,3})\s*\))?",
                      re.IGNORECASE)
_RATE_SEP_RE = re.compile(r"\s*[,/]|\s+(?=[\d.]|nan)", re.IGNORECASE)


def _rates_text(value: str) -> str | None:
    """The leading list of rates (`0.9, 0.8`, `0.9 / 0.8`, `0.000 (x13)`); what follows it is not a rate."""
    nums: list[str] = []
    pos = 0
    while (m := _RATE_RE.match(value, pos)) is not None:
        nums.extend([m["v"].lower()] * (int(m["n"]) if m["n"] else 1))
        sep = _RATE_SEP_RE.match(value, m.end())
        if sep is None:
            break
        pos = sep.end()
    return ", ".join(nums) if nums else None


def spec_fields(msg: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for _words, name, value in _labelled(msg):
        if name is None or name in out:  # the first of a field wins, as the regexes did
            continue
        if name == "pp":
            rates = _rates_text(value)
            if rates is not None:
                out[name] = rates
            continue
        m = _NUMBER_RE.match(value)
        if m is None:
            continue
        if name in ("acc", "dr") and _PER_SECOND_RE.match(value, m.end()):
            name = "atps" if name == "acc" else "dtps"  # `drafted=90 tok/s` is a throughput, not a count
            if name in out:
                continue
        out[name] = m[0].lower()
        if name in ("rate", "avg_rate") and value[m.end():].lstrip().startswith("%"):
            out["rate_pct"] = "1"
    return out
