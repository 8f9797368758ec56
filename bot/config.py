"""Configuration: one YAML file with the inventory (hosts) and the deployment profiles.

Found as `--config FILE`, then `$SPECOPS_CONFIG`, then `$XDG_CONFIG_HOME/specops/config.yaml`
(default `~/.config/specops/`), then `/etc/specops/specops.yaml` (the name the systemd unit and the
Containerfile use), then the deprecated `/etc/specops/config.yaml` (`config_candidates`). Every error
of a bad file is reported with its place (`hosts.a6000.port`, line 7) and, for a misspelt key, the
key it was probably meant to be; never as a traceback.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import CoreSchema, InitErrorDetails, core_schema

from bot.errors import ConfigError

log = logging.getLogger("specops.config")

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JumpHost(_Strict):
    address: str
    port: int = Field(22, ge=1, le=65535)
    user: str
    key: Path | None = None


class ProxmoxRef(_Strict):
    """The Proxmox host under an LXC container: an inventory host (SSH) and the container's id."""

    host: str
    ctid: int = Field(ge=100, le=999_999_999)


class VllmInstall(_Strict):
    bin: str = "vllm"  # path of the `vllm` executable on the host (its venv)
    version: str | None = None  # what we expect; the playbook reads the real one


Method = Literal["dflash", "mtp", "eagle", "eagle3", "ngram", "draft_model", "none"]


class Profile(_Strict):
    playbook: str = "deploy"
    device: Literal["cuda", "cpu"] = "cuda"  # cpu: no GPU pre-flight (vLLM's CPU build)
    model: str
    served_model_name: str | None = None
    method: Method = "none"
    drafter: str | None = None
    num_speculative_tokens: int | None = Field(None, ge=1, le=64)
    speculative_extra: dict[str, Any] = Field(default_factory=dict)  # e.g. prompt_lookup_max for ngram
    tensor_parallel_size: int = Field(1, ge=1, le=64)
    port: int = Field(8000, ge=1024, le=65535)
    vllm: VllmInstall = Field(default_factory=VllmInstall)
    extra_args: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    drafter_config: dict[str, Any] | None = None  # overrides what is read from the drafter's config.json
    baseline_tps: float | None = Field(None, gt=0)
    # the setting baseline_tps was measured with ("none": no speculation, or a method): a profile of that same
    # method is never judged "not paying off" against its own number
    baseline_method: Method | None = None
    startup_timeout: float = Field(900.0, gt=0)
    min_free_gpu_mib: int = Field(1024, ge=0)
    probe_max_tokens: int = Field(64, ge=1, le=4096)
    probe_prompt: str | None = None  # e.g. a repetitive prompt for ngram drafting

    @model_validator(mode="after")
    def _drafter_rules(self) -> Profile:
        needs_drafter = {"dflash", "eagle", "eagle3", "draft_model"}
        if self.method in needs_drafter and not self.drafter:
            raise ValueError(f"method {self.method} needs a drafter")
        if self.method != "none" and self.num_speculative_tokens is None:
            raise ValueError(f"method {self.method} needs num_speculative_tokens")
        for key in self.extra_args:
            if not re.match(r"^[a-z0-9][a-z0-9-]*$", key):
                raise ValueError(f"extra_args key {key!r} must look like a vLLM option name (dashes)")
            if key in ("host", "port", "config", "tensor-parallel-size", "served-model-name", "speculative-config"):
                raise ValueError(f"extra_args cannot set {key!r}: specops sets it (vLLM stays on the host's loopback)")
        for key in self.env:
            if not re.match(r"^[A-Z_][A-Z0-9_]*$", key):
                raise ValueError(f"env name {key!r} is not a valid environment variable name")
        return self

    def speculative_config(self) -> dict[str, Any] | None:
        if self.method == "none":
            return None
        cfg: dict[str, Any] = {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens}
        if self.drafter:
            cfg["model"] = self.drafter
        cfg.update(self.speculative_extra)
        return cfg


@functools.cache
def _overrides_model() -> type[BaseModel]:
    """Every Profile field, optional and checked as the profile checks it (its type and bounds; the profile's
    own rules across fields wait for `Config.profile_for`)."""
    fields: dict[str, Any] = {
        name: (Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation, None)
        for name, info in Profile.model_fields.items()}
    return create_model("ProfileOverrides", __config__=ConfigDict(extra="forbid"), **fields)


