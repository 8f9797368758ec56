"""`specops kb atlas`: where vLLM's released source prints a line, as terminal lines (the JSON is the dict)."""

from __future__ import annotations

from typing import Any


def atlas_lines(out: dict[str, Any]) -> list[str]:
    known = [f"knowledge base: {e['id']} — {e['title']} (`specops kb show {e['id']}`)"
             for e in out.get("knowledge_base", [])]
    if not out["found"]:
        return [*known, f"not in the atlas: {out['why']}"]
    what = out["exception_class"] or f"{out['log_level']} log"
    lines = [*known, f"{out['package']} · {out['part']} · {what} in {out['file']}:{out['line_no']} `{out['function']}`",
             f"releases: {out['releases'][0]}–{out['releases'][1]}" + ("" if out["exact"] else
                                                                         " (matched on part of the message)"),
             f"link: {out['url']}"]
    if out["condition"]:
        lines.append(f"when: {out['condition_text'] or out['condition']}   [{out['condition']}]")
    if out["in_your_release"] is False:
        lines.append("your release does not have this line")
    if out["gone_after"]:
        # a sentence no later release prints may be reworded, not fixed: only the diff says which
        lines.append(f"this wording is in no release after {out['gone_after']} (reworded or removed"
                     + (f": {out['compare_url']}" if out.get("compare_url") else "") + ")")
    if out.get("also_raised_in"):
        platforms = any(f.startswith("vllm/platforms/") for f in out["also_raised_in"])
        lines.append("also raised, word for word, in: " + ", ".join(out["also_raised_in"])
                     + (" (give --platform to choose)" if platforms else ""))
    for k in out["knobs"]:
        key = f" (key {k['key']})" if k["key"] else ""
        lines.append(f"knob: {k['flag']}{key} [{k['field']}] {k['help']}".rstrip())
    return lines
