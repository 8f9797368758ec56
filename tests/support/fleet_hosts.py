"""What the rollout tests do to the three simulated hosts (bot/sim/fleet.py) around the run they test: serve one
profile on each, read what each serves, and stop them all for the next test."""

from __future__ import annotations

from bot.app.operations import ops
from bot.app.services import build_services
from bot.config import Config
from bot.store.facade import Store

HOSTS = ("a6000", "a6000-b", "a6000-c")


def serve_everywhere(config: Config, profile: str) -> None:
    svc = build_services(config)
    try:
        for host in HOSTS:
            report = ops.deploy(ops.HostRequest(config, host, profile, store=svc.store, hosts=svc.hosts))
            assert report.operation is not None and report.operation.status in ("changed", "unchanged"), \
                report.headline
    finally:
        svc.close()


def stop_everywhere(config: Config) -> None:
    """The next test starts from hosts that serve nothing."""
    svc = build_services(config)
    try:
        for host in HOSTS:
            ops.stop(ops.HostRequest(config, host, store=svc.store, hosts=svc.hosts))
    finally:
        svc.close()


def serving(config: Config) -> dict[str, tuple[str | None, int]]:
    """host -> (the profile its latest row serves, that row's id: a host deployed again has another)."""
    svc = build_services(config)
    store = Store(config.settings.state, svc.redactor)
    try:
        out: dict[str, tuple[str | None, int]] = {}
        for host in HOSTS:
            dep = store.deployments.latest(host)
            out[host] = (dep.profile if dep is not None and dep.status == "serving" else None, dep.id if dep else 0)
        return out
    finally:
        store.close()
        svc.close()
