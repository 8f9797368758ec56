"""The fleet report (`specops fleet`, `/specops fleet`) in every medium: one line per instance, worst first,
and the fleet's totals. Every format reads the same typed `FleetReport`, whose numbers are those of its JSON
form (the contract), so every format says the same thing."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from json.encoder import encode_basestring
from typing import Any, get_args

from bot.core.results.fleet import VERDICT_ORDER, FleetLine, FleetReport, FleetTotals, TopFinding
from bot.core.triage.findings import Confidence, Severity
from bot.present.presenter import Presenter
from bot.present.rendered import SLACK_MAX_BLOCKS, SLACK_MAX_SECTION, Format, Rendered
from bot.redact import Vouched

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
    """`json.dumps(result.as_json(), indent=2)` to the byte, as a `Vouched` text (bot/redact.py): the contract's keys,
    the numbers and the fixed words are vouched for, every other string — the Prometheus URL, the selector, an
    instance, its labels (keys and values, as one block), a host, a headline, a finding — is a part of its own that
    the redactor redacts. Each line is written on its own: the whole tree of a big fleet's dicts is never built."""
    parts: list[tuple[str, bool]] = []
    out = _Parts(parts)
    shell = result.as_json(lines=False)
    out.vouched("{")
    for n, (key, value) in enumerate(shell.items()):
        out.vouched(("," if n else "") + "\n  ")
        if key == "instances" and result.lines:
            out.vouched('"instances": [')
            for i, line in enumerate(result.lines):
                out.vouched(("," if i else "") + "\n    ")
                out.value(line.as_json(), 2, "")
            out.vouched("\n  ]")
        else:
            out.entry(key, value, 1, "")
    out.vouched("\n}\n")
    return Vouched(out.done())


# What the renderer vouches for in the fleet's JSON: the contract's keys (bot/core/results/fleet.py) and the words
# some of them take. A key elsewhere (a label's) or another word is an outside part, redacted.
_KEYS = frozenset({
    "prometheus", "selector", "window", "instances", "totals", "omitted", "instance", "labels", "verdict", "host",
    "profile", "metrics", "top_finding", "headline", "mean_acceptance_length", "per_position", "num_drafts",
    "tokens_per_s", "running", "waiting", "kv_cache_usage", "up", "id", "title", "severity", "confidence",
    "upstream", "seconds", "restarts", "judged", "by_verdict", "drafts"})
_VERDICTS = frozenset(VERDICT_ORDER)
_WORDS: dict[str, frozenset[str]] = {
    "verdict": _VERDICTS, "severity": frozenset(get_args(Severity)), "confidence": frozenset(get_args(Confidence)),
    "judged": frozenset({"window", "since the current server started", "too short to judge"})}
_OUTSIDE_KEYS = frozenset({"labels"})  # a dict whose keys come from outside: Prometheus' label names


class _Parts:
    """json.dumps(indent=2, ensure_ascii=False)'s text, as (text, vouched) parts: adjacent vouched text is joined,
    so a fleet of 10,000 is ~100,000 parts, not the millions of its tokens."""

    def __init__(self, parts: list[tuple[str, bool]]) -> None:
        self.parts = parts
        self.buf: list[str] = []

    def vouched(self, text: str) -> None:
        self.buf.append(text)

    def outside(self, text: str) -> None:
        if self.buf:
            self.parts.append(("".join(self.buf), True))
            self.buf = []
        self.parts.append((text, False))

    def done(self) -> list[tuple[str, bool]]:
        if self.buf:
            self.parts.append(("".join(self.buf), True))
            self.buf = []
        return self.parts

    def entry(self, key: str, value: Any, level: int, parent: str) -> None:
        """`"key": value` in a dict under `parent`; the whole entry one outside part when the key is not vouched
        for (a label: its name is context its value is redacted in, `api_key: …`)."""
        known = key in _VERDICTS if parent == "by_verdict" else parent not in _OUTSIDE_KEYS and key in _KEYS
        if not known:
            self.outside(f"{_dumps(key)}: " + json.dumps(value, indent=2, ensure_ascii=False).replace(
                "\n", "\n" + "  " * level))
            return
        if isinstance(value, str):
            text = f"{_dumps(key)}: {_dumps(value)}"
            if value in _WORDS.get(key, ()):
                self.vouched(text)
            else:
                self.outside(text)  # with its key: the context a rule reads it in
            return
        self.vouched(_dumps(key) + ": ")
        self.value(value, level, key)

    def value(self, value: Any, level: int, key: str) -> None:
        if value is None or isinstance(value, bool | int | float):
            self.vouched(_dumps(value))  # a number Python formats: nothing from outside in it
        elif isinstance(value, str):
            self.outside(_dumps(value))
        elif isinstance(value, dict):
            if key not in _OUTSIDE_KEYS and _plain(value):  # a line's metrics: dumped in one call
                self.vouched(json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + "  " * level))
                return
            if not value:
                self.vouched("{}")
                return
            pad = "\n" + "  " * (level + 1)
            self.vouched("{")
            for n, (k, v) in enumerate(value.items()):
                self.vouched(("," if n else "") + pad)
                self.entry(str(k), v, level + 1, key)
            self.vouched("\n" + "  " * level + "}")
        elif isinstance(value, list | tuple):
            if not value:
                self.vouched("[]")
                return
            pad = "\n" + "  " * (level + 1)
            self.vouched("[")
            for n, v in enumerate(value):
                self.vouched(("," if n else "") + pad)
                self.value(v, level + 1, key)
            self.vouched("\n" + "  " * level + "]")
        else:  # not a JSON type: as json.dumps would refuse it, never vouched for
            self.outside(_dumps(value))


def _plain(value: dict[str, Any]) -> bool:
    """Only the contract's keys, each with a number (or a list of numbers), none or a word it takes."""
    for k, v in value.items():
        if k not in _KEYS:
            return False
        if v is None or isinstance(v, bool | int | float):
            continue
        if isinstance(v, str):
            if v not in _WORDS.get(k, ()):
                return False
        elif not (isinstance(v, list) and all(isinstance(x, bool | int | float) for x in v)):
            return False
    return True


def _dumps(value: Any) -> str:
    """A key or a scalar as json.dumps(ensure_ascii=False) writes it, without its per-call set-up (~3 µs, paid
    300,000 times for a fleet of 10,000)."""
    if isinstance(value, str):
        return encode_basestring(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float) and math.isfinite(value):
        return float.__repr__(value)
    return json.dumps(value, ensure_ascii=False)  # NaN, Infinity, or what json.dumps refuses


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


PRESENTER: Presenter[FleetReport] = Presenter(render_fleet)