class _ProfileOverrides:
    """`hosts.H.overrides` as written: the profile fields this host serves differently (Ansible's host_vars), each
    checked against its field (`hosts.H.overrides.port`, on its line) and kept as a plain mapping of the keys
    given. A key that is no profile field is refused (`schema_problems` lists the fields). How the values fit one
    profile is checked where they meet it: `Config.profile_for`."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(
            lambda fields: fields.model_dump(exclude_unset=True), handler.generate_schema(_overrides_model()),
            serialization=core_schema.plain_serializer_function_ser_schema(lambda v: v, return_schema=handler(source)))


class HostConfig(_Strict):
    address: str
    port: int = Field(22, ge=1, le=65535)
    user: str
    key: Path | None = None
    known_hosts: Path = Field(default_factory=lambda: config_home() / "known_hosts")
    jump: JumpHost | None = None
    workdir: str = "/srv/specops"  # remote directory for config files, pid files and logs
    connect_timeout: float = Field(10.0, gt=0)
    keepalive: float = Field(15.0, ge=0)
    vllm_env: dict[str, str] = Field(default_factory=dict)  # host-wide env for the server
    proxmox: ProxmoxRef | None = None  # `specops doctor` also checks the Proxmox side
    # profile fields this host serves differently, e.g. {port: 18001}; `vllm` is replaced as a whole
    overrides: Annotated[dict[str, Any], _ProfileOverrides] = Field(default_factory=dict)

    @field_validator("vllm_env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if not re.match(r"^[A-Z_][A-Z0-9_]*$", key):
                raise ValueError(f"env name {key!r} is not a valid environment variable name")
        return v

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("must be an absolute path on the host")
        return v.rstrip("/") or "/"


class Access(_Strict):
    """Who may do something: Slack user ids (U…) and user group ids (S…), never names."""

    users: list[str] = Field(default_factory=list)
    usergroups: list[str] = Field(default_factory=list)

    @field_validator("users", "usergroups")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        for item in v:
            if not re.match(r"^[A-Z0-9]{2,32}$", item):
                raise ValueError(f"{item!r} is not a Slack id (U… for users, S… for user groups)")
        return v


class SlackSettings(_Strict):
    team_id: str | None = None  # requests from any other workspace are refused
    default_host: str | None = None  # for `/specops diagnose` without a host
    channel: str | None = None  # where scheduled reports go
    deployers: Access = Field(default_factory=Access)  # may ask for deploy and stop
    approvers: Access = Field(default_factory=Access)  # may confirm someone else's plan
    plan_ttl: float = Field(600.0, gt=0)
    workers: int = Field(4, ge=1, le=32)  # jobs run here, never on bolt's listener threads
    max_queue: int = Field(32, ge=1)
    progress_interval: float = Field(2.0, ge=0.2)  # chat.update is Tier 3 (~50/min per workspace)


class AlertRules(_Strict):
    down_after: int = Field(3, ge=1)  # /health failed this many watches in a row
    low_acceptance_samples: int = Field(3, ge=1)  # position 0 below its floor this many samples in a row
    # per method: the floor of the share of drafts whose first token is accepted, 0–1 (default 0.3). The one
    # acceptance judgment of the watch, every diagnosis, the shipped alert rules and the dashboard (specops exports
    # it on /metrics as specops_acceptance_floor); it does not depend on k, so k = 1 and k = 15 share it
    first_position_floor: dict[str, Annotated[float, Field(gt=0, lt=1)]] = Field(default_factory=dict)
    # percent; None: the triage's own limit (bot.core.triage.knowledge.KV_SATURATED), which a diagnosis uses too
    kv_saturated: float | None = Field(None, gt=0, le=100)
    resolve_after: int = Field(3, ge=1)  # healthy samples in a row close an incident

    @model_validator(mode="before")
    @classmethod
    def _old_floor(cls, data: Any) -> Any:
        if isinstance(data, dict) and "acceptance_floor" in data:
            raise ValueError("acceptance_floor (a mean acceptance length, which depends on k) is gone: give "
                             "first_position_floor, the share of drafts whose first token is accepted (0–1, "
                             "default 0.3), by method")
        return data


class WatchSettings(_Strict):
    hosts: list[str] | None = None  # default: every host with a deployment
    interval: float = Field(60.0, ge=0)  # seconds between watches; 0 turns watching off
    timezone: str = "UTC"  # before report_cron: its validator reads it
    report_cron: str | None = "0 8 * * *"  # the daily health report (crontab: minute hour day month weekday)
    report_channel: str | None = None  # default: slack.channel
    oncall_channel: str | None = None  # where incidents open; default: slack.channel
    oncall_usergroup: str | None = None  # S… mentioned in each new incident
    rules: AlertRules = Field(default_factory=AlertRules)
    alertmanager_token_env: str = "SPECOPS_ALERTMANAGER_TOKEN"  # the bearer token's environment variable
    rollback_profile: str = "mtp"  # what "Roll back" deploys (authorized and confirmed like any deploy)
    keep_samples_days: float = Field(8.0, ge=1)  # watch samples older than this are pruned (hourly)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        import zoneinfo

        try:
            zoneinfo.ZoneInfo(v)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            zones = zoneinfo.available_timezones()
            raise ValueError(f"unknown time zone {v!r}{suggest(v, zones)}; an IANA name like UTC or Europe/Berlin")\
                from None
        return v

    @field_validator("report_cron")
    @classmethod
    def _cron(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v:
            # APScheduler's own parser: what it accepts here is exactly what the scheduler will run
            from apscheduler.triggers.cron import CronTrigger

            try:
                CronTrigger.from_crontab(v, timezone=info.data.get("timezone") or "UTC")
            except ValueError as exc:
                raise ValueError(f"{v!r} is not a crontab line (minute hour day month weekday): {exc}") from None
        return v


class StateURL(str):
    """`settings.state` as a SQLAlchemy URL (`postgresql+psycopg://specops@db:5432/specops`): kept as written,
    since a Path would fold its `//`. Checked when the config is read: a backend specops cannot run on, or
    one whose driver is not installed, is a config error, never a file name."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(cls, core_schema.str_schema())

    def expanduser(self) -> StateURL:
        # a URL names no home directory: code that expands the state's path may hold a URL as well
        return self


