"""`specops tune` as text, Markdown or JSON (from its JSON dict), and its chart: tok/s against k per method,
mean acceptance on a second axis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.present.charts import _figure
from bot.present.render import Rendered


def _label(method: str, k: int | None) -> str:
    return "none" if k is None or method == "none" else f"{method} k={k}"


def _n(x: Any, fmt: str = "{:.1f}") -> str:
    return "—" if x is None else fmt.format(x)


def _curve(per: list[Any] | None) -> str:
    return " ".join("—" if r is None else f"{r:.2f}" for r in (per or [])[:8]) or "—"


def render_tune(data: dict[str, Any], fmt: str) -> Rendered:
    if fmt == "json":
        return Rendered(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    if fmt == "slack":
        return _slack(data)
    md = fmt == "md"
    title = f"specops tune · {data['profile']} on {data['host']}"
    if data.get("cancelled"):
        title += " · cancelled"
    out = [f"# {title}", ""] if md else [title, ""]
    head = ("setting", "concurrency", "tok/s", "mean acceptance", "per position", "TTFT s")
    rows: list[tuple[str, ...]] = []
    for r in data["results"]:
        if r.get("error"):
            where = f" at {r['failed_step']}" if r.get("failed_step") else ""
            rows.append((_label(r["method"], r["k"]), "—", "failed", where.strip() or "—", str(r["error"])[:80], "—"))
            continue
        rows.append((_label(r["method"], r["k"]), str(r["concurrency"]), _n(r.get("tokens_per_s")),
                     _n(r.get("mean_acceptance_length"), "{:.2f}"), _curve(r.get("per_position")),
                     _n(r.get("ttft_s"), "{:.3f}")))
    if md:
        out.append("| " + " | ".join(head) + " |")
        out.append("|---|---:|---:|---:|---|---:|")
        out += ["| " + " | ".join(row) + " |" for row in rows]
    else:
        widths = [max(len(head[i]), *(len(row[i]) for row in rows)) if rows else len(head[i]) for i in range(6)]
        out.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
        out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    for s in data.get("skipped", []):
        out.append(f"{'- ' if md else ''}skipped {_label(s['method'], s.get('k'))}: {s['reason']}")
    out.append("")
    rec = data.get("recommended")
    if rec:
        gains = []
        cur = data.get("current") or {}
        if rec.get("gain"):
            gains.append(f"{rec['gain']:.2f}x the current setting ({_label(cur.get('method', ''), cur.get('k'))}, "
                         f"{_n(cur.get('tokens_per_s'))} tok/s)")
        if rec.get("gain_over_none"):
            base = data.get("baseline") or {}
            gains.append(f"{rec['gain_over_none']:.2f}x no speculation ({_n(base.get('tokens_per_s'))} tok/s, "
                         f"{base.get('source')})")
        line = (f"Recommended: {_label(rec['method'], rec['k'])} — {_n(rec['tokens_per_s'])} tok/s at concurrency "
                f"{rec['concurrency']}" + (f": {'; '.join(gains)}" if gains else ""))
        out.append(f"**{line}**" if md else line)
        for b in data.get("best_under_load", []):
            out.append(f"{'- ' if md else '  '}under load (concurrency {b['concurrency']}): best "
                       f"{_label(b['method'], b['k'])}, {_n(b['tokens_per_s'])} tok/s")
        change = data.get("profile_change")
        if change:
            out.append("")
            out.append("The profile change to make (in the specops config):")
            out += ["```yaml", change["yaml"], "```"] if md else ["    " + ln for ln in change["yaml"].splitlines()]
        else:
            out.append("The profile already has the best setting: no change.")
    else:
        out.append("No setting could be measured: see the failures above.")
    restored = data.get("restored") or {}
    out.append("")
    out.append(f"Afterwards: {restored.get('status')}" + (f" {restored['profile']}" if restored.get("profile") else "")
               + (f" — {restored['message']}" if restored.get("message") else ""))
    return Rendered("\n".join(out) + "\n")


def tune_chart(data: dict[str, Any], path: Path) -> Path:
    """tok/s against k, one line per method at the lowest concurrency (no speculation as a flat line), with mean
    acceptance on a second axis (dashed)."""
    fig, ax = _figure(7.0, 4.0)
    ax2 = ax.twinx()
    ok = [r for r in data["results"] if not r.get("error") and r.get("tokens_per_s")]
    low = min((r["concurrency"] for r in ok), default=1)
    ok = [r for r in ok if r["concurrency"] == low]
    methods = sorted({r["method"] for r in ok if r["method"] != "none"})
    colors = ["#1565c0", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f"]
    for i, m in enumerate(methods):
        pts = sorted((r["k"], r["tokens_per_s"], r.get("mean_acceptance_length")) for r in ok if r["method"] == m)
        color = colors[i % len(colors)]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=color, label=f"{m} tok/s")
        acc = [(p[0], p[2]) for p in pts if p[2] is not None]
        if acc:
            ax2.plot([a[0] for a in acc], [a[1] for a in acc], marker="s", linestyle="--", color=color, alpha=0.6,
                     label=f"{m} mean acceptance")
    none = next((r for r in ok if r["method"] == "none"), None)
    if none is not None:
        ax.axhline(none["tokens_per_s"], color="#9e9e9e", linestyle=":", label="no speculation")
    ks = sorted({r["k"] for r in ok if r["k"] is not None})
    if ks:
        ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_xlabel("num_speculative_tokens (k)")
    ax.set_ylabel(f"generation tok/s (concurrency {low})")
    ax2.set_ylabel("mean acceptance length")
    ax.set_title(f"specops tune: {data['profile']} on {data['host']}", fontsize=10)
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = path if path.suffix.lower() == ".png" else path.with_name(path.name + ".png")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def _slack(data: dict[str, Any]) -> Rendered:
    """Block Kit: the recommendation, the table as text (Slack has no tables), the profile change."""
    text = render_tune(data, "text").text
    title, _, body = text.partition("\n")
    table, _, rest = body.strip("\n").partition("\n\n")
    rec = data.get("recommended")
    summary = rest.split("\n", 1)[0] if rest else ""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150], "emoji": True}},
        {"type": "section", "text": {"type": "mrkdwn", "text": (f"*{summary}*" if rec else summary)[:2900] or "—"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "```" + table[:2800] + "```"}},
    ]
    change = data.get("profile_change")
    if change:
        shown = "*The profile change to make*\n```" + change["yaml"] + "```"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": shown}})
    restored = data.get("restored") or {}
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": (
        f"afterwards: {restored.get('status')} {restored.get('profile') or ''}".strip())[:2900]}]})
    return Rendered(json.dumps({"text": f"{title}: {summary}"[:3000], "blocks": blocks}, ensure_ascii=False))
