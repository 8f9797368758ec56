"""`specops tune` in every medium — text, Markdown, Slack Block Kit, JSON — from its typed result, or from its
plan (the dry run). The chart is bot/present/charts.tune_png."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from bot.core.results.tune import (
    Failed,
    LoadBest,
    PerLoad,
    Restored,
    Skipped,
    TunePlan,
    TuneResult,
    TuneRow,
    shown_label,
)
from bot.present.names import file_name
from bot.present.presenter import Presenter
from bot.present.rendered import SLACK_MAX_SECTION, Format, Rendered

HEAD = ("setting", "concurrency", "tok/s", "mean acceptance", "per position", "TTFT s")


def _n(x: float | None, fmt: str = "{:.1f}") -> str:
    return "—" if x is None else fmt.format(x)


def _curve(per: Sequence[float | None]) -> str:
    return " ".join("—" if r is None else f"{r:.2f}" for r in per[:8]) or "—"


def _esc(s: str) -> str:
    """Slack's mrkdwn reads &, < and > as markup (`<!channel>`): a host's error text must not be."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def render_tune(result: TuneResult | TunePlan, fmt: Format) -> Rendered:
    if fmt == "json":
        return Rendered(json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n")
    if isinstance(result, TunePlan):
        return _plan(result, fmt)
    if fmt == "slack":
        return _slack(result)
    md = fmt == "md"
    title = _title(result)
    out = [f"# {title}" if md else title, "", *_table(result.results, md), *_skipped(result.skipped, md),
           _where(result), ""]
    out += _recommendation(result, md)
    out += _per_load(result, md)
    out += ["", _afterwards(result.restored)]
    return Rendered("\n".join(out) + "\n")


def _title(result: TuneResult) -> str:
    return f"specops tune · {result.profile} on {result.host}" + (" · cancelled" if result.cancelled else "")


def _where(result: TuneResult) -> str:
    """Where the table's numbers come from."""
    w = result.workload
    return (f"Every row is measured in this sweep: {w.source}, {w.prompts} prompts, {w.max_tokens} tokens each, "
            f"at least {result.requests} completions per concurrency; {shown_label('none', None)} is the profile "
            "served without a speculative config. tok/s: generated tokens over the rounds' wall time; acceptance: "
            "the server's /metrics counters over the same rounds; TTFT: the median first streamed token at the "
            "lowest concurrency.")


def _cells(r: TuneRow) -> tuple[str, ...]:
    label = shown_label(r.method, r.k)
    if isinstance(r, Failed):
        where = f"at {r.failed_step}" if r.failed_step else "—"
        return (label, "—", "failed", where, _cut(r.error, 80), "—")
    return (label, str(r.concurrency), _n(r.tokens_per_s), _n(r.mean_acceptance_length, "{:.2f}"),
            _curve(r.per_position), _n(r.ttft_s, "{:.3f}"))


def _table(results: Sequence[TuneRow], md: bool) -> list[str]:
    rows = [_cells(r) for r in results]
    if md:
        return ["| " + " | ".join(HEAD) + " |", "|---|---:|---:|---:|---|---:|",
                *("| " + " | ".join(row) + " |" for row in rows)]
    widths = [max([len(HEAD[i]), *(len(row[i]) for row in rows)]) for i in range(len(HEAD))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in [HEAD, *rows]]


def _skipped(skipped: Sequence[Skipped], md: bool) -> list[str]:
    return [("- " if md else "") + s.line for s in skipped]


def _summary(result: TuneResult) -> str:
    """The recommendation in one line (or why there is none), each number with where it comes from."""
    rec = result.recommended
    if rec is None:
        return "No setting could be measured: see the failures above."
    at = f"measured in this sweep at concurrency {rec.concurrency}"
    gains = []
    if rec.gain:
        cur = result.current
        gains.append(f"{rec.gain:.2f}x the current setting ({shown_label(cur.method, cur.k)}: "
                     f"{_n(cur.tokens_per_s)} tok/s, {at})")
    if rec.gain_over_none:
        gains.append(f"{rec.gain_over_none:.2f}x no speculation (measured: {_n(result.baseline.tokens_per_s)} "
                     f"tok/s in this sweep at concurrency {rec.concurrency})")
    ref = result.reference
    if ref is not None and rec.gain_over_reference:
        gains.append(f"{rec.gain_over_reference:.2f}x the {ref.label}")
    return (f"Recommended: {shown_label(rec.method, rec.k)} — {_n(rec.tokens_per_s)} tok/s at concurrency "
            f"{rec.concurrency}" + (f": {'; '.join(gains)}" if gains else ""))


def _by_load_line(b: LoadBest) -> str:
    gain = (f" — {b.gain_over_none:.2f}x no speculation (measured: {_n(b.no_speculation_tps)} tok/s)"
            if b.gain_over_none and b.method != "none" else "")
    return f"concurrency {b.concurrency}: best {b.label}, {_n(b.tokens_per_s)} tok/s{gain}"


def _by_load(result: TuneResult, md: bool) -> list[str]:
    """One k per concurrency measured (older results: the best under load only)."""
    bullet = "- " if md else "  "
    if result.by_concurrency:
        return ["By load (the fastest measured at each concurrency, in this sweep):",
                *(bullet + _by_load_line(b) for b in result.by_concurrency)]
    return [f"{bullet}under load (concurrency {b.concurrency}): best {b.label}, {_n(b.tokens_per_s)} tok/s"
            for b in result.best_under_load]


def _cautions(result: TuneResult, md: bool) -> list[str]:
    return [("- " if md else "") + f"Caution: {c}." for c in result.cautions]


def _recommendation(result: TuneResult, md: bool) -> list[str]:
    summary = _summary(result)
    if result.recommended is None:
        return [summary, *_cautions(result, md)]
    out = [f"**{summary}**" if md else summary, *_cautions(result, md), *_by_load(result, md)]
    change = result.profile_change
    if change is None:
        return [*out, "The profile already has the best setting: no change."]
    shown = ["```yaml", change.yaml, "```"] if md else ["    " + ln for ln in change.yaml.splitlines()]
    return [*out, "", "The profile change to make (in the specops config):", *shown]


def _per_load_head(pl: PerLoad) -> str:
    opt = pl.option
    since = f"since vLLM {opt.first_release}" if opt.first_release else "in no release read"
    cite = ", ".join(x for x in (opt.source, opt.pr) if x)
    version = f"vLLM {pl.vllm_version}" if pl.vllm_version else "the profile's vLLM (no version named)"
    if pl.supported:
        return (f"Serving a k per load: {version} takes a k per batch size: `{opt.key}` in the speculative config "
                f"({since}: {cite}).")
    if pl.supported is False:
        return (f"Serving a k per load: no per-batch-size k in {version} (checked: the speculative config fields "
                f"of vLLM {opt.checked} as released; `{opt.key}` appeared in vLLM {opt.first_release}: {cite}).")
    return (f"Serving a k per load: {version}; `{opt.key}` takes a k per batch size {since} ({cite}): name "
            "vllm.version in the profile to know.")


def _one_k(pl: PerLoad, result: TuneResult) -> str:
    one = pl.single
    if one is None:
        return f"No single k can be named: {pl.single_why}."
    rec = result.recommended
    same = " (the setting recommended above)" if rec is not None and (rec.method, rec.k) == (one.method, one.k) else ""
    return f"One k for {pl.single_why}: {one.label}, {_n(one.tokens_per_s)} tok/s{same}."


def _per_load(result: TuneResult, md: bool) -> list[str]:
    """How to serve a k per load: the schedule where the release takes one, else the one k for the load seen."""
    pl = result.per_load
    if pl is None:
        return []
    out = ["", _per_load_head(pl)]
    if pl.schedule is not None:
        out.append(f"From this sweep's rows: {json.dumps([list(e) for e in pl.schedule])} (each entry: first batch "
                   "size, last batch size, k; batch sizes between two levels measured take the lower one's k, above "
                   "the last its k).")
    elif pl.same_everywhere:
        out.append("The same k is the fastest at every concurrency measured: one k serves every load.")
    out.append(_one_k(pl, result))
    if pl.yaml:
        what = "The schedule" if pl.schedule is not None else "That k"
        out += [f"{what}, in the specops config:",
                *(["```yaml", pl.yaml, "```"] if md else ["    " + ln for ln in pl.yaml.splitlines()])]
    out += [("- " if md else "  ") + n for n in pl.notes]
    return out


def _afterwards(restored: Restored) -> str:
    return (f"Afterwards: {restored.status}" + (f" {restored.profile}" if restored.profile else "")
            + (f" — {restored.message}" if restored.message else ""))


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _slack(result: TuneResult) -> Rendered:
    """Block Kit: the recommendation, the table as text (Slack has no tables), the profile change."""
    summary = _esc(_summary(result))
    table = "\n".join(_table(result.results, False) + _skipped(result.skipped, False))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(_title(result), 150), "emoji": True}},
        _section(_cut(f"*{summary}*" if result.recommended else summary, SLACK_MAX_SECTION - 100)),
        _section("```" + _cut(_esc(table), SLACK_MAX_SECTION - 200) + "```"),
    ]
    more = _cautions(result, False) + (_by_load(result, False) if result.recommended else [])
    if more:
        blocks.append(_section(_cut(_esc("\n".join(more)), SLACK_MAX_SECTION - 100)))
    if result.profile_change is not None:
        yaml = _cut(_esc(result.profile_change.yaml), SLACK_MAX_SECTION - 200)
        blocks.append(_section("*The profile change to make*\n```" + yaml + "```"))
    if result.per_load is not None:
        blocks.append(_section(_cut(_esc("\n".join(_per_load(result, True)[1:])), SLACK_MAX_SECTION - 100)))
    restored = result.restored
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _cut(_esc(
        f"afterwards: {restored.status} {restored.profile or ''}".strip()), SLACK_MAX_SECTION - 100)}]})
    return _payload(result.headline, blocks)


