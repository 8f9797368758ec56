"""What an operation did on a host — its steps, their status, its message — and, when it judged the server it left
behind, that diagnosis: a deploy that ran (the triage of what it started or found serving), or one its checks
before launch refused (their findings). A stop and a plan judge nothing: no verdict is printed for them.

Its own result, not a diagnosis with an operation field: the renderers show the steps, then the diagnosis if there is
one, and its JSON keeps the two apart (`{"operation": …, "diagnosis": … | null}`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.core.report import OperationOut, Report


@dataclass
class OperationResult:
    operation: OperationOut
    headline: str
    diagnosis: Report | None = None
    notes: list[str] = field(default_factory=list)  # what else happened (a lock taken over from a gone holder)

    @property
    def status(self) -> str:
        return self.operation.status

    @property
    def failed(self) -> bool:
        return self.operation.status in ("failed", "refused")

    def contract(self) -> dict[str, Any]:
        return {"headline": self.headline, "operation": self.operation.model_dump(mode="json"), "notes": self.notes,
                "diagnosis": self.diagnosis.contract() if self.diagnosis is not None else None}
