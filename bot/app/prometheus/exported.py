"""What specops knows of each host's deployment and Prometheus does not: its profile, method, k and the floor of
the one acceptance judgment (core.triage.acceptance.first_position_floor). The bot exports these on /metrics
(`specops_deployment_info`, `specops_acceptance_floor`) so the shipped alert rules and the dashboard join them to
vLLM's own series by `specops_host`, and judge each server with the thresholds the config holds — the watch's and
every diagnosis's — instead of numbers of their own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bot.config import Config
from bot.core.triage.acceptance import first_position_floor
from bot.core.triage.knowledge import normalize_method


class ServingReader(Protocol):
    def read_serving(self) -> dict[str, str]: ...


@dataclass(frozen=True)
class ServedSetting:
    host: str
    profile: str
    method: str  # "none" when the profile does not speculate
    k: int | None
    floor: float | None  # None when nothing speculates


def served_settings(config: Config, deployments: ServingReader) -> list[ServedSetting]:
    """Each host's serving profile as the store records it, described by the config as that host serves it (its
    overrides: a k of its own); a profile the config no longer has is left out: nothing says what it runs."""
    floors = config.watch.rules.first_position_floor
    out: list[ServedSetting] = []
    for host, name in sorted(deployments.read_serving().items()):
        profile = config.served_profile(name, host)
        if profile is None:
            continue
        speculates = profile.method != "none"
        method = (normalize_method(profile.method) or profile.method) if speculates else "none"
        out.append(ServedSetting(host, name, method, profile.num_speculative_tokens if speculates else None,
                                 first_position_floor(profile.method, floors) if speculates else None))
    return out