STATE_BACKENDS = ("sqlite", "postgresql")  # what the store's SQL and migrations are written for


def is_state_url(value: object) -> bool:
    """A `settings.state` that names a database server (or a SQLite URL), not a file: `scheme://…`."""
    return isinstance(value, str) and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", value) is not None


def state_url(value: str) -> StateURL:
    """VALUE checked as the store's SQLAlchemy URL: a backend the store supports, its driver importable."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        url = make_url(value)
    except ArgumentError:
        raise ValueError("not a SQLAlchemy URL (driver://user@host:port/database)") from None
    shown = url.render_as_string(hide_password=True)
    if url.get_backend_name() not in STATE_BACKENDS:
        raise ValueError(f"{shown}: the store runs on SQLite (a path) or PostgreSQL (postgresql+psycopg://…), "
                         f"not {url.get_backend_name()}")
    if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
        raise ValueError(f"{shown}: a SQLite state is a file (sqlite:////var/lib/specops/specops.db, or just the path)")
    try:
        url.get_dialect().import_dbapi()
    except NoSuchModuleError:
        raise ValueError(f"{shown}: SQLAlchemy knows no driver {url.drivername!r} "
                         "(PostgreSQL's is postgresql+psycopg://)") from None
    except ImportError as exc:
        raise ValueError(f"{shown}: the driver of {url.drivername!r} is not installed ({exc.name or exc}); "
                         "specops ships psycopg 3: postgresql+psycopg://") from None
    return StateURL(value)


def _state(v: Any) -> Any:
    """`settings.state` as written: a URL checked and kept as a URL, anything else a path."""
    if isinstance(v, StateURL):
        return v
    if is_state_url(v):
        return state_url(v)
    if isinstance(v, str):
        if not v.strip():
            raise ValueError("empty: a path (a SQLite file) or a SQLAlchemy URL")
        return Path(v)
    return v


class Settings(_Strict):
    # a path (a SQLite file, the embedded default) or a SQLAlchemy URL (PostgreSQL, for more than one replica)
    state: Annotated[Path | StateURL, BeforeValidator(_state)] = Path("~/.local/share/specops/specops.db")
    # the environment variable that holds the password of a `state` URL written without one
    state_password_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    lock_stale_after: float = Field(6 * 3600, gt=0)  # a lock older than this may be broken with --force
    # a host lock, and the leading replica's seat, not renewed for this long is taken by another replica
    lease_seconds: float = Field(30.0, ge=3, le=3600)


def chat_names(v: Any) -> Any:
    """The keys of a mapping whose names are typed in chat (hosts, profiles, instances), checked."""
    for name in v if isinstance(v, dict) else ():
        if not re.match(NAME_RE, name):
            raise ValueError(f"name {name!r} must be letters, digits, '.', '_' or '-' (it is typed in chat)")
    return v


class PromInstance(_Strict):
    """A vLLM server specops knows only through Prometheus: watched and reported like a host."""

    selector: str  # label matchers of its series, e.g. 'instance="10.0.0.7:8000"'
    profile: str | None = None  # what it runs (method, version, drafter): the alert floors and triage use it


class PrometheusSettings(_Strict):
    """A Prometheus that already scrapes the vLLM servers: a source of evidence without SSH."""

    url: str = Field(pattern=r"^https?://")
    selector: str = ""  # label matchers for every query, e.g. 'job="vllm"' (without braces)
    headers: dict[str, str] = Field(default_factory=dict)  # sent with every query (values are redacted)
    # credentials come from the environment, never from the file
    bearer_token_env: str | None = "SPECOPS_PROMETHEUS_TOKEN"
    basic_auth_env: str | None = None  # NAME: the variable holds "user:password"
    timeout: float = Field(10.0, gt=0)
    instances: dict[str, PromInstance] = Field(default_factory=dict)  # watched by name, like hosts

    @field_validator("instances", mode="before")
    @classmethod
    def _instance_names(cls, v: Any) -> Any:
        return chat_names(v)

    @field_validator("selector")
    @classmethod
    def _no_braces(cls, v: str) -> str:
        v = v.strip()
        if v.startswith("{") and v.endswith("}"):
            v = v[1:-1].strip()
        return v


def _value_error(loc: tuple[str | int, ...], value: Any, message: str) -> InitErrorDetails:
    """One problem at `loc` below the field being validated (raised together in a ValidationError)."""
    return InitErrorDetails(type="value_error", loc=loc, input=value, ctx={"error": ValueError(message)})


class Config(_Strict):
    hosts: dict[str, HostConfig]
    profiles: dict[str, Profile]
    # after hosts: its validator reads them. Named sets of hosts, as Ansible's inventory groups: `rollout P a6000s`
    groups: dict[str, list[str]] = Field(default_factory=dict)
    settings: Settings = Field(default_factory=Settings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    watch: WatchSettings = Field(default_factory=WatchSettings)
    prometheus: PrometheusSettings | None = None

    @field_validator("hosts", "profiles", "groups", mode="before")
    @classmethod
    def _names(cls, v: Any) -> Any:
        return chat_names(v)

    @field_validator("groups")
    @classmethod
    def _members(cls, v: dict[str, list[str]], info: ValidationInfo) -> dict[str, list[str]]:
        """Each group lists hosts of the inventory, each once, and is not named as a host is (a name typed in
        chat is one or the other). Every problem at once, each at its group (`groups.a6000s`), even beside a
        host's own problems."""
        # the hosts as validated; when one of them failed, their names as written (`schema_problems` passes them)
        validated = info.data.get("hosts")
        hosts = list(validated) if validated is not None else (info.context or {}).get("host_names")
        known = ", ".join(sorted(hosts)) if hosts else "none"
        errors: list[InitErrorDetails] = []
        for name, members in v.items():
            if hosts is not None and name in hosts:
                errors.append(_value_error((name,), members, "a group cannot have the name of a host (which one "
                                           "would `rollout PROFILE " + name + "` mean?)"))
            if not members:
                errors.append(_value_error((name,), members, "no hosts: a group lists at least one"))
            for member in dict.fromkeys(m for m in members if members.count(m) > 1):
                times = members.count(member)
                errors.append(_value_error((name,), members, f"{member!r} is listed "
                                           f"{'twice' if times == 2 else f'{times} times'}"))
            for member in dict.fromkeys(members):
                if hosts is not None and member not in hosts:
                    errors.append(_value_error((name,), members, f"unknown host {member!r}{suggest(member, hosts)}; "
                                               f"known: {known}"))
        if errors:
            raise ValidationError.from_exception_data("groups", errors)
        return v

    def watched(self) -> list[str]:
        """What the watch samples (a watch and a daily report each): `watch.hosts` when the config lists them
        (the names it knows: `config check` reports the others), else every host that can hold a deployment
        and every instance known only through Prometheus. A host the inventory names only as another host's
        Proxmox host (`proxmox.host`) or jump host (`jump`) carries deployments, it does not serve one: watched,
        its /health never answers and its morning report says DOWN. List it under `watch.hosts` to watch it."""
        extra = [n for n in (self.prometheus.instances if self.prometheus else {}) if n not in self.hosts]
        known = [*self.hosts, *extra]
        if self.watch.hosts is not None:
            return list(dict.fromkeys(n for n in self.watch.hosts if n in known))
        carriers = self.carriers()
        return [n for n in known if n not in carriers]

    def carriers(self) -> dict[str, str]:
        """The inventory hosts that carry other hosts rather than serve: name -> what it is to which host."""
        out: dict[str, str] = {}
        for name, host in self.hosts.items():
            if host.proxmox is not None and host.proxmox.host in self.hosts and host.proxmox.host != name:
                out.setdefault(host.proxmox.host, f"the Proxmox host of {name}")
            if host.jump is not None:
                for other, h in self.hosts.items():
                    if other != name and (h.address, h.port) == (host.jump.address, host.jump.port):
                        out.setdefault(other, f"the jump host of {name}")
        return out

    def prom_instance(self, name: str) -> PromInstance | None:
        """`name` when it is known only through Prometheus (no SSH entry)."""
        if name in self.hosts or self.prometheus is None:
            return None
        return self.prometheus.instances.get(name)

    def host(self, name: str) -> HostConfig:
        if name not in self.hosts:
            raise ConfigError(f"unknown host {name!r}; known: {', '.join(sorted(self.hosts)) or 'none'}")
        return self.hosts[name]

    def profile(self, name: str) -> Profile:
        if name not in self.profiles:
            raise ConfigError(f"unknown profile {name!r}; known: {', '.join(sorted(self.profiles)) or 'none'}")
        return self.profiles[name]

    def select_hosts(self, spec: str) -> list[str]:
        """The hosts `spec` names: host and group names, comma-separated (`a6000s`, `a6000,a6000-b`,
        `a6000s,gpu-x`), in the order given, each host once. Raises ConfigError for a name that is neither, or
        for no name at all."""
        names = [n.strip() for n in spec.split(",") if n.strip()]
        known = f"hosts: {', '.join(sorted(self.hosts)) or 'none'}; groups: {', '.join(sorted(self.groups)) or 'none'}"
        if not names:
            raise ConfigError(f"no host or group named: give them comma-separated; {known}")
        out: dict[str, None] = {}
        for name in names:
            if name in self.hosts:
                out[name] = None
            elif name in self.groups:
                out.update(dict.fromkeys(self.groups[name]))
            else:
                raise ConfigError(f"unknown host or group {name!r}{suggest(name, [*self.hosts, *self.groups])}; "
                                  f"{known}")
        return list(out)

    def profile_for(self, name: str, host: str) -> Profile:
        """The profile `name` as `host` serves it: its `overrides` over the profile's fields, validated as any
        profile (a value that does not fit is a ConfigError naming `hosts.HOST.overrides.FIELD`). A host without
        overrides serves the profile itself."""
        profile, problems = self._overridden(name, host)
        if profile is None:
            raise ConfigError(f"profile {name!r} on host {host!r}: "
                              + "; ".join(f"{_place(loc)}: {said}" for loc, said in problems))
        return profile

    def served_profile(self, name: object, host: str) -> Profile | None:
        """The profile a record names (a meta file, a sample), as `host` serves it; None for a name the config
        no longer has, or one whose overrides do not fit it there (`config check` says why)."""
        key = "" if name is None else str(name)
        if key not in self.profiles:
            return None
        if host not in self.hosts:  # an instance known only through Prometheus: no overrides
            return self.profiles[key]
        return self._overridden(key, host)[0]

    def profile_problems(self, name: str, host: str) -> list[tuple[tuple[str, ...], str]]:
        """What stops profile `name` on `host` (`profile_for`'s ConfigError, as places and messages): none when
        it holds. `config check` warns of them: the profile may never be deployed there."""
        return self._overridden(name, host)[1]

    def _overridden(self, name: str, host: str) -> tuple[Profile | None, list[tuple[tuple[str, ...], str]]]:
        base = self.profile(name)
        overrides = self.host(host).overrides
        if not overrides:
            return base, []
        try:
            return Profile.model_validate({**base.model_dump(), **overrides}), []
        except ValidationError as exc:
            return None, [(("hosts", host, "overrides", *(str(x) for x in err["loc"])),
                           err["msg"].removeprefix("Value error, ")) for err in exc.errors()]


