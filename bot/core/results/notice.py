"""A one-line answer (a lock broken, nothing to do): shown as it is in every medium."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Notice:
    text: str

    @property
    def headline(self) -> str:
        return self.text

    def as_json(self) -> dict[str, str]:
        return {"notice": self.text}
