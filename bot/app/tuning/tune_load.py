"""A k per load for `specops tune`: the fastest setting at each concurrency the sweep measured, and how to serve
it — a batch-size schedule where the profile's vLLM release takes one, else the one k that fits the load the host
saw (the watch's samples), else the one closest to the best at every concurrency measured.

vLLM's per-batch-size k is the speculative config key `num_speculative_tokens_per_batch_size` (a list of
[start_bs, end_bs, k], inclusive ranges; the first starts at 1; k = 0 drafts nothing; each k is capped by
num_speculative_tokens). Which releases have it is read from the atlas of vLLM's released source
(core/knowledge/atlas: every release since 0.18), not assumed: it appeared in vLLM 0.24.0 (PR #32374).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Sequence
from functools import lru_cache

from packaging.version import InvalidVersion, Version

from bot.config import Profile
from bot.core.alerts import WatchSample
from bot.core.results.tune import (
    BatchSizeOption,
    LoadBest,
    Measured,
    ObservedLoad,
    PerLoad,
    Recommendation,
    TuneRow,
)
from bot.store.facade import Store

__all__ = ["LOAD_HOURS", "OPTION_KEY", "by_concurrency", "observed_load", "per_load", "yaml_lines"]

LOAD_HOURS = 24.0
OPTION_KEY = "num_speculative_tokens_per_batch_size"
OPTION_FIELD = f"SpeculativeConfig.{OPTION_KEY}"
NEEDS_DRAFTER = frozenset({"dflash", "eagle", "eagle3", "draft_model"})
# read in vLLM 0.24.0's sdist (the first release with the key; 0.23.0 has none): the field, its docs page, the PR
FIRST_RELEASE_READ = "0.24.0"
FIRST_SOURCE = "https://github.com/vllm-project/vllm/blob/v0.24.0/vllm/config/speculative.py#L162"
FIRST_DOCS = ("https://github.com/vllm-project/vllm/blob/v0.24.0/docs/features/speculative_decoding/"
              "dynamic_speculative_decoding.md")
OPTION_PR = "https://github.com/vllm-project/vllm/pull/32374"
MTP_REPORT = "https://github.com/vllm-project/vllm/issues/49548"


def yaml_lines(profile: str, method: str, k: int | None, drafter: str | None,
               schedule: Sequence[tuple[int, int, int]] | None = None) -> str:
    """The profile lines to paste for a setting (and its batch-size schedule)."""
    lines = ["profiles:", f"  {profile}:", f"    method: {method}"]
    if k is not None:
        lines.append(f"    num_speculative_tokens: {k}")
    else:
        lines.append("    # remove num_speculative_tokens (and drafter)")
    if schedule:
        lines += ["    speculative_extra:", f"      {OPTION_KEY}: {json.dumps([list(e) for e in schedule])}"]
    if method not in NEEDS_DRAFTER and drafter:
        lines.append("    # remove drafter")
    return "\n".join(lines)


# --- what the sweep measured --------------------------------------------------------------------

def _rated(rows: Sequence[TuneRow], concurrency: int) -> list[tuple[Measured, float]]:
    return [(r, tps) for r in rows if isinstance(r, Measured) and r.concurrency == concurrency
            and (tps := r.tokens_per_s)]


def by_concurrency(rows: Sequence[TuneRow], levels: Sequence[int]) -> tuple[LoadBest, ...]:
    """The fastest measured setting at each concurrency (the first of equals: the sweep's order), beside no
    speculation measured at the same concurrency."""
    out: list[LoadBest] = []
    for c in levels:
        rated = _rated(rows, c)
        if not rated:
            continue
        row, tps = max(rated, key=lambda rt: rt[1])
        none = next((t for r, t in rated if r.method == "none"), None)
        out.append(LoadBest(c, row.method, row.k, tps, none))
    return tuple(out)


# --- the load the host saw ----------------------------------------------------------------------

def observed_load(store: Store, host: str, levels: Sequence[int], now: float | None = None) -> ObservedLoad | None:
    """Requests running in the watch's samples of the last LOAD_HOURS with a request running (an idle host says
    nothing about which k to serve), and the measured concurrency nearest their median (on a log scale: 2 is as
    far from 1 as 8 is from 4)."""
    since = (now or time.time()) - LOAD_HOURS * 3600
    running = sorted(n for _, up, data in store.samples.for_host(host, since) if up
                     and (n := WatchSample.from_dict(data).running) is not None and n >= 1)
    if not running or not levels:
        return None
    median = statistics.median(running)
    p90 = running[max(0, math.ceil(0.9 * len(running)) - 1)]
    nearest = min(levels, key=lambda c: (abs(math.log(c) - math.log(median)), c))
    return ObservedLoad(len(running), LOAD_HOURS, round(median, 2), round(p90, 2), nearest)


# --- vLLM's per-batch-size k ---------------------------------------------------------------------

@lru_cache(maxsize=1)
def _releases_with_option() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the vLLM releases the atlas read, those whose SpeculativeConfig has the key)."""
    from bot.core.atlas import load_atlas

    atlas = load_atlas()
    return atlas.releases, tuple(r for r in atlas.releases if atlas.knobs_for([OPTION_FIELD], r))


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def option() -> BatchSizeOption:
    read, have = _releases_with_option()
    first = have[0] if have else None
    source = FIRST_SOURCE if first == FIRST_RELEASE_READ else None
    checked = f"{read[0]}–{read[-1]}" if read else "none"
    return BatchSizeOption(OPTION_KEY, first, checked, source, FIRST_DOCS if source else None,
                           OPTION_PR if source else None)