def _place(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(x) for x in loc) or "(top level)"


def _allowed_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the schema allows in the mapping at `loc` (for "did you mean")."""
    import typing

    model: Any = Config
    parts = list(loc)
    while parts:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return []
        key = str(parts.pop(0))
        field = model.model_fields.get(key)
        if field is None:
            return []
        if model is HostConfig and key == "overrides":
            model = Profile  # a host's overrides take a profile's keys
            continue
        ann = field.annotation
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if typing.get_origin(ann) is dict and len(args) == 2:
            if not parts:
                return []  # the keys of hosts/profiles are names, free to choose
            parts.pop(0)
            model = args[1]
        elif args:
            model = args[0]
        else:
            model = ann
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def closest(word: str, choices: Any) -> str | None:
    """The choice `word` was probably meant to be (difflib), or None."""
    import difflib

    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return close[0] if close else None


def suggest(word: str, choices: Any) -> str:
    """" (did you mean 'x'?)" when a close choice exists, else ""."""
    near = closest(word, choices)
    return f" (did you mean {near!r}?)" if near else ""


MAX_CONFIG_BYTES = 1 << 20  # a config is a few KB; a bigger file is refused before it is parsed
MAX_CONFIG_DEPTH = 64  # levels of nesting a config's YAML may have


def _yaml_loader() -> Any:
    """PyYAML's safe loader without aliases: `*name` lets 450 bytes expand to gigabytes (a "billion laughs"),
    and a specops config has no use for them. Refused as the composer meets the first one."""
    import yaml

    class NoAliases(yaml.SafeLoader):
        _depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed in a specops config",
                                                  mark)
            # the composer recurses per level: a file nested a thousand deep would end in a RecursionError
            if self._depth >= MAX_CONFIG_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_CONFIG_DEPTH} levels deep (a "
                                                  "specops config is a few levels deep)", mark)
            self._depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return NoAliases


def load_yaml(text: str) -> Any:
    """A config's YAML, safely: no tags, no aliases. Raises yaml.YAMLError."""
    import yaml

    return yaml.load(text, Loader=_yaml_loader())  # a SafeLoader subclass: no tags


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Each mapping key's path in a YAML text → its 1-based line (from the composer's marks)."""
    import yaml

    out: dict[tuple[str, ...], int] = {}
    try:
        root = yaml.compose(text, Loader=_yaml_loader())
    except yaml.YAMLError:
        return out

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                here = (*path, str(key.value))
                out.setdefault(here, key.start_mark.line + 1)
                walk(value, here)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                out.setdefault((*path, str(i)), item.start_mark.line + 1)
                walk(item, (*path, str(i)))

    if root is not None:
        walk(root, ())
    return out


def line_of(lines: dict[tuple[str, ...], int], loc: tuple[int | str, ...]) -> int | None:
    """The line of `loc`, or of its nearest parent that has one."""
    parts = tuple(str(x) for x in loc)
    while parts:
        if parts in lines:
            return lines[parts]
        parts = parts[:-1]
    return None


def schema_problems(data: dict[str, Any], marks: dict[tuple[str, ...], int]) -> tuple[Config | None, list[
        tuple[int | None, str]]]:
    """The config, or None and every problem of one validation (pydantic reports them all at once), each as
    (its line, `path: message (did you mean …)`)."""
    hosts = data.get("hosts")
    try:
        return Config.model_validate(data, context={"host_names": list(hosts) if isinstance(hosts, dict) else None}), []
    except ValidationError as exc:
        out: list[tuple[int | None, str]] = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            hint = suggest(str(loc[-1]), _allowed_keys(loc[:-1])) if err["type"] == "extra_forbidden" and loc else ""
            msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden" and len(loc) == 4 and loc[0] == "hosts" and loc[2] == "overrides":
                msg, hint = "not a profile field", f"{hint}; an override sets one of: {', '.join(Profile.model_fields)}"
            out.append((line_of(marks, loc), f"{_place(loc)}: {msg}{hint}"))
        return None, out


def parse_config(data: Any, source: str = "config", text: str | None = None) -> Config:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the file must hold a mapping with `hosts` and `profiles`")
    cfg, problems = schema_problems(data, key_lines(text) if text else {})
    if cfg is None:
        lines = [f"{source}: {len(problems)} problem(s):"]
        lines += [f"  {source}:{line}: {said}" if line else f"    {said}" for line, said in problems]
        raise ConfigError("\n".join(lines))
    return cfg


def config_home() -> Path:
    """`$XDG_CONFIG_HOME/specops`, by default `~/.config/specops`: the config and the known_hosts file."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path("~/.config").expanduser()) / "specops"


