"""The object graph for tests that call use cases directly: one `Services` per config object, closed at exit."""

from __future__ import annotations

import atexit
from typing import Any

from bot.app.services import Services, build_services
from bot.config import Config

_GRAPHS: dict[int, tuple[Config, Services]] = {}


def services(cfg: Config) -> Services:
    held = _GRAPHS.get(id(cfg))
    if held is None or held[0] is not cfg:
        held = (cfg, build_services(cfg))
        _GRAPHS[id(cfg)] = held
    return held[1]


def graph(cfg: Config) -> dict[str, Any]:
    """The parts a request takes from the graph: `HostRequest(cfg, host, …, **graph(cfg))`."""
    svc = services(cfg)
    return {"store": svc.store, "hosts": svc.hosts}


@atexit.register
def _close() -> None:
    for _, svc in _GRAPHS.values():
        svc.close()
