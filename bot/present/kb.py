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
    """The score on real cases: one line per case, the totals (strict, then loose), the confidence table, the
    split by kind of case."""
    width = max(len(c.name) for c in result.cases)
    lines = [f"{'case':<{width}}  {'expected':<9} {'got':<9} result (strict: the cause and the fix claimed)"]
    lines += [f"{c.name:<{width}}  {c.expected_verdict or '-':<9} {c.verdict:<9} "
              + ("ok" if c.strict else f"MISS: {c.strict_why}") for c in result.cases]
    problems = result.problems
    lines.append(f"\n{result.strict_passed} of {len(result.cases)} right, strict ({result.score * 100:.0f}%): problems "
                 f"{sum(1 for c in problems if c.strict)} of {len(problems)}, healthy "
                 f"{sum(1 for c in result.healthy if c.strict)} of {len(result.healthy)}; false alarms: "
                 f"{result.false_alarms} of {len(result.healthy)} healthy case(s)")
    lines.append(f"loose (any one tag, a family enough): {result.passed} of {len(result.cases)} "
                 f"({result.loose_score * 100:.0f}%)")
    table = result.confidence_table()
    lines.append("claims (warning or critical findings) right/claimed: " + "; ".join(
        f"{level} {t['right']}/{t['claimed']}" + (f" ({100 * t['right'] / t['claimed']:.0f}%)" if t["claimed"] else "")
        for level, t in table.items()))
    lines.append("; ".join(f"{name}: {g['passed']} of {g['total']}" for name, g in result.split().items()
                           if g["total"]))
    return lines
