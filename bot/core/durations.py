"""How long something took or has been, said as a person says it: "40 s", "12 min", "3.5 h"."""

from __future__ import annotations


def spoken(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
