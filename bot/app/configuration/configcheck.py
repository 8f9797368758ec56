"""`specops config check`: every problem of the file in one run, as promtool and amtool report them — the
schema's (pydantic gives all of one validation, with lines and "did you mean") and what the schema cannot
see, checked on the file's own data so that they run even when the schema step found problems: names that
must refer to something (watch hosts, profiles, the default host, playbooks, the Proxmox host) are problems;
files not there yet (SSH keys, known_hosts) are warnings, so a config just written by `specops init` passes, and
so is a profile a host's overrides do not fit (it may never be deployed there).
`serve` runs it at start."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.config import (
    Config,
    HostConfig,
    WatchSettings,
    find_config,
    key_lines,
    line_of,
    load_config,
    load_yaml,
    read_config_text,
    schema_problems,
    suggest,
)
from bot.engine.playbook import PlaybookError, load_playbook
from bot.errors import ConfigError
from bot.paths import playbooks_dir
from bot.redact import redactor_for


@dataclass
class CheckResult:
    path: Path | None
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # files not there yet: a new config still passes
    config: Config | None = None  # when the schema holds (names may still be wrong: see problems)

    @property
    def ok(self) -> bool:
        return not self.problems


Say = Callable[..., None]  # say(loc, message, warning=False)


def _playbook_name(profile_playbook: str, method: str) -> str:
    # "deploy" picks the playbook by method (bot.app.operations.ops)
    if profile_playbook != "deploy":
        return profile_playbook
    return "deploy-dflash" if method == "dflash" else "deploy-mtp"


def _map(data: Any, *keys: str) -> dict[str, Any]:
    """The mapping at `keys` in the file's data, or {} where the file holds something else (the schema says so)."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def check(path: str | os.PathLike[str] | None = None) -> CheckResult:
    found = find_config(path)
    if found is None:
        try:
            load_config(path)  # says where it looked and how to make one
        except ConfigError as exc:
            return CheckResult(None, [str(exc)])
    assert found is not None
    try:
        text = read_config_text(found)
    except ConfigError as exc:
        return CheckResult(found, [str(exc)])
    data = _parsed(found, text)
    if isinstance(data, str):
        return CheckResult(found, [data])
    marks = key_lines(text)
    cfg, schema = schema_problems(data, marks)
    said: list[tuple[int, bool, str]] = [(line or 0, False, message) for line, message in schema]

    def say(loc: tuple[str, ...], message: str, warning: bool = False) -> None:
        said.append((line_of(marks, loc) or 0, warning, f"{'.'.join(loc)}: {message}"))

    for semantic in (_watch_names, _prometheus_profiles, _slack_names, _playbooks, _hosts, _state_password):
        semantic(data, say)
    if cfg is not None:
        _overrides_fit(cfg, say)
    result = CheckResult(found, config=cfg)
    # a token pasted where a host or group name goes is said nowhere (serve runs this check: its lines reach the
    # journal)
    redact = redactor_for(cfg).text
    for line, warning, message in sorted(said, key=lambda s: s[0]):  # in the file's order, as an editor reads it
        (result.warnings if warning else result.problems).append(redact(f"{found}:{line}: {message}" if line
                                                                        else f"{found}: {message}"))
    return result


def _parsed(found: Path, text: str) -> dict[str, Any] | str:
    """The file's data, or the one problem that stops every check (YAML that does not parse, not a mapping)."""
    import yaml

    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}: not valid YAML (column {mark.column + 1})" if mark else ": not valid YAML"
        return f"{found}{where}: {getattr(exc, 'problem', exc)}"
    if not isinstance(data, dict):
        return f"{found}: the file must hold a mapping with `hosts` and `profiles`"
    return data


def _state_password(data: dict[str, Any], say: Say) -> None:
    """A database state whose password is to come from a variable that is not set here: every command that reads
    the store would fail (a warning: the service's environment may set it)."""
    settings = _map(data, "settings")
    state, env = settings.get("state"), settings.get("state_password_env")
    if not isinstance(state, str) or not isinstance(env, str) or "://" not in state or state.startswith("sqlite"):
        return
    if "@" in state and ":" in state.split("://", 1)[1].split("@", 1)[0]:
        return  # the URL carries its own password
    if not os.environ.get(env):
        say(("settings", "state_password_env"), f"{env} is not set here: the store's commands (audit, incidents, "
            "replicas, schedule, deploy) will fail to connect unless the service's environment sets it",
            warning=True)


