"""The fleet report (`specops fleet`, `/specops fleet`) in every medium: one line per instance, worst first,
and the fleet's totals. Every format reads the same typed `FleetReport`, whose numbers are those of its JSON
form (the contract), so every format says the same thing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bot.core.results.fleet import FleetLine, FleetReport, FleetTotals, TopFinding
from bot.present.rendered import SLACK_MAX_BLOCKS, SLACK_MAX_SECTION, Format, Rendered

MARK = {"failing": "✖", "degraded": "▲", "unknown": "?", "healthy": "✔"}


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def _head(per_position: Sequence[float], n: int = 3) -> str:
    if not per_position:
        return "—"
    shown = ", ".join(f"{p:.2f}" for p in per_position[:n])
    return shown + (", …" if len(per_position) > n else "")


def _finding(top: TopFinding | None) -> str:
    if top is None:
        return "—"
    ups = [u.rsplit("/", 1)[-1] for u in top.upstream]
    return top.title + (f" (vLLM #{', #'.join(ups)})" if ups else "")


def _totals(t: FleetTotals) -> str:
    by = ", ".join(f"{n} {v}" for v, n in sorted(t.by_verdict.items(), key=lambda kv: kv[0]))
    return (f"{t.instances} instance(s): {by or 'none'} · mean acceptance length "
            f"{_num(t.mean_acceptance_length)} over {t.drafts} drafts · {_num(t.tokens_per_s, '{:.1f}')} "
            "generation tok/s in all")


def _span(line: FleetLine) -> str | None:
    """What part of the window the line is judged on, when it is not all of it (a restart inside it)."""
    return line.window.describe() if line.window is not None else None


def _more(result: FleetReport, cut: Sequence[FleetLine] = ()) -> str | None:
    """The instances not listed — left out by --limit/--only-problems (`result.omitted`), or `cut` for room — as
    "… and N more (healthy: M)", or None when every instance is listed."""
    n = result.omitted.instances + len(cut)
    if not n:
        return None
    healthy = result.omitted.healthy + sum(1 for line in cut if line.verdict == "healthy")
    return f"… and {n} more (healthy: {healthy})"


def _esc(s: str) -> str:
    """Slack's mrkdwn reads &, < and > as markup: a label or a finding's text must not be."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_fleet(result: FleetReport, fmt: Format) -> Rendered:
    if fmt == "json":
        return Rendered(_json(result))
    title = f"Fleet · {result.url} · last {result.window}" + (f" · {{{result.selector}}}" if result.selector else "")
    if fmt == "slack":
        return _slack(result, title)
    if fmt == "md":
        return Rendered("\n".join(_md(result, title)) + "\n")
    return Rendered("\n".join(_text(result, title)) + "\n")


def _json(result: FleetReport) -> str:
    """`json.dumps(result.as_json(), indent=2)` to the byte, each line dumped on its own: the whole tree of a big
    fleet's dicts is never built at once. `"instances": []` occurs once, as the key: in a string value its quotes
    are escaped."""
    shell = json.dumps(result.as_json(lines=False), indent=2, ensure_ascii=False)
    if not result.lines:
        return shell + "\n"
    items = ",\n".join("    " + json.dumps(line.as_json(), indent=2, ensure_ascii=False).replace("\n", "\n    ")
                       for line in result.lines)
    return shell.replace('"instances": []', '"instances": [\n' + items + "\n  ]", 1) + "\n"


def _md(result: FleetReport, title: str) -> list[str]:
    out = [f"# {title}", "", _totals(result.totals), "",
           "| | instance | verdict | mean acceptance | per position | tok/s | top finding |",
           "|---|---|---|---:|---|---:|---|"]
    for line in result.lines:
        m = line.metrics
        out.append(f"| {MARK.get(line.verdict, '')} | {line.instance} | {line.verdict} | "
                   f"{_num(m.mean_acceptance_length)} | {_head(m.per_position)} | "
                   f"{_num(m.tokens_per_s, '{:.1f}')} | {_finding(line.top_finding)} |")
    if not result.lines:
        out.append("| | (no vLLM instance matches) | | | | | |" if not result.omitted.instances else
                   "| | (none listed) | | | | | |")
    more = _more(result)
    if more:
        out += ["", more]
    spans = [(line.instance, _span(line)) for line in result.lines]
    if any(said for _, said in spans):
        out.append("")
        out += [f"- {instance}: {said}" for instance, said in spans if said]
    return out


def _text(result: FleetReport, title: str) -> list[str]:
    out = [title, _totals(result.totals), ""]
    width = max([len(line.instance) for line in result.lines] + [8])
    for line in result.lines:
        m = line.metrics
        out.append(f"{MARK.get(line.verdict, ' ')} {line.instance:<{width}}  {line.verdict:<8}  "
                   f"mean {_num(m.mean_acceptance_length)}  [{_head(m.per_position)}]  "
                   f"{_num(m.tokens_per_s, '{:.1f}')} tok/s  {_finding(line.top_finding)}")
        said = _span(line)
        if said:
            out.append(f"  {'':<{width}}  ↳ {said}")
    if not result.lines:
        out.append("(no vLLM instance matches)" if not result.omitted.instances else "(none listed)")
    more = _more(result)
    if more:
        out.append(more)
    return out


def _slack_line(line: FleetLine) -> dict[str, Any]:
    m = line.metrics
    text = (f"{MARK.get(line.verdict, '')} *{_esc(line.instance)}* — *{line.verdict}* · mean acceptance "
            f"{_num(m.mean_acceptance_length)} · per position {_head(m.per_position)} · "
            f"{_num(m.tokens_per_s, '{:.1f}')} tok/s\n{_esc(_finding(line.top_finding))}")
    said = _span(line)
    if said:
        text += f"\n_{_esc(said)}_"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:SLACK_MAX_SECTION]}}


def _slack(result: FleetReport, title: str) -> Rendered:
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _esc(_totals(result.totals))}]},
    ]
    room = SLACK_MAX_BLOCKS - len(blocks) - 1  # one left for "… and N more"
    blocks += [_slack_line(line) for line in result.lines[:room]]
    more = _more(result, result.lines[room:])
    if more:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"{more} · every one: "
                                                        "`specops fleet --format md`, the problems: `specops fleet "
                                                        "--only-problems`"}]})
    payload = {"text": result.headline[:SLACK_MAX_SECTION], "blocks": blocks}
    return Rendered(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
