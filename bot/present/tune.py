"""`specops tune` in every medium — text, Markdown, Slack Block Kit, JSON — from its typed result, or from its
plan (the dry run). The chart is bot/present/charts.tune_png."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bot.core.results.tune import Failed, Restored, Skipped, TunePlan, TuneResult, TuneRow
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
    out = [f"# {title}" if md else title, "", *_table(result.results, md), *_skipped(result.skipped, md), ""]
    out += _recommendation(result, md)
    out += ["", _afterwards(result.restored)]
    return Rendered("\n".join(out) + "\n")


def _title(result: TuneResult) -> str:
    return f"specops tune · {result.profile} on {result.host}" + (" · cancelled" if result.cancelled else "")


def _cells(r: TuneRow) -> tuple[str, ...]:
    if isinstance(r, Failed):
        where = f"at {r.failed_step}" if r.failed_step else "—"
        return (r.label, "—", "failed", where, r.error[:80], "—")
    return (r.label, str(r.concurrency), _n(r.tokens_per_s), _n(r.mean_acceptance_length, "{:.2f}"),
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
    """The recommendation in one line (or why there is none)."""
    rec = result.recommended
    if rec is None:
        return "No setting could be measured: see the failures above."
    gains = []
    if rec.gain:
        cur = result.current
        gains.append(f"{rec.gain:.2f}x the current setting ({cur.label}, {_n(cur.tokens_per_s)} tok/s)")
    if rec.gain_over_none:
        base = result.baseline
        gains.append(f"{rec.gain_over_none:.2f}x no speculation ({_n(base.tokens_per_s)} tok/s, {base.source})")
    return (f"Recommended: {rec.label} — {_n(rec.tokens_per_s)} tok/s at concurrency {rec.concurrency}"
            + (f": {'; '.join(gains)}" if gains else ""))


def _recommendation(result: TuneResult, md: bool) -> list[str]:
    summary = _summary(result)
    if result.recommended is None:
        return [summary]
    out = [f"**{summary}**" if md else summary]
    out += [f"{'- ' if md else '  '}under load (concurrency {b.concurrency}): best {b.label}, "
            f"{_n(b.tokens_per_s)} tok/s" for b in result.best_under_load]
    change = result.profile_change
    if change is None:
        return [*out, "The profile already has the best setting: no change."]
    shown = ["```yaml", change.yaml, "```"] if md else ["    " + ln for ln in change.yaml.splitlines()]
    return [*out, "", "The profile change to make (in the specops config):", *shown]


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
    if result.profile_change is not None:
        yaml = _cut(_esc(result.profile_change.yaml), SLACK_MAX_SECTION - 200)
        blocks.append(_section("*The profile change to make*\n```" + yaml + "```"))
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