def _watch_names(data: dict[str, Any], say: Say) -> None:
    hosts, profiles = _map(data, "hosts"), _map(data, "profiles")
    known = [*hosts, *_map(data, "prometheus", "instances")]  # what `Config.watched()` takes from watch.hosts
    watch = _map(data, "watch")
    listed = watch.get("hosts")
    for i, name in enumerate(listed if isinstance(listed, list) else []):
        if isinstance(name, str) and name not in known:
            say(("watch", "hosts", str(i)), f"unknown host {name!r}{suggest(name, known)}")
    given = "rollback_profile" in watch  # the default names a profile you may not have
    name = watch.get("rollback_profile", WatchSettings.model_fields["rollback_profile"].default)
    if isinstance(name, str) and name not in profiles:
        say(("watch", "rollback_profile") if given else ("watch",),
            f"unknown profile {name!r}{suggest(name, profiles)}" if given else
            f"rollback_profile is not set and its default {name!r} is not a profile: incidents' Roll back "
            "button will fail", warning=not given)


def _prometheus_profiles(data: dict[str, Any], say: Say) -> None:
    profiles = _map(data, "profiles")
    for name, inst in _map(data, "prometheus", "instances").items():
        profile = inst.get("profile") if isinstance(inst, dict) else None
        if isinstance(profile, str) and profile not in profiles:
            say(("prometheus", "instances", name, "profile"),
                f"unknown profile {profile!r}{suggest(profile, profiles)}")


def _slack_names(data: dict[str, Any], say: Say) -> None:
    hosts = _map(data, "hosts")
    name = _map(data, "slack").get("default_host")
    if isinstance(name, str) and name and name not in hosts:
        say(("slack", "default_host"), f"unknown host {name!r}{suggest(name, hosts)}")


def _playbooks(data: dict[str, Any], say: Say) -> None:
    shipped = sorted(p.stem for p in playbooks_dir().glob("*.yaml"))
    for pname, prof in _map(data, "profiles").items():
        playbook, method = (prof.get("playbook", "deploy"), prof.get("method", "none")) if isinstance(prof, dict) \
            else (None, None)
        if not isinstance(playbook, str) or not isinstance(method, str):
            continue  # the schema said what is wrong with it
        book = _playbook_name(playbook, method)
        if not Path(book).suffix and book not in shipped:
            say(("profiles", pname, "playbook"), f"no playbook {book!r}{suggest(book, shipped)}; shipped: "
                f"{', '.join(shipped)}")
            continue
        try:
            load_playbook(book)
        except PlaybookError as exc:
            say(("profiles", pname, "playbook"), str(exc).splitlines()[0])


def _hosts(data: dict[str, Any], say: Say) -> None:
    hosts = _map(data, "hosts")
    for hname, raw in hosts.items():
        ref = _map(raw, "proxmox").get("host")
        if isinstance(ref, str) and ref not in hosts:
            say(("hosts", hname, "proxmox", "host"), f"unknown host {ref!r}{suggest(ref, hosts)} (the Proxmox host "
                "must be in the inventory too)")
        _host_files(hname, raw, say)


def _overrides_fit(cfg: Config, say: Say) -> None:
    """A host's overrides that each fit their field but not some profile on that host (a method that needs a
    drafter the profile has none of): a warning, since that profile may never go there; a deploy of it there is
    refused with the same words (`Config.profile_for`)."""
    for hname, host in cfg.hosts.items():
        for pname in cfg.profiles if host.overrides else ():
            for loc, message in cfg.profile_problems(pname, hname):
                say(loc, f"profile {pname!r} on host {hname!r}: {message}", warning=True)


def _host_files(hname: str, raw: Any, say: Say) -> None:
    """The key and known_hosts files, of a host whose entry holds (else the schema said what is wrong)."""
    try:
        host = HostConfig.model_validate(raw)
    except ValueError:
        return
    if host.key is not None and not host.key.expanduser().is_file():
        say(("hosts", hname, "key"), f"no key file at {host.key.expanduser()}", warning=True)
    kh = host.known_hosts.expanduser()
    if not kh.is_file():
        say(("hosts", hname, "known_hosts"), f"no known_hosts file at {kh} (ssh-keyscan -p {host.port} "
            f"{host.address} >> {kh}, then check the fingerprint)", warning=True)