def supported(version: str | None) -> bool | None:
    """Whether the release takes the key: the atlas' answer for a release it read, else from the first release
    that has it (None: no version named, or none readable)."""
    read, have = _releases_with_option()
    v = _version(version)
    if v is None:
        return None
    if any(_version(r) == v for r in read):
        return any(_version(r) == v for r in have)
    first = _version(have[0]) if have else None
    return first is not None and v >= first


# --- the schedule and the one k -------------------------------------------------------------------

def _method(rec: Recommendation | None, best: Sequence[LoadBest]) -> str | None:
    """The method a schedule varies k for: the recommendation's, else the first that wins a concurrency."""
    if rec is not None and rec.method != "none":
        return rec.method
    return next((b.method for b in best if b.method != "none"), None)


def _k_at(rows: Sequence[TuneRow], c: int, method: str) -> int | None:
    """The fastest k of `method` at concurrency c, 0 when no speculation was faster there."""
    rated = [(r, t) for r, t in _rated(rows, c) if r.method in (method, "none")]
    if not rated:
        return None
    row, _ = max(rated, key=lambda rt: rt[1])
    return 0 if row.method == "none" or row.k is None else row.k


def schedule(rows: Sequence[TuneRow], levels: Sequence[int], method: str) -> tuple[tuple[int, int, int], ...] | None:
    """[start, end, k] from the k measured best at each level: a range runs from its level to the next one
    (batch sizes between two levels take the lower one's k; vLLM carries the last k past the last range)."""
    found = [(c, k) for c in sorted(levels) if (k := _k_at(rows, c, method)) is not None]
    if len({k for _, k in found}) < 2:  # one k everywhere (or k = 0 everywhere): nothing to schedule
        return None
    out: list[list[int]] = []
    for i, (c, k) in enumerate(found):
        start = 1 if i == 0 else c
        end = found[i + 1][0] - 1 if i + 1 < len(found) else c
        if out and out[-1][2] == k:
            out[-1][1] = end
        else:
            out.append([start, end, k])
    return tuple((a, b, k) for a, b, k in out)


