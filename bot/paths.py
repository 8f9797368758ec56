"""Where the shipped data lives: `templates/`, `playbooks/` and `deploy/` at the top of a checkout,
or inside the wheel under `bot/_data/` (see pyproject's force-include)."""

from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    override = os.environ.get(f"SPECOPS_{name.upper()}")
    if override:
        return Path(override)
    installed = _PKG / "_data" / name
    if installed.is_dir():
        return installed
    return _PKG.parent / name


def templates_dir() -> Path:
    return data_dir("templates")


def shipped_templates_dir() -> Path:
    """The templates this release ships, whatever SPECOPS_TEMPLATES says: what an operator's copy lacks comes from
    here (a template a newer release added)."""
    installed = _PKG / "_data" / "templates"
    return installed if installed.is_dir() else _PKG.parent / "templates"


def playbooks_dir() -> Path:
    return data_dir("playbooks")


def deploy_dir() -> Path:
    """The example config, Slack manifests, systemd unit, Containerfile and Prometheus rules."""
    return data_dir("deploy")


def repo_root() -> Path | None:
    """The checkout this package runs from (it has pyproject.toml and tests/), or None when installed."""
    root = _PKG.parent
    return root if (root / "pyproject.toml").is_file() and (root / "tests").is_dir() else None
