"""The knowledge base and the eval score as terminal lines (`specops kb list|show`, `specops eval`)."""

from __future__ import annotations

from typing import Any


def entry_line(e: Any) -> str:
    return f"{e.id:<52} {e.kind:<16} {e.family:<18} {e.title}"


def entry_lines(e: Any) -> list[str]:
    """One entry with its patterns, cause, versions, fix, remediation and sources."""
    lines = [f"{e.id} — {e.title}\n  {e.kind}, {e.family}, {e.severity}" + (", fatal at launch" if e.fatal_at_launch
                                                                          else ""),
             f"cause: {e.cause}",
             f"affected: versions {e.affected.versions}; methods {', '.join(e.affected.methods)}"
             + (f"; platform {e.affected.platform}" if e.affected.platform else "")]
    no_fix = f": {e.no_fix}" if e.no_fix else ""
    lines.append(f"fixed in: {e.fixed_in}" if e.fixed_in else f"fixed in: not established{no_fix}")
    for u in e.upstream:
        first = f", first release {u.first_release}" if u.first_release else ""
        lines.append(f"upstream: {u.repo}#{u.number} ({u.state}{first})" + (f" {u.title}" if u.title else ""))
    lines += [f"do: {r}" for r in e.remediation]
    lines += [f"pattern: {p}" for p in e.patterns]
    lines += [f"source: {s}" for s in e.sources]
    return lines


def eval_lines(result: Any) -> list[str]:
    """The score on real cases: one line per case, the totals, the split by kind of case."""
    width = max(len(c.name) for c in result.cases)
    lines = [f"{'case':<{width}}  {'expected':<9} {'got':<9} result"]
    lines += [f"{c.name:<{width}}  {c.expected_verdict or '-':<9} {c.verdict:<9} "
              + ("ok" if c.passed else f"MISS: {c.why}") for c in result.cases]
    lines.append(f"\n{result.passed} of {len(result.cases)} right ({result.score * 100:.0f}%); false alarms: "
                 f"{result.false_alarms} of {len(result.healthy)} healthy case(s)")
    lines.append("; ".join(f"{name}: {g['passed']} of {g['total']}" for name, g in result.split().items()
                           if g["total"]))
    return lines