def _closest_everywhere(rows: Sequence[TuneRow], best: Sequence[LoadBest]) -> tuple[LoadBest, float] | None:
    """Of the settings measured at every concurrency, the one whose worst ratio to the best there is highest."""
    top = {b.concurrency: b.tokens_per_s for b in best}
    scored: list[tuple[float, LoadBest]] = []
    settings = {(r.method, r.k) for r in rows if isinstance(r, Measured)}
    for method, k in sorted(settings, key=lambda s: (s[0], s[1] or 0)):
        at = {r.concurrency: t for c in top for r, t in _rated(rows, c) if (r.method, r.k) == (method, k)}
        if set(at) != set(top):
            continue
        low = min(top)
        scored.append((min(at[c] / top[c] for c in top), LoadBest(low, method, k, at[low], None)))
    if not scored:
        return None
    worst, pick = max(scored, key=lambda s: s[0])
    return pick, worst


def _single(rows: Sequence[TuneRow], best: Sequence[LoadBest],
            load: ObservedLoad | None) -> tuple[LoadBest | None, str]:
    if load is not None:
        at = next((b for b in best if b.concurrency == load.concurrency), None)
        return at, (f"the load this host saw ({load.line}; concurrency {load.concurrency} is the level measured "
                    "nearest its median)")
    levels = ", ".join(str(b.concurrency) for b in best)
    if len(best) == 1:
        return best[0], (f"the one concurrency measured ({levels}; give more, e.g. --concurrency 1,8, for a k per "
                         f"load; the host's load is unknown: no watch sample with a request running in the last "
                         f"{LOAD_HOURS:g} h)")
    found = _closest_everywhere(rows, best)
    if found is None:
        return None, f"no setting was measured at every concurrency ({levels})"
    pick, worst = found
    return pick, (f"the sweep's levels (concurrency {levels}: never below {worst:.0%} of the best at any of them; "
                  f"the host's load is unknown: no watch sample with a request running in the last {LOAD_HOURS:g} h)")


def _notes(profile: Profile, method: str | None) -> tuple[str, ...]:
    notes = [f"vLLM {FIRST_RELEASE_READ}'s docs ({FIRST_DOCS}): tested with EAGLE and EAGLE-3 only, Model Runner "
             "V1 only, piece-wise CUDA graphs (a cost of its own at one request); check your release's page"]
    if profile.env.get("VLLM_USE_V2_MODEL_RUNNER") == "1":
        notes.append("this profile sets VLLM_USE_V2_MODEL_RUNNER=1, which vLLM 0.24.0's docs do not support with "
                     "a schedule")
    if method == "mtp":
        notes.append(f"with MTP a report of throughput collapsing under concurrency at the schedule's threshold "
                     f"was open when checked: {MTP_REPORT}")
    notes.append("measure the schedule (deploy it, then tune at these concurrency levels) before keeping it")
    return tuple(notes)


def per_load(name: str, profile: Profile, rows: Sequence[TuneRow], levels: Sequence[int],
             rec: Recommendation | None, load: ObservedLoad | None) -> PerLoad | None:
    """How to serve a k per load, from the rows measured (None: nothing measured)."""
    best = by_concurrency(rows, levels)
    if not best:
        return None
    version = profile.vllm.version
    takes = supported(version)
    method = _method(rec, best)
    sched = schedule(rows, levels, method) if method is not None and takes is not False else None
    single, why = _single(rows, best, load)
    yaml: str | None = None
    if sched is not None and method is not None:
        yaml = yaml_lines(name, method, max(k for _, _, k in sched), profile.drafter, sched)
        notes = _notes(profile, method)
    else:
        shown = rec is not None and single is not None and (rec.method, rec.k) == (single.method, single.k)
        if single is not None and not shown:  # the recommendation's own change is shown already
            yaml = yaml_lines(name, single.method, single.k, profile.drafter)
        notes = ()
    same = len(best) > 1 and len({(b.method, b.k) for b in best}) == 1
    return PerLoad(version, takes, option(), method, sched, load, single, why, yaml, notes, same)

