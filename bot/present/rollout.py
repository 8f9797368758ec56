"""`specops rollout` in every medium — text (rich markup), Markdown, Slack Block Kit, JSON — from its typed result,
or from its plan (the dry run). The chart is bot/present/charts.rollout_png.

One layout in the three written media: the headline, then each batch in order (the canary first) with its
gate's verdict, a table of its hosts (before → after at each concurrency measured), and for each host it reached
the gate's clauses (✓/✗ and what each read), the bugs and the diagnosis of a failed setting and how the host was
restored; then the timeline, as m:ss since the start. Slack has no tables: a line per host there."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from bot.core.durations import spoken
from bot.core.results.rollout import HostOutcome, RolloutPlan, RolloutResult
from bot.core.results.tune import Measurement
from bot.present.names import file_name
from bot.present.presenter import Presenter
from bot.present.rendered import SLACK_MAX_BLOCKS, SLACK_MAX_SECTION, Format, Rendered

HEAD = ("host", "state", "concurrency", "tok/s before", "tok/s after", "change", "mean acceptance before",
        "mean acceptance after", "TTFT s before", "TTFT s after")
# the text's table: a before → after pair in one column
TEXT_HEAD = ("host", "state", "concurrency", "tok/s before → after", "change", "mean acceptance before → after",
             "TTFT s before → after")
NOT_REACHED = ("pending", "untouched")
STATE_WORD = {"pending": "not reached", "passed": "passed", "failed": "failed", "restored": "restored",
              "restore-failed": "RESTORE FAILED", "untouched": "untouched"}
TEXT_COLOUR = {"passed": "green", "failed": "red", "restored": "yellow", "restore-failed": "bold red"}
SLACK_ICON = {"passed": ":white_check_mark:", "failed": ":x:", "restored": ":leftwards_arrow_with_hook:",
              "restore-failed": ":octagonal_sign:"}
SLACK_ROOM = SLACK_MAX_SECTION - 100  # a section's text, with room for the code fences and a cut's "…"
ATTACHED = "specops-rollout.md"


def _n(x: float | None, fmt: str = "{:.1f}") -> str:
    return "—" if x is None else fmt.format(x)


def _ratio(before: float | None, after: float | None) -> str:
    return f"{after / before:.2f}x" if before and after is not None else "—"


def _curve(per: Sequence[float | None]) -> str:
    return " ".join("—" if r is None else f"{r:.2f}" for r in per[:8]) or "—"


def _esc(s: str) -> str:
    """Slack's mrkdwn reads &, < and > as markup (`<!channel>`): a host's error text must not be."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _rich(s: str) -> str:
    from rich.markup import escape  # only the text medium reads rich markup

    return escape(s)


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def clock(seconds: float) -> str:
    """Seconds since the start as m:ss (412.6 -> 6:52)."""
    m, s = divmod(int(max(seconds, 0.0)), 60)
    return f"{m}:{s:02d}"


def batch_name(index: int) -> str:
    return "canary" if index == 0 else f"batch {index}"


def _names(hosts: Sequence[str], shown: int = 6) -> str:
    more = len(hosts) - shown
    return ", ".join(hosts[:shown]) + (f" … (+{more})" if more > 0 else "")


def _served(profile: str | None) -> str:
    return profile or "nothing specops started"


def batches_of(result: RolloutResult) -> list[tuple[int, list[HostOutcome]]]:
    """The hosts by batch, the canary first."""
    by: dict[int, list[HostOutcome]] = {}
    for h in result.hosts:
        by.setdefault(h.batch, []).append(h)
    return sorted(by.items())


