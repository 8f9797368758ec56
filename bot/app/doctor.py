"""`specops doctor`: is the GPU host ready for vLLM — inside the container or host that runs it, and
on the Proxmox host under it when the inventory names one. Over the same SSH layer as everything else;
the probes are fixed scripts whose inputs are positional arguments (bot/core/probes/)."""

from __future__ import annotations

from bot.app.watching.records import latest_profile
from bot.config import Config, ProxmoxRef
from bot.core.doctor import container_driver, probe
from bot.core.doctor_facts import STATUS_RANK, Check
from bot.core.doctor_host import host_checks
from bot.core.doctor_proxmox import proxmox_checks
from bot.core.results.doctor import DoctorReport
from bot.engine.hosts import HostError, HostPool
from bot.store.facade import Store

__all__ = ["doctor"]


def _recorded_profile(host: str, store: Store | None) -> str | None:
    """The profile specops last deployed there; `store` None: no records yet (a doctor run creates none)."""
    return latest_profile(store, host) if store is not None else None


def _profile_for(config: Config, host: str, profile: str | None, store: Store | None) -> str | None:
    if profile is not None:
        config.profile(profile)
        return profile
    recorded = _recorded_profile(host, store)
    if recorded in config.profiles:
        return recorded
    return next(iter(config.profiles), None)


def _proxmox(hosts: HostPool, ref: ProxmoxRef, host_probe: str) -> list[Check]:
    try:
        with hosts.session(ref.host) as session:
            pr = session.run(["sh", "-c", probe("proxmox"), "doctor", str(ref.ctid)], timeout=60)
    except HostError as exc:
        return [Check("pve-ssh", f"the Proxmox host {ref.host} answers", "failed", [str(exc)],
                      f"check `hosts.{ref.host}` in the config (address, key, known_hosts)")]
    return proxmox_checks(pr.out(), ctid=ref.ctid, container_module=container_driver(host_probe), pve=ref.host)


def doctor(config: Config, host: str, profile: str | None = None, *, hosts: HostPool | None = None,
           store: Store | None = None) -> DoctorReport:
    """Every check, on the host and (when named) its Proxmox host. `hosts` and `store` are the object graph's;
    the store's records name the profile deployed, when `profile` does not. Raises HostError when `host`
    cannot be reached: then nothing could be checked."""
    hc = config.host(host)
    pool = hosts or HostPool(config)
    name = _profile_for(config, host, profile, store)
    p = config.served_profile(name, host)
    port, tp = (p.port, p.tensor_parallel_size) if p else (0, 1)
    args = [str(port), str(tp), p.vllm.bin if p else "vllm"]
    paths = [x for x in (p.model if p else None, p.drafter if p else None, hc.workdir) if x and x.startswith("/")]
    with pool.session(host) as session:
        r = session.run(["sh", "-c", probe("host"), "doctor", *args, *paths], timeout=180)
        pid_text = session.read_file(pool.layout(host).pid_file)
    pid = pid_text.decode().strip() if pid_text else ""
    checks = host_checks(r.out(), host=host, port=port, tp=tp, expected_version=p.vllm.version if p else None,
                         recorded_pid=int(pid) if pid.isdigit() else None)
    if hc.proxmox is None:
        return DoctorReport(host, name, tuple(checks))
    both = sorted([*checks, *_proxmox(pool, hc.proxmox, r.out())], key=lambda c: STATUS_RANK[c.status])
    return DoctorReport(host, name, tuple(both), hc.proxmox.host)
