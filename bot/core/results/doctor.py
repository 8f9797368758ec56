"""`specops doctor`: is the GPU host ready for vLLM — every check, on the host and on its Proxmox host when the
inventory names one — as typed data. `as_json()` is the `--format json` contract."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from bot.core.doctor_facts import STATUS_RANK, Check
from bot.core.report import Verdict

DoctorStatus = Literal["ok", "warn", "failed"]


@dataclass(frozen=True)
class DoctorReport:
    host: str
    profile: str | None  # the profile the checks hold the host to (its port, TP size, vLLM)
    checks: tuple[Check, ...] = ()
    proxmox: str | None = None  # the Proxmox host also checked

    @property
    def status(self) -> DoctorStatus:
        worst = min((STATUS_RANK[c.status] for c in self.checks), default=STATUS_RANK["ok"])
        return "failed" if worst == STATUS_RANK["failed"] else "warn" if worst == STATUS_RANK["warn"] else "ok"

    @property
    def verdict(self) -> Verdict:
        status = self.status
        return "failing" if status == "failed" else "degraded" if status == "warn" else "healthy"

    @property
    def problems(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status in ("failed", "warn"))

    @property
    def headline(self) -> str:
        bad = [c.title for c in self.checks if c.status == "failed"]
        if bad:
            return f"{self.host}: not ready — {'; '.join(bad)}"
        return f"{self.host}: ready ({len(self.checks)} checks" + (", with warnings)" if self.problems else ")")

    @property
    def source(self) -> str:
        return f"specops doctor · {self.host}" + (f" · Proxmox {self.proxmox}" if self.proxmox else "")

    def as_json(self) -> dict[str, Any]:
        return {"host": self.host, "profile": self.profile, "proxmox": self.proxmox, "status": self.status,
                "checks": [c.as_json() for c in self.checks]}