def batch_verdict(hosts: Sequence[HostOutcome]) -> str:
    if all(h.state in NOT_REACHED for h in hosts):
        return "not reached"
    if all(h.gate_passed for h in hosts):
        return "gate passed" if len(hosts) == 1 else f"gate passed on all {len(hosts)}"
    said = []
    no = [h.host for h in hosts if h.gate_passed is False]
    if no:
        said.append(f"gate failed on {_names(no)}")
    broke = [h.host for h in hosts if h.state in ("failed", "restore-failed") and h.gate_passed is not False]
    if broke:
        said.append(f"{_names(broke)} failed before the gate")
    tally = ", ".join(f"{n} {word}" for word, n in Counter(STATE_WORD[h.state] for h in hosts).items())
    if not said:
        return tally
    return "; ".join(said) + (f" ({tally})" if len(hosts) > 1 else "")


def _pairs(h: HostOutcome) -> list[tuple[int | None, Measurement | None, Measurement | None]]:
    """Before and after at each concurrency either measured (one empty row when neither did)."""
    before = {m.concurrency: m for m in h.before}
    after = {m.concurrency: m for m in h.after}
    return [(c, before.get(c), after.get(c)) for c in sorted(before.keys() | after.keys())] or [(None, None, None)]


def _values(b: Measurement | None, a: Measurement | None) -> tuple[str, ...]:
    """tok/s before, after, the change, mean acceptance before, after, TTFT before, after."""
    tps_b, tps_a = (b.tokens_per_s if b else None), (a.tokens_per_s if a else None)
    return (_n(tps_b), _n(tps_a), _ratio(tps_b, tps_a), _n(b.mean_acceptance_length if b else None, "{:.2f}"),
            _n(a.mean_acceptance_length if a else None, "{:.2f}"), _n(b.ttft_s if b else None, "{:.3f}"),
            _n(a.ttft_s if a else None, "{:.3f}"))


def _rows(hosts: Sequence[HostOutcome]) -> list[tuple[str, ...]]:
    """A batch's table: a row per host and concurrency, the host and its state on its first row only."""
    out = []
    for h in hosts:
        for i, (c, b, a) in enumerate(_pairs(h)):
            out.append((h.host if i == 0 else "", STATE_WORD[h.state] if i == 0 else "",
                        "—" if c is None else str(c), *_values(b, a)))
    return out


def _reached(hosts: Sequence[HostOutcome]) -> list[HostOutcome]:
    return [h for h in hosts if h.state not in NOT_REACHED]


def _md_table(hosts: Sequence[HostOutcome]) -> list[str]:
    cell = [tuple(c.replace("|", "\\|") for c in row) for row in _rows(hosts)]
    return ["| " + " | ".join(HEAD) + " |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
            *("| " + " | ".join(row) + " |" for row in cell)]


def _text_table(hosts: Sequence[HostOutcome]) -> list[str]:
    rows = [(r[0], r[1], r[2], f"{r[3]} → {r[4]}", r[5], f"{r[6]} → {r[7]}", f"{r[8]} → {r[9]}")
            for r in _rows(hosts)]
    widths = [max([len(TEXT_HEAD[i]), *(len(row[i]) for row in rows)]) for i in range(len(TEXT_HEAD))]
    states = {STATE_WORD[s]: TEXT_COLOUR[s] for s in TEXT_COLOUR}

    def line(row: Sequence[str], head: bool = False) -> str:
        cells = [_rich(c.ljust(w)) for c, w in zip(row, widths, strict=True)]
        colour = states.get(row[1])
        if colour and not head:
            cells[1] = f"[{colour}]{cells[1]}[/{colour}]"
        return "  " + "  ".join(cells).rstrip()

    return [line(TEXT_HEAD, head=True), *(line(row) for row in rows)]


def _gate_word(h: HostOutcome) -> str:
    return {True: "passed", False: "failed", None: "not reached"}[h.gate_passed]


def _per_position(h: HostOutcome) -> str | None:
    """The acceptance by position at the lowest concurrency that has it, before → after."""
    before = {m.concurrency: m.per_position for m in h.before if m.per_position}
    after = {m.concurrency: m.per_position for m in h.after if m.per_position}
    both = sorted(before.keys() & after.keys()) or sorted(before.keys() | after.keys())
    if not both:
        return None
    c = both[0]
    return (f"acceptance by position at concurrency {c}: {_curve(before.get(c, ()))} → "
            f"{_curve(after.get(c, ()))}")


