"""`specops init`: a commented starting config, or the deploy files (Slack manifests, systemd unit,
Containerfile, Prometheus rules), copied from the shipped ones."""

from __future__ import annotations

import os
from pathlib import Path

from bot.config import default_config_path
from bot.errors import InputError
from bot.paths import deploy_dir

DEPLOY_FILES = ("slack-manifest.socket-mode.yaml", "slack-manifest.http.yaml", "specops.service", "Containerfile",
                "prometheus-rules.yml", "prometheus-rules.test.yml", "README.md", "specops.example.yaml")
HEADER = ("# Written by `specops init`. Fill in the host under `hosts:` (address, user, key), add its\n"
          "# SSH host key to known_hosts, then: `specops config check` and `specops deploy PROFILE --host\n"
          "# HOST --dry-run`.\n")


def write_deploy_files(folder: Path, *, force: bool) -> list[Path]:
    if folder.exists() and not folder.is_dir():
        raise InputError(f"--deploy-files {folder} is a file: give a folder")
    clash = [n for n in DEPLOY_FILES if (folder / n).exists()]
    if clash and not force:
        raise InputError(f"{folder} already has {', '.join(clash)}; --force overwrites")
    source = deploy_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in DEPLOY_FILES:
            (folder / name).write_bytes((source / name).read_bytes())
    except OSError as exc:
        raise InputError(f"cannot write to {folder}: {exc.strerror or exc}") from None
    return [folder / name for name in DEPLOY_FILES]


def write_config(path: Path | None, *, force: bool) -> Path:
    target = (path or Path(os.environ.get("SPECOPS_CONFIG") or default_config_path())).expanduser()
    if target.exists() and not force:
        raise InputError(f"{target} exists; --force overwrites it (or --path FILE writes elsewhere)")
    text = (deploy_dir() / "specops.example.yaml").read_text(encoding="utf-8")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(HEADER + text, encoding="utf-8")
        target.chmod(0o600)  # it may come to hold tokens in env values
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target
