"""`specops config check`: the schema (with lines and "did you mean"), then what the schema
cannot see — names that must refer to something (watch hosts, the rollback profile, the default
host, playbooks) are problems; files not there yet (SSH keys, known_hosts) are warnings, so a
config just written by `specops init` passes. `serve` runs it at start."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from bot.config import Config, find_config, key_lines, line_of, load_config, suggest
from bot.engine.playbook import PlaybookError, load_playbook
from bot.errors import ConfigError
from bot.paths import playbooks_dir


@dataclass
class CheckResult:
    path: Path | None
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # files not there yet: a new config still passes
    config: Config | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def _playbook_name(profile_playbook: str, method: str) -> str:
    # "deploy" picks the playbook by method (bot.app.ops)
    if profile_playbook != "deploy":
        return profile_playbook
    return "deploy-dflash" if method == "dflash" else "deploy-mtp"


def check(path: str | os.PathLike[str] | None = None) -> CheckResult:
    found = find_config(path)
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        lines = str(exc).splitlines()
        return CheckResult(found, [ln.strip() for ln in (lines[1:] if len(lines) > 1 else lines)])
    assert found is not None
    marks = key_lines(found.read_text(encoding="utf-8"))
    result = CheckResult(found, config=cfg)

    def problem(loc: tuple[str, ...], message: str, warning: bool = False) -> None:
        line = line_of(marks, loc)
        where = f"{found}:{line}: " if line else f"{found}: "
        (result.warnings if warning else result.problems).append(f"{where}{'.'.join(loc)}: {message}")

    watchable = cfg.watched()
    for i, name in enumerate(cfg.watch.hosts or []):
        if name not in watchable:
            problem(("watch", "hosts", str(i)), f"unknown host {name!r}{suggest(name, watchable)}")
    for name, inst in (cfg.prometheus.instances if cfg.prometheus else {}).items():
        if inst.profile is not None and inst.profile not in cfg.profiles:
            problem(("prometheus", "instances", name, "profile"),
                    f"unknown profile {inst.profile!r}{suggest(inst.profile, cfg.profiles)}")
    if cfg.watch.rollback_profile not in cfg.profiles:
        name = cfg.watch.rollback_profile
        given = "rollback_profile" in cfg.watch.model_fields_set  # the default names a profile you may not have
        problem(("watch", "rollback_profile") if given else ("watch",),
                f"unknown profile {name!r}{suggest(name, cfg.profiles)}" if given else
                f"rollback_profile is not set and its default {name!r} is not a profile: incidents' Roll back "
                "button will fail", warning=not given)
    if cfg.slack.default_host and cfg.slack.default_host not in cfg.hosts:
        name = cfg.slack.default_host
        problem(("slack", "default_host"), f"unknown host {name!r}{suggest(name, cfg.hosts)}")
    shipped = sorted(p.stem for p in playbooks_dir().glob("*.yaml"))
    for pname, prof in cfg.profiles.items():
        book = _playbook_name(prof.playbook, prof.method)
        if not Path(book).suffix and book not in shipped:
            problem(("profiles", pname, "playbook"),
                    f"no playbook {book!r}{suggest(book, shipped)}; shipped: {', '.join(shipped)}")
            continue
        try:
            load_playbook(book)
        except PlaybookError as exc:
            problem(("profiles", pname, "playbook"), str(exc).splitlines()[0])
    for hname, host in cfg.hosts.items():
        if host.proxmox is not None and host.proxmox.host not in cfg.hosts:
            problem(("hosts", hname, "proxmox", "host"),
                    f"unknown host {host.proxmox.host!r}{suggest(host.proxmox.host, cfg.hosts)} (the Proxmox host "
                    "must be in the inventory too)")
        if host.key is not None and not host.key.expanduser().is_file():
            problem(("hosts", hname, "key"), f"no key file at {host.key.expanduser()}", warning=True)
        kh = host.known_hosts.expanduser()
        if not kh.is_file():
            problem(("hosts", hname, "known_hosts"),
                    f"no known_hosts file at {kh} (ssh-keyscan -p {host.port} {host.address} >> {kh}, "
                    "then check the fingerprint)", warning=True)
    return result