def _errors(h: HostOutcome) -> str | None:
    """Requests answered with an error during the measurements, before → after (None when there were none)."""
    before, after = sum(m.errors for m in h.before), sum(m.errors for m in h.after)
    if not before and not after:
        return None
    sent_before = before + sum(m.requests for m in h.before)  # `requests` counts the ones served
    sent_after = after + sum(m.requests for m in h.after)
    return f"requests answered with an error: {before} of {sent_before} before → {after} of {sent_after} after"


def _details(h: HostOutcome, esc: Callable[[str], str], mark: Callable[[bool], str],
             bold: Callable[[str], str]) -> tuple[str, list[str]]:
    """A reached host's gate line, then its clauses and what else it has to say (in the medium's markup)."""
    head = (f"{bold(esc(h.host))} (served {esc(_served(h.before_profile))} before): gate {_gate_word(h)}"
            + (f" — {esc(h.why)}" if h.why else ""))
    more = [f"{mark(c.passed)} {esc(c.text)}: {esc(c.said)}" for c in h.clauses]
    curve = _per_position(h)
    if curve:
        more.append(curve)
    errors = _errors(h)
    if errors:
        more.append(errors)
    if h.bugs:
        more.append("bugs: " + esc("; ".join(h.bugs)))
    if h.diagnosis and h.state in ("failed", "restore-failed"):
        more.append("diagnosis: " + esc(h.diagnosis))
    if h.restored:
        more.append("restored: " + esc(h.restored))
    return head, more


def _title(result: RolloutResult) -> str:
    return f"specops rollout · {result.profile} · {result.state} · {result.rollout_id}"


def _where(plan: RolloutPlan) -> str:
    at = ", ".join(str(c) for c in plan.concurrency)
    return (f"gate: {plan.gate} · soak: {spoken(plan.soak_s)} on each host; before and after measured on the "
            f"shipped workload at concurrency {at}")


