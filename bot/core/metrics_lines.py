"""vLLM's metrics lines -> samples: a SpecDecoding line of any release (Form A/B, V0's `Speculative metrics`) or
a fragment of one, judged by vLLM's own identities, and an Engine line (throughput, queue, KV cache).

`specline.py` reads a message's label/value fields; this module turns them into numbers and judges them."""

from __future__ import annotations

import itertools
import math
import re

from bot.core.parsed_log import EngineSample, Origin, SpecDecodeSample
from bot.core.specline import spec_fields

ENGINE_RE = re.compile(
    r"(?:Engine (?P<engine>\d{3}): |(?P<n_engines>\d+) Engines Aggregated: |(?=Avg prompt throughput: ))"
    r"(?P<body>Avg prompt throughput: .*)$"
)
_ENGINE_PART_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z ]*?): (?P<val>-?[\d.]+|nan)(?P<unit> tokens/s| reqs|%)?$")
# the rest of a SpecDecoding line a terminal wrapped, or a fragment pasted over several lines
CONTINUATION_RE = re.compile(r"^\s*(?:(?:nan|\d*\.\d+|\d+)\s*(?:[,/]|$)|(?:Avg Draft|Per-position|Accepted|Drafted|"
                             r"Mean acceptance|Draft acceptance)\b)", re.IGNORECASE)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _consistent(mean: float, per_position: list[float]) -> bool:
    """vLLM's identity `mean - 1 == sum(per-position)`, within the rounding of %.2f and %.3f."""
    if not per_position or math.isnan(mean):
        return True
    total = sum(0.0 if math.isnan(x) else x for x in per_position)
    tolerance = 0.006 + 0.0006 * len(per_position)
    if any(b > a + 1e-9 for a, b in itertools.pairwise(per_position)):
        return False  # rates never increase with position: this line was cut or interleaved
    return abs((mean - 1.0) - total) <= tolerance or abs(mean - total) <= tolerance


def _drafts(mean: float, accepted: int, drafted: int, k: int) -> float | None:
    """How many drafts the interval had. `drafted / k` only when every draft has k tokens: ngram drafts
    fewer when the prompt has no match (seen on vLLM 0.32: Drafted 40 tokens at k = 3, mean 3.50), so
    derive it from vLLM's own identity mean = 1 + accepted / drafts whenever something was accepted."""
    if accepted > 0 and not math.isnan(mean) and mean > 1.0:
        return max(1.0, float(round(accepted / (mean - 1.0))))
    return (drafted / k) if k else None


def parse_spec_message(msg: str, origin: Origin | None = None, k_hint: int | None = None,
                       fields: dict[str, str] | None = None) -> SpecDecodeSample | None:
    """A SpecDecoding line of any release (Form A/B, V0 `Speculative metrics`) or any fragment of one.

    What is missing is derived from vLLM's identities: mean = 1 + sum(per-position rates) and
    mean = 1 + accepted / drafts with drafts = drafted / k when every draft holds k tokens."""
    f = dict(fields) if fields is not None else spec_fields(msg)
    if "ex_acc" in f and "ex_dr" in f and "acc" not in f:
        f["acc"], f["dr"] = f["ex_acc"], f["ex_dr"]
    whole = "SpecDecoding metrics" in msg or "Speculative metrics" in msg
    if "acc_v0" in f or "k" in f:  # the V0 layout: cumulative counters, the rate as a fraction
        return _v0_sample(f, origin, k_hint, whole)
    return _interval_sample(f, origin, k_hint, whole)


def _v0_sample(f: dict[str, str], origin: Origin | None, k_hint: int | None, whole: bool) -> SpecDecodeSample | None:
    """V0's `Speculative metrics`: counters since the start (a cumulative sample), the rate a fraction unless `%`."""
    k = int(_float(f.get("k", "0")) or 0) or (k_hint or 0)
    acc, dr = int(_float(f.get("acc_v0", "0"))), int(_float(f.get("dr_v0", "0")))
    drafts = dr / k if k else 0.0
    mean = 1.0 + acc / drafts if drafts else math.nan
    rate = _float(f["rate"]) if "rate" in f else (100.0 * acc / dr if dr else math.nan)
    if "rate" in f and "rate_pct" not in f:
        rate *= 100.0
    # the order matters: a counter that reads as nan raises in `int()` above even when its pair is missing
    if not ("acc_v0" in f and "dr_v0" in f):
        return None
    return SpecDecodeSample(form="V0", mean_acceptance_length=mean, accepted=acc, drafted=dr, per_position=[],
                            avg_draft_acceptance_rate=rate, num_drafts=drafts or None, cumulative=True,
                            origin=origin, fragment=not whole)


def _interval_sample(f: dict[str, str], origin: Origin | None, k_hint: int | None,
                     whole: bool) -> SpecDecodeSample | None:
    """Form A/B (0.8.5+) or a fragment of it: the counts are the interval's."""
    # Form A printed `Draft acceptance rate`, Form B `Avg Draft acceptance rate`
    form = "A" if ("rate" in f and "avg_rate" not in f) else "B"
    read = _rates_and_mean(f, form)
    if read is None:
        return None
    pp, mean = read
    counts = (int(_float(f["acc"])), int(_float(f["dr"]))) if "acc" in f and "dr" in f else None
    acc, dr = counts or (0, 0)
    k = len(pp) or k_hint or 0
    rate = _rate(f, acc, dr)
    derived: list[str] = []
    if math.isnan(mean):
        mean = _derived_mean(pp, k, acc, dr, rate, derived)
    checked = _checked_mean(mean, form, pp, counts)
    if checked is None:
        return None
    num_drafts, mean = _num_drafts(f, checked, acc, dr, k, counts is not None)
    return SpecDecodeSample(
        form=form, mean_acceptance_length=mean, accepted=acc, drafted=dr, per_position=pp,
        avg_draft_acceptance_rate=rate, accepted_tps=_float(f["atps"]) if "atps" in f else None,
        drafted_tps=_float(f["dtps"]) if "dtps" in f else None, num_drafts=num_drafts, origin=origin,
        counts_known=counts is not None, derived=derived,
        fragment=not whole or not ("mean" in f and counts is not None and bool(pp)),
    )


