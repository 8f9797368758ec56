"""`specops init`: a commented starting config, or the deploy files (Slack manifests, systemd unit,
Containerfile, Prometheus alert and recording rules, the Grafana dashboard), copied from the shipped ones,
with the wheel the Containerfile installs beside them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bot.config import default_config_path
from bot.errors import InputError
from bot.paths import deploy_dir

DEPLOY_FILES = ("slack-manifest.socket-mode.yaml", "slack-manifest.http.yaml", "specops.service", "Containerfile",
                "prometheus-rules.yml", "prometheus-rules.test.yml", "README.md", "specops.example.yaml",
                "prometheus-recording-rules.yml", "prometheus-recording-rules.test.yml",
                "grafana/specops-spec-decode.json", "grafana/README.md")
HEADER = ("# Written by `specops init`. Fill in the host under `hosts:` (address, user, key), add its\n"
          "# SSH host key to known_hosts, then: `specops config check` and `specops deploy PROFILE --host\n"
          "# HOST --dry-run`.\n")


WHEELS = "wheels"  # beside the Containerfile, which copies this folder and installs the specops wheel in it


@dataclass(frozen=True)
class DeployFiles:
    written: list[Path]
    no_wheel: str | None = None  # why no wheel was written (the Containerfile needs one in wheels/)


def write_deploy_files(folder: Path, *, force: bool) -> DeployFiles:
    from bot.app.configuration.wheel import NoWheel, build_wheel

    if folder.exists() and not folder.is_dir():
        raise InputError(f"--deploy-files {folder} is a file: give a folder")
    stale = _check_targets(folder, force=force)
    try:
        wheel: tuple[str, bytes] | None = build_wheel()
        no_wheel = None
    except NoWheel as exc:
        wheel, no_wheel = None, f"no wheel written for the Containerfile: {exc}"
    source = deploy_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in DEPLOY_FILES:
            (folder / name).parent.mkdir(exist_ok=True)
            _write_no_follow(folder / name, (source / name).read_bytes(), 0o644)
        written = [folder / name for name in DEPLOY_FILES]
        if wheel is not None:
            written.append(_write_wheel(folder / WHEELS, *wheel, stale))
    except OSError as exc:
        raise InputError(f"cannot write to {folder}: {exc.strerror or exc}") from None
    return DeployFiles(written, no_wheel)


def _check_targets(folder: Path, *, force: bool) -> list[Path]:
    """Refuses a symbolic link on the way and, without --force, any file there; returns the wheels there
    (a second wheel beside the new one would make the image's `pip install` fail)."""
    # the grafana/ and wheels/ folders too: O_NOFOLLOW guards only the last part of a path
    folders = {(folder / n).parent for n in DEPLOY_FILES if "/" in n} | {folder / WHEELS}
    wheels = sorted((folder / WHEELS).glob("specops-*.whl")) if (folder / WHEELS).is_dir() else []
    paths = [folder / n for n in DEPLOY_FILES] + sorted(folders) + wheels
    links = [p for p in paths if p.is_symlink()]
    if links:
        raise InputError(f"{links[0]} is a symbolic link: specops init does not write through one")
    clash = [n for n in DEPLOY_FILES if (folder / n).exists()] + [str(w.relative_to(folder)) for w in wheels]
    if clash and not force:
        raise InputError(f"{folder} already has {', '.join(clash)}; --force overwrites")
    return wheels


def _write_wheel(folder: Path, name: str, data: bytes, stale: list[Path]) -> Path:
    folder.mkdir(exist_ok=True)
    for old in stale:
        if old.name != name:
            old.unlink()  # --force: the new wheel replaces the old ones, not joins them
    _write_no_follow(folder / name, data, 0o644)
    return folder / name


def write_config(path: Path | None, *, force: bool) -> Path:
    target = (path or Path(os.environ.get("SPECOPS_CONFIG") or default_config_path())).expanduser()
    if target.is_symlink():  # a dangling one too: writing through it would create its target elsewhere
        raise InputError(f"{target} is a symbolic link: specops init does not write through one; "
                         "remove it or give the real path with --path")
    if target.exists() and not force:
        raise InputError(f"{target} exists; --force overwrites it (or --path FILE writes elsewhere)")
    text = (deploy_dir() / "specops.example.yaml").read_text(encoding="utf-8")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_no_follow(target, (HEADER + text).encode("utf-8"), 0o600)  # it may come to hold tokens
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target


def _write_no_follow(path: Path, data: bytes, mode: int) -> None:
    """Written in place, never through a symbolic link (one put there after the check fails with ELOOP)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
    finally:
        os.close(fd)