def render_rollout(result: RolloutResult | RolloutPlan, fmt: Format) -> Rendered:
    if fmt == "json":
        return Rendered(json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n")
    if isinstance(result, RolloutPlan):
        return _plan(result, fmt)
    if fmt == "slack":
        return _slack(result)
    return Rendered(_md(result) if fmt == "md" else _text(result))


def _text(result: RolloutResult) -> str:
    out = [_rich(_title(result)), "", f"[bold]{_rich(result.headline)}[/bold]", *map(_rich, result.notes),
           _rich(_where(result.plan))]

    def mark(ok: bool) -> str:
        return "[green]✓[/green]" if ok else "[red]✗[/red]"

    for index, hosts in batches_of(result):
        reached = _reached(hosts)  # a batch not reached is its heading alone: a table of dashes says nothing more
        out += ["", f"[bold]{_rich(batch_name(index))}[/bold] · {_rich(_names([h.host for h in hosts]))}: "
                    f"{_rich(batch_verdict(hosts))}", *(_text_table(hosts) if reached else [])]
        for h in reached:
            head, more = _details(h, _rich, mark, lambda s: s)
            out += ["  " + head, *("    " + line for line in more)]
    if result.timeline:
        out += ["", "[bold]Timeline[/bold]", *(f"  {clock(t):>5}  {_rich(e)}" for t, e in result.timeline)]
    return "\n".join(out) + "\n"


def _md(result: RolloutResult) -> str:
    out = [f"# {_title(result)}", "", f"**{result.headline}**", "", *(f"- {n}" for n in result.notes),
           _where(result.plan)]
    for index, hosts in batches_of(result):
        out += ["", f"## {batch_name(index)} · {_names([h.host for h in hosts])}: {batch_verdict(hosts)}"]
        reached = _reached(hosts)
        if reached:  # a batch not reached is its heading alone: a table of dashes says nothing more
            out += ["", *_md_table(hosts), ""]
        for h in reached:
            head, more = _details(h, lambda s: s, lambda ok: "✓" if ok else "✗", lambda s: f"**{s}**")
            out += [f"- {head}", *(f"  - {line}" for line in more)]
    if result.timeline:
        out += ["", "## Timeline", "", *(f"- `{clock(t)}` {e}" for t, e in result.timeline)]
    return "\n".join(out) + "\n"


# -- Slack ---------------------------------------------------------------------------------------------------

def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": _cut(text, SLACK_ROOM)}]}


def _slack_measured(h: HostOutcome) -> str | None:
    """tok/s before → after (the change) at each concurrency, and the mean acceptance at the lowest."""
    pairs = [(c, b, a) for c, b, a in _pairs(h) if c is not None]
    if not pairs:
        return None
    tps = " · ".join(f"{_n(b.tokens_per_s if b else None)} → {_n(a.tokens_per_s if a else None)} "
                     f"({_ratio(b.tokens_per_s if b else None, a.tokens_per_s if a else None)}) at {c}"
                     for c, b, a in pairs)
    _, b, a = pairs[0]
    mean = (f" · mean acceptance {_n(b.mean_acceptance_length if b else None, '{:.2f}')} → "
            f"{_n(a.mean_acceptance_length if a else None, '{:.2f}')}")
    return f"tok/s {tps}{mean}"


def _slack_host(h: HostOutcome) -> str:
    head, more = _details(h, _esc, lambda ok: "✓" if ok else "✗", lambda s: f"*{s}*")
    measured = _slack_measured(h)
    lines = [f"{SLACK_ICON.get(h.state, '•')} {head}", *([measured] if measured else []), *more]
    return _cut("\n".join(lines[:1] + ["      " + ln for ln in lines[1:]]), SLACK_ROOM - 200)


def _slack_chunks(result: RolloutResult) -> list[tuple[bool, str]]:
    """(starts a batch, its text): each batch's heading line and its hosts (those not reached on one line)."""
    chunks: list[tuple[bool, str]] = []
    for index, hosts in batches_of(result):
        chunks.append((True, _cut(f"*{batch_name(index)}* · {_esc(_names([h.host for h in hosts]))}: "
                                  f"{_esc(batch_verdict(hosts))}", 300)))
        chunks += [(False, _slack_host(h)) for h in hosts if h.state not in NOT_REACHED]
        waiting = [h.host for h in hosts if h.state in NOT_REACHED]
        if waiting and len(waiting) < len(hosts):
            chunks.append((False, _cut("• not reached: " + _esc(", ".join(waiting)), 600)))
    return chunks


def _pack(chunks: list[tuple[bool, str]]) -> list[str]:
    """The chunks in as few sections as fit: fewer blocks, each under Slack's section limit."""
    sections: list[str] = []
    for starts, text in chunks:
        joined = sections[-1] + ("\n\n" if starts else "\n") + text if sections else text
        if sections and len(joined) <= SLACK_ROOM:
            sections[-1] = joined
        else:
            sections.append(text)
    return sections


def _slack_timeline(result: RolloutResult) -> tuple[str, bool]:
    """The timeline in one section (the events that fit, then how many did not) and whether any was left out."""
    lines, size = [], 0
    for t, event in result.timeline:
        line = f"{clock(t):>5}  {_cut(event, 200)}"
        if size + len(line) + 1 > SLACK_ROOM - 200:
            break
        lines.append(line)
        size += len(line) + 1
    left = len(result.timeline) - len(lines)
    tail = f"\n… {left} more event(s) in the attached report" if left else ""
    return "*Timeline*\n```" + _esc("\n".join(lines)) + "```" + tail, left > 0


def _slack(result: RolloutResult) -> Rendered:
    head = _esc("\n".join([result.headline, *result.notes]))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(_title(result), 150), "emoji": True}},
        _section(_cut(f"*{head}*", SLACK_ROOM)),
    ]
    sections = _pack(_slack_chunks(result))
    room = SLACK_MAX_BLOCKS - len(blocks) - 3  # the timeline, the gate's context, and a note of what was cut
    cut = len(sections) > room
    blocks += [_section(s) for s in sections[:room]]
    if cut:
        blocks.append(_context(f"… {len(sections) - room} more section(s) of hosts in the attached report"))
    if result.timeline:
        timeline, left_out = _slack_timeline(result)
        blocks.append(_section(timeline))
        cut = cut or left_out
    blocks.append(_context(_esc(_where(result.plan)) + f" · rollout {_esc(result.rollout_id)}"))
    return _payload(result.headline, blocks, [(ATTACHED, _md(result))] if cut else [])


