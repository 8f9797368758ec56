"""The fleet report (`specops fleet`, `/specops fleet`): one line per instance, worst first, and the
fleet's totals. It renders the JSON form (`FleetReport.as_json()`, the contract), so every format
says the same thing."""

from __future__ import annotations

import json
from typing import Any

from bot.present.render import SLACK_MAX_BLOCKS, Format, Rendered

MARK = {"failing": "✖", "degraded": "▲", "unknown": "?", "healthy": "✔"}


def _num(x: Any, fmt: str = "{:.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def _head(per_position: list[float], n: int = 3) -> str:
    if not per_position:
        return "—"
    shown = ", ".join(f"{p:.2f}" for p in per_position[:n])
    return shown + (", …" if len(per_position) > n else "")


def _finding(line: dict[str, Any]) -> str:
    top = line.get("top_finding")
    if not top:
        return "—"
    ups = [u.rsplit("/", 1)[-1] for u in top.get("upstream") or []]
    return str(top["title"]) + (f" (vLLM #{', #'.join(ups)})" if ups else "")


def _totals(data: dict[str, Any]) -> str:
    t = data["totals"]
    by = ", ".join(f"{n} {v}" for v, n in sorted(t["by_verdict"].items(), key=lambda kv: kv[0]))
    return (f"{t['instances']} instance(s): {by or 'none'} · mean acceptance length "
            f"{_num(t['mean_acceptance_length'])} over {t['drafts']} drafts · {_num(t['tokens_per_s'], '{:.1f}')} "
            "generation tok/s in all")


def render_fleet(data: dict[str, Any], fmt: Format) -> Rendered:
    if fmt == "json":
        return Rendered(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    title = f"Fleet · {data['prometheus']} · last {data['window']}" + (
        f" · {{{data['selector']}}}" if data.get("selector") else "")
    lines = data["instances"]
    if fmt == "slack":
        return _slack(data, title)
    if fmt == "md":
        out = [f"# {title}", "", _totals(data), "",
               "| | instance | verdict | mean acceptance | per position | tok/s | top finding |",
               "|---|---|---|---:|---|---:|---|"]
        for line in lines:
            m = line["metrics"]
            out.append(f"| {MARK.get(line['verdict'], '')} | {line['instance']} | {line['verdict']} | "
                       f"{_num(m['mean_acceptance_length'])} | {_head(m['per_position'])} | "
                       f"{_num(m['tokens_per_s'], '{:.1f}')} | {_finding(line)} |")
        if not lines:
            out.append("| | (no vLLM instance matches) | | | | | |")
        return Rendered("\n".join(out) + "\n")
    out = [title, _totals(data), ""]
    width = max([len(line["instance"]) for line in lines] + [8])
    for line in lines:
        m = line["metrics"]
        out.append(f"{MARK.get(line['verdict'], ' ')} {line['instance']:<{width}}  {line['verdict']:<8}  "
                   f"mean {_num(m['mean_acceptance_length'])}  [{_head(m['per_position'])}]  "
                   f"{_num(m['tokens_per_s'], '{:.1f}')} tok/s  {_finding(line)}")
    if not lines:
        out.append("(no vLLM instance matches)")
    return Rendered("\n".join(out) + "\n")


def _slack(data: dict[str, Any], title: str) -> Rendered:
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _totals(data)}]},
    ]
    room = SLACK_MAX_BLOCKS - len(blocks) - 1
    shown = data["instances"][:room]
    for line in shown:
        m = line["metrics"]
        text = (f"{MARK.get(line['verdict'], '')} *{line['instance']}* — *{line['verdict']}* · mean acceptance "
                f"{_num(m['mean_acceptance_length'])} · per position {_head(m['per_position'])} · "
                f"{_num(m['tokens_per_s'], '{:.1f}')} tok/s\n{_finding(line)}")
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}})
    if len(data["instances"]) > len(shown):
        rest = len(data["instances"]) - len(shown)
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"… and {rest} more "
                                                        "(healthiest last): `specops fleet --format md`"}]})
    return Rendered(json.dumps({"text": title + " · " + _totals(data), "blocks": blocks}, ensure_ascii=False))