def system_config_dir() -> Path:
    """`/etc/specops`: the server's config, SSH key and secrets. `$SPECOPS_SYSTEM_CONFIG_DIR` moves it, for
    tests only (a test must not read or write the real /etc)."""
    return Path(os.environ.get("SPECOPS_SYSTEM_CONFIG_DIR") or "/etc/specops")


def system_config_path() -> Path:
    """The system config, under the name the systemd unit, the Containerfile and deploy/README give it."""
    return system_config_dir() / "specops.yaml"


def _deprecated_system_config() -> Path:
    return system_config_dir() / "config.yaml"  # the name discovery used to look for (issue 22, item 5)


def config_candidates() -> list[Path]:
    """Where a config is looked for when none is given, in order (the last one is deprecated)."""
    return [config_home() / "config.yaml", system_config_path(), _deprecated_system_config()]


def default_config_path() -> Path:
    """Where `specops init` writes: the first candidate."""
    return config_candidates()[0]


def find_config(path: str | os.PathLike[str] | None = None) -> Path | None:
    """The config file to use: the one given, `$SPECOPS_CONFIG`, or the first candidate that exists."""
    raw = path or os.environ.get("SPECOPS_CONFIG")
    if raw:
        return Path(raw).expanduser()
    for candidate in config_candidates():
        if candidate.is_file():
            if candidate == _deprecated_system_config():
                _warn_deprecated(candidate)
            return candidate
    return None


