"""`specops doctor` as text, Markdown or JSON: each check's status, what was seen, and the fix."""

from __future__ import annotations

import json
from typing import Any

from bot.present.render import Rendered

MARK = {"failed": "✖", "warn": "▲", "ok": "✔", "skipped": "·"}


def render_doctor(data: dict[str, Any], fmt: str) -> Rendered:
    if fmt == "json":
        return Rendered(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    where = data["host"] + (f" (Proxmox host {data['proxmox']})" if data.get("proxmox") else "")
    title = f"specops doctor · {where} · {data['status']}"
    out = [f"# {title}", ""] if fmt == "md" else [title, ""]
    for c in data["checks"]:
        head = f"{MARK.get(c['status'], ' ')} {c['status']:<7} {c['title']}"
        out.append(f"- **{c['status']}** {c['title']} (`{c['id']}`)" if fmt == "md" else head)
        shown = c["seen"][:6] if c["status"] in ("failed", "warn") else c["seen"][:1]
        for line in shown:
            out.append(f"    seen: {line}" if fmt != "md" else f"  - seen: `{line}`")
        if c.get("fix"):
            fix = c["fix"].replace("\n", "\n          ")
            out.append(f"    fix:  {fix}" if fmt != "md" else f"  - **fix:** {c['fix']}")
        if c.get("kb") and c["status"] in ("failed", "warn"):
            more = f"specops kb show {c['kb']}"
            out.append(f"    more: {more}" if fmt != "md" else f"  - more: `{more}`")
    return Rendered("\n".join(out) + "\n")
