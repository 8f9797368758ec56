"""`specops doctor`: is the GPU host ready for vLLM — inside the container or host that runs it, and
on the Proxmox host under it when the inventory names one. Over the same SSH layer as everything else;
the probes are fixed scripts whose inputs are positional arguments (bot/core/probes/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.config import Config
from bot.core.doctor import STATUS_RANK, Check, container_driver, host_checks, probe, proxmox_checks
from bot.core.report import MetricsOut, Report
from bot.core.triage.findings import Finding
from bot.remote.ssh import SSHError, SSHSession


@dataclass
class DoctorReport:
    host: str
    profile: str | None
    checks: list[Check] = field(default_factory=list)
    proxmox: str | None = None

    @property
    def status(self) -> str:
        worst = min((STATUS_RANK[c.status] for c in self.checks), default=STATUS_RANK["ok"])
        return {0: "failed", 1: "warn"}.get(worst, "ok")

    def as_json(self) -> dict[str, Any]:
        return {"host": self.host, "profile": self.profile, "proxmox": self.proxmox, "status": self.status,
                "checks": [c.as_json() for c in self.checks]}

    def as_report(self) -> Report:
        """The same checks as a Report, for the chat front ends (one finding per check that is not ok)."""
        findings = [Finding(id=f"doctor-{c.id}", title=c.title, severity="critical" if c.status == "failed" else
                            "warning", confidence="high", summary=f"{c.title}: {c.status}",
                            evidence=c.seen[:8], remediation=[c.fix] if c.fix else [], is_bug=False)
                    for c in self.checks if c.status in ("failed", "warn")]
        verdict = {"failed": "failing", "warn": "degraded"}.get(self.status, "healthy")
        bad = [c.title for c in self.checks if c.status == "failed"]
        headline = (f"{self.host}: not ready — {'; '.join(bad)}" if bad else
                    f"{self.host}: ready ({len(self.checks)} checks" + (", with warnings)" if findings else ")"))
        notes = [f"{c.status:>7}  {c.title}" for c in self.checks]
        return Report(verdict=verdict, headline=headline, metrics=MetricsOut(), findings=findings,
                      notes=notes, source=f"specops doctor · {self.host}" + (f" · Proxmox {self.proxmox}"
                                                                             if self.proxmox else ""),
                      context={"host": self.host, "profile": self.profile})


def _profile_for(config: Config, host: str, profile: str | None) -> str | None:
    if profile is not None:
        config.profile(profile)
        return profile
    from bot.app.records import latest_profile

    recorded = latest_profile(config.settings, host)
    if recorded in config.profiles:
        return recorded
    return next(iter(config.profiles), None)


def doctor(config: Config, host: str, profile: str | None = None) -> DoctorReport:
    """Every check, on the host and (when named) its Proxmox host. Raises SSHError when `host` cannot be
    reached: then nothing could be checked."""
    hc = config.host(host)
    name = _profile_for(config, host, profile)
    p = config.profiles.get(name or "")
    port, tp = (p.port, p.tensor_parallel_size) if p else (0, 1)
    args = [str(port), str(tp), p.vllm.bin if p else "vllm"]
    paths = [x for x in (p.model if p else None, p.drafter if p else None, hc.workdir) if x and x.startswith("/")]
    out = DoctorReport(host, name)
    with SSHSession(host, hc) as session:
        r = session.run(["sh", "-c", probe("host"), "doctor", *args, *paths], timeout=180)
        pid_text = session.read_file(f"{hc.workdir}/server.pid")  # where the playbooks record the server
    recorded_pid = int(pid_text.decode().strip()) if pid_text and pid_text.decode().strip().isdigit() else None
    out.checks = host_checks(r.out(), host=host, port=port, tp=tp,
                             expected_version=p.vllm.version if p else None, recorded_pid=recorded_pid)
    if hc.proxmox is not None:
        pve = hc.proxmox.host
        out.proxmox = pve
        try:
            with SSHSession(pve, config.host(pve)) as session:
                pr = session.run(["sh", "-c", probe("proxmox"), "doctor", str(hc.proxmox.ctid)], timeout=60)
            out.checks += proxmox_checks(pr.out(), ctid=hc.proxmox.ctid, container_module=container_driver(r.out()),
                                         pve=pve)
        except SSHError as exc:
            out.checks.append(Check("pve-ssh", f"the Proxmox host {pve} answers", "failed", [str(exc)],
                                    f"check `hosts.{pve}` in the config (address, key, known_hosts)"))
        out.checks.sort(key=lambda c: STATUS_RANK[c.status])
    return out