def _rates_and_mean(f: dict[str, str], form: str) -> tuple[list[float], float] | None:
    """The per-position rates and the printed mean (nan if none), or None if this is no interval of vLLM's."""
    pp = _rates_loose(f["pp"]) if "pp" in f else []
    if not (pp or _says_anything(f)) or not _plausible_rates(pp):
        return None
    if "mean" not in f:
        return pp, math.nan
    mean = _float(f["mean"])
    if pp and not _consistent(mean, pp):
        return None
    if form == "A" and pp and abs(mean - sum(pp)) < abs(mean - 1.0 - sum(pp)):
        mean += 1.0  # 0.8.5 printed accepted/drafts without the bonus token
    return pp, mean


def _says_anything(f: dict[str, str]) -> bool:
    """A field an interval can be read from, besides the per-position rates."""
    return "mean" in f or ("acc" in f and "dr" in f) or "avg_rate" in f or "rate" in f


def _plausible_rates(pp: list[float]) -> bool:
    known = [x for x in pp if not math.isnan(x)]
    if any(x > 1.0 + 1e-9 or x < 0.0 for x in known):
        return False  # a rate is a fraction of drafts: this is not vLLM's line
    return not any(b > a + 1e-9 for a, b in itertools.pairwise(known))  # rates never rise: cut or interleaved


def _rate(f: dict[str, str], acc: int, dr: int) -> float | None:
    """The acceptance rate in percent: as printed (Form B's average first), else from the counts."""
    text = f.get("avg_rate", f.get("rate"))
    if text is not None:
        return _float(text)
    return 100.0 * acc / dr if dr else None


def _derived_mean(pp: list[float], k: int, acc: int, dr: int, rate: float | None, derived: list[str]) -> float:
    """The mean a line did not print, from what it did; `derived` gets how, for the report."""
    if k and dr:
        derived.append(f"mean from the counts (1 + k·accepted/drafted, k = {k})")
        return 1.0 + k * acc / dr
    if pp:
        derived.append("mean from the per-position rates (1 + their sum)")
        return 1.0 + sum(0.0 if math.isnan(x) else x for x in pp)
    if rate is not None and not math.isnan(rate) and k:
        derived.append(f"mean from the acceptance rate (k = {k})")
        return 1.0 + k * rate / 100.0
    return math.nan


def _checked_mean(mean: float, form: str, pp: list[float], counts: tuple[int, int] | None) -> float | None:
    """The mean to report, or None when it shows the line is not vLLM's or leaves nothing to judge."""
    if form == "B" and mean < 1.0:  # (nan is not below 1: a mean still unknown goes on)
        return None  # 1 + accepted / drafts is never below 1: not vLLM's number
    if not math.isnan(mean):
        return mean
    if counts is not None and counts[1] > 0 and counts[0] == 0:
        return 1.0  # nothing accepted: 1.00 whatever k is
    if not pp and counts is None:
        return None  # a rate alone, without k: nothing to judge
    return mean


def _num_drafts(f: dict[str, str], mean: float, acc: int, dr: int, k: int,
                counts_known: bool) -> tuple[float | None, float]:
    """The interval's drafts, and the mean they give when it is still unknown: as printed (the offline
    example's `num_drafts`) over what `_drafts` derives."""
    derived = _drafts(mean, acc, dr, k) if counts_known else None
    if "ex_drafts" in f and (printed := _float(f["ex_drafts"])) > 0:
        return printed, (1.0 + acc / printed if math.isnan(mean) else mean)
    return derived, mean


def _rates_loose(text: str) -> list[float]:
    return [_float(x.strip()) for x in re.split(r"[,/]", text) if x.strip()]


def parse_engine_message(msg: str, origin: Origin | None = None) -> EngineSample | None:
    m = ENGINE_RE.search(msg)
    if not m:
        return None
    values: dict[str, float] = {}
    kv_device: str | None = None
    for part in m["body"].rstrip(". ").split(", "):
        pm = _ENGINE_PART_RE.match(part.strip())
        if not pm:
            continue  # e.g. 0.33's "KV fetch: ..." part: keep what we know
        key = pm["key"]
        if key.endswith("KV cache usage") and key != "KV cache usage":
            device = key.split()[0]
            if kv_device is None:  # V0 prints GPU then CPU: the first one is the accelerator
                kv_device = device
                key = "KV cache usage"
        values[key] = _float(pm["val"])
    if "Avg prompt throughput" not in values:
        return None

    def intval(name: str) -> int | None:
        v = values.pop(name, None)
        return None if v is None or math.isnan(v) else int(v)

    sample = EngineSample(
        prompt_tps=values.pop("Avg prompt throughput", None),
        generation_tps=values.pop("Avg generation throughput", None),
        running=intval("Running"),
        waiting=intval("Waiting") if "Waiting" in values else intval("Pending"),  # V0 said "Pending"
        kv_cache_usage=values.pop("KV cache usage", None),
        kv_cache_device=kv_device,
        prefix_cache_hit_rate=values.pop("Prefix cache hit rate", None),
        engine=int(m["engine"]) if m["engine"] else None,
        engines_aggregated=int(m["n_engines"]) if m["n_engines"] else None,
        origin=origin,
    )
    sample.extra = values
    return sample