def _payload(headline: str, blocks: list[dict[str, Any]], attachments: list[tuple[str, str]]) -> Rendered:
    return Rendered(json.dumps({"text": _cut(headline, SLACK_MAX_SECTION), "blocks": blocks}, indent=2,
                               ensure_ascii=False) + "\n", attachments)


# -- the plan ------------------------------------------------------------------------------------------------

def plan_headline(p: RolloutPlan) -> str:
    return (f"Plan: roll {p.profile} over {len(p.hosts)} host(s) in {len(p.batches)} batch(es), the canary first")


def _plan_batches(p: RolloutPlan) -> list[tuple[str, str]]:
    serving = dict(p.serving)
    return [(batch_name(i), ", ".join(f"{h} (serves {_served(serving.get(h))})" for h in batch))
            for i, batch in enumerate(p.batches)]


def _plan(p: RolloutPlan, fmt: Format) -> Rendered:
    """The dry run: the batches in order, what each host serves now, the gate and the soak; nothing ran. After a
    crash (`--resume` / `--abort` with `--dry-run`): what each host would get."""
    intro = plan_headline(p) + "; nothing ran"
    rule = ("Each batch passes the gate before the next starts; a host that does not is rolled back to what it "
            "served, with its batch, and the rollout stops. Cancel restores every host changed.")
    batches = _plan_batches(p)
    if p.action is not None:
        intro = f"Plan: {p.action} rollout {p.rollout_id} of {p.profile}; nothing ran, nothing was locked"
        rule = f"`specops rollout --{p.action}` without --dry-run does this."
        batches = list(p.steps)
    if fmt == "slack":
        listed = "\n".join(f"*{name}*: {_esc(hosts)}" for name, hosts in batches)
        return _payload(plan_headline(p), [
            {"type": "header", "text": {"type": "plain_text", "text": _cut(plan_headline(p), 150), "emoji": True}},
            _section(":clipboard: *Plan* (nothing ran, nothing judged) · " + _esc(intro)),
            _section(_cut(listed, SLACK_ROOM)),
            _section(_cut(_esc(f"{_where(p)}. {rule}"), SLACK_ROOM)),
        ], [])
    title = f"specops rollout · plan · {p.profile}" + (f" · {p.rollout_id}" if p.rollout_id else "")
    if fmt == "md":
        lines = [f"# {title}", "", intro, "", *(f"- **{name}**: {hosts}" for name, hosts in batches), "",
                 _where(p), "", rule]
    else:
        width = max(len(name) for name, _ in batches) if batches else 0
        lines = [_rich(title), "", _rich(intro), "", *(f"{_rich(name.ljust(width))}  {_rich(hosts)}"
                                                       for name, hosts in batches), "", _rich(_where(p)), _rich(rule)]
    return Rendered("\n".join(lines) + "\n")


def _chart(result: RolloutResult | RolloutPlan) -> bytes | None:
    if not isinstance(result, RolloutResult) or not any(h.before or h.after for h in result.hosts):
        return None
    from bot.present import charts

    return charts.rollout_png(result)


def _chart_file(result: RolloutResult | RolloutPlan, _now: datetime) -> tuple[str, str]:
    return (file_name("rollout", result.profile, result.rollout_id),
            f"Before and after on each host: rollout of {result.profile}")


PRESENTER: Presenter[RolloutResult | RolloutPlan] = Presenter(render_rollout, chart=_chart, chart_file=_chart_file)