def _payload(headline: str, blocks: list[dict[str, Any]]) -> Rendered:
    return Rendered(json.dumps({"text": _cut(headline, SLACK_MAX_SECTION), "blocks": blocks}, indent=2,
                               ensure_ascii=False) + "\n")


def _plan(p: TunePlan, fmt: Format) -> Rendered:
    """The dry run: what would be deployed and measured, what is skipped, what is restored; nothing ran."""
    at = ", ".join(str(c) for c in p.concurrency)
    intro = (f"{len(p.settings)} settings, each deployed and measured at concurrency {at} "
             f"({p.requests} completions each); nothing ran")
    if fmt == "slack":
        steps = "\n".join(f"• {_esc(s)}" for s in p.steps)
        return _payload(p.headline, [
            {"type": "header", "text": {"type": "plain_text", "text": _cut(p.headline, 150), "emoji": True}},
            _section(":clipboard: *Plan* (nothing ran, nothing judged) · " + _esc(intro)),
            _section(_cut(steps, SLACK_MAX_SECTION - 100)),
        ])
    title = f"specops tune · plan · {p.profile} on {p.host}"
    md = fmt == "md"
    lines = [f"# {title}" if md else title, "", intro, "", *((f"- {s}" if md else f"  {s}") for s in p.steps)]
    return Rendered("\n".join(lines) + "\n")


def _chart(result: TuneResult | TunePlan) -> bytes | None:
    if not isinstance(result, TuneResult):
        return None
    from bot.present import charts

    return charts.tune_png(result)


def _chart_file(result: TuneResult | TunePlan, _now: datetime) -> tuple[str, str]:
    return file_name("tune", result.host, result.profile), f"tok/s by setting: {result.profile} on {result.host}"


PRESENTER: Presenter[TuneResult | TunePlan] = Presenter(render_tune, chart=_chart, chart_file=_chart_file)
