"""`specops kb atlas`: where vLLM's released source prints a line, as terminal lines (the JSON is the dict)."""

from __future__ import annotations

from typing import Any


def atlas_lines(out: dict[str, Any]) -> list[str]:
    if not out["found"]:
        return [f"not in the atlas: {out['why']}"]
    what = out["exception_class"] or f"{out['log_level']} log"
    lines = [f"{out['package']} · {out['part']} · {what} in {out['file']}:{out['line_no']} `{out['function']}`",
             f"releases: {out['releases'][0]}–{out['releases'][1]}" + ("" if out["exact"] else
                                                                         " (matched on part of the message)"),
             f"link: {out['url']}"]
    if out["condition"]:
        lines.append(f"when: {out['condition_text'] or out['condition']}   [{out['condition']}]")
    if out["in_your_release"] is False:
        lines.append("your release does not have this line")
    if out["gone_after"]:
        lines.append(f"gone after {out['gone_after']}: upgrade to {out['fixed_in']} ({out['compare_url']})")
    for k in out["knobs"]:
        key = f" (key {k['key']})" if k["key"] else ""
        lines.append(f"knob: {k['flag']}{key} [{k['field']}] {k['help']}".rstrip())
    return lines