@functools.cache
def _warn_deprecated(path: Path) -> None:
    """Once per process: a command may look the config up several times."""
    log.warning("%s is deprecated: rename it to %s (the name the systemd unit and the Containerfile use)",
                path, system_config_path())


def no_config_note(state: Path | StateURL) -> str:
    """What a command that reads only the store says when it found no config: which store it read instead."""
    looked = ", ".join(str(c) for c in config_candidates())
    return f"no config found (looked in {looked}); using the default store at {state.expanduser()}"


def read_config_text(p: Path) -> str:
    try:
        size = p.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{p}: {size} bytes; a specops config is at most {MAX_CONFIG_BYTES} bytes")
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a text (UTF-8) file; a config is YAML") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config {p}: {exc.strerror or exc}") from None
    if "\0" in text:
        raise ConfigError(f"{p}: not a text file; a config is YAML")
    return text


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Only `settings` (the state file), for commands that read the database: a config that has
    no hosts yet, or none at all, still has a database to read."""
    import yaml

    p = find_config(path)
    if p is None:
        # not silent: an empty default store would read as "no incidents" on a server whose config is elsewhere
        settings = Settings()
        log.warning("%s", no_config_note(settings.state))
        return settings
    try:
        data = load_yaml(read_config_text(p))
    except yaml.YAMLError:
        data = None
    section = data.get("settings") if isinstance(data, dict) else None
    try:
        return Settings.model_validate(section or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"{p}: settings.{_place(first['loc'])}: {first['msg']}") from None


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    import yaml

    p = find_config(path)
    if p is None:
        where = " or ".join(str(c) for c in config_candidates())
        raise ConfigError(f"no config: none at {where}; `specops init` writes one, "
                          "or give --config FILE / set SPECOPS_CONFIG")
    text = read_config_text(p)
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{p}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    return parse_config(data, str(p), text)
