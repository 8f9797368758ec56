"""Inventory groups and per-host overrides (issue 24): `groups:` names sets of hosts, `hosts.H.overrides:` the
profile fields one host serves differently (Ansible's groups and host_vars). Loaded through `load_config`, as
the CLI loads a file; a bad file is a list of problems with their places, never a traceback."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.app.configuration.configcheck import check
from bot.config import Config, Profile, load_config
from bot.engine.hostvars import host_variables
from bot.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "deploy" / "specops.example.yaml"

CONFIG = """\
hosts:
  a6000:   {address: 127.0.0.1, user: u}
  a6000-b:
    address: 127.0.0.2
    user: u
    overrides:
      port: 18001
      vllm: {bin: /opt/vllm-b/bin/vllm}
  gpu-x:
    address: 127.0.0.3
    user: u
    overrides: {model: /data/models/x, tensor_parallel_size: 1}
groups:
  a6000s: [a6000, a6000-b]
  all-gpus:
    - gpu-x
    - a6000
profiles:
  mtp:
    model: /models/Qwen3.6-27B
    method: mtp
    num_speculative_tokens: 3
    tensor_parallel_size: 2
    vllm: {bin: /opt/vllm/bin/vllm, version: "0.26.0"}
"""


def write(tmp_path: Path, text: str, name: str = "specops.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def problems(tmp_path: Path, text: str) -> str:
    """What loading the file says, one problem a line (the ConfigError `load_config` raises)."""
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    assert "Traceback" not in str(err.value)
    return str(err.value)


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return load_config(write(tmp_path, CONFIG))


def test_groups_and_overrides_load_from_yaml_and_json(tmp_path: Path, cfg: Config) -> None:
    assert cfg.groups == {"a6000s": ["a6000", "a6000-b"], "all-gpus": ["gpu-x", "a6000"]}
    assert cfg.hosts["a6000"].overrides == {}
    assert cfg.hosts["a6000-b"].overrides == {"port": 18001, "vllm": {"bin": "/opt/vllm-b/bin/vllm"}}
    # JSON is YAML: the same loader reads a file written by a program
    as_json = write(tmp_path, json.dumps(cfg.model_dump(mode="json")), "specops.json")
    again = load_config(as_json)
    assert again.groups == cfg.groups and again.hosts["gpu-x"].overrides == cfg.hosts["gpu-x"].overrides


def test_a_config_without_groups_or_overrides_is_as_before() -> None:
    cfg = load_config(EXAMPLE)
    assert isinstance(cfg.groups, dict) and all(h.overrides == {} for h in cfg.hosts.values())
    assert cfg.profile_for("dflash", "a6000") is cfg.profile("dflash")


def test_select_hosts_takes_hosts_and_groups_in_order_once(cfg: Config) -> None:
    assert cfg.select_hosts("a6000s") == ["a6000", "a6000-b"]
    assert cfg.select_hosts("a6000-b,a6000") == ["a6000-b", "a6000"]
    assert cfg.select_hosts("a6000s,gpu-x") == ["a6000", "a6000-b", "gpu-x"]
    assert cfg.select_hosts(" all-gpus , a6000s ") == ["gpu-x", "a6000", "a6000-b"]
    assert cfg.select_hosts("a6000,a6000s,a6000") == ["a6000", "a6000-b"]


@pytest.mark.parametrize("spec", ["", " ", ",", " , "])
def test_select_hosts_refuses_an_empty_spec(cfg: Config, spec: str) -> None:
    with pytest.raises(ConfigError, match="no host or group named"):
        cfg.select_hosts(spec)


def test_select_hosts_names_what_it_does_not_know(cfg: Config) -> None:
    with pytest.raises(ConfigError) as err:
        cfg.select_hosts("a6000s,gpu-y,a6000")
    assert str(err.value) == ("unknown host or group 'gpu-y' (did you mean 'gpu-x'?); hosts: a6000, a6000-b, gpu-x; "
                              "groups: a6000s, all-gpus")
    bare = Config.model_validate({"hosts": {"h": {"address": "a", "user": "u"}}, "profiles": {}})
    with pytest.raises(ConfigError, match=r"unknown host or group 'zzz'; hosts: h; groups: none$"):
        bare.select_hosts("zzz")


def test_profile_for_applies_the_hosts_overrides(cfg: Config) -> None:
    base = cfg.profile("mtp")
    assert cfg.profile_for("mtp", "a6000") is base  # no overrides: the profile itself
    b = cfg.profile_for("mtp", "a6000-b")
    assert isinstance(b, Profile) and b.port == 18001 and b.model == base.model
    assert b.vllm.bin == "/opt/vllm-b/bin/vllm" and b.vllm.version is None  # `vllm` is replaced as a whole
    x = cfg.profile_for("mtp", "gpu-x")
    assert (x.model, x.tensor_parallel_size, x.port) == ("/data/models/x", 1, 8000)
    assert base.port == 8000 and base.tensor_parallel_size == 2  # the profile itself is untouched
    with pytest.raises(ConfigError, match="unknown profile 'mpt'"):
        cfg.profile_for("mpt", "a6000-b")
    with pytest.raises(ConfigError, match="unknown host 'nope'"):
        cfg.profile_for("mtp", "nope")


def test_profile_for_revalidates_the_merged_profile(tmp_path: Path) -> None:
    # each value fits its field, but not this profile: a method that needs a drafter the profile has none of
    cfg = load_config(write(tmp_path, CONFIG.replace("overrides: {model: /data/models/x, tensor_parallel_size: 1}",
                                                     "overrides: {method: dflash, extra_args: {port: '9'}}")))
    with pytest.raises(ConfigError) as err:
        cfg.profile_for("mtp", "gpu-x")
    text = str(err.value)
    assert text.startswith("profile 'mtp' on host 'gpu-x': hosts.gpu-x.overrides: ")
    assert "method dflash needs a drafter" in text
    # a value that bypassed the file (a program's model_copy) is checked there too, named by its place
    odd = cfg.model_copy(update={"hosts": {**cfg.hosts, "a6000": cfg.hosts["a6000"].model_copy(
        update={"overrides": {"port": 80}})}})
    with pytest.raises(ConfigError, match=r"hosts\.a6000\.overrides\.port: Input should be greater than or equal "
                                          r"to 1024"):
        odd.profile_for("mtp", "a6000")


def test_host_variables_see_the_overridden_port(cfg: Config) -> None:
    v = host_variables(cfg, "a6000-b", "mtp")
    assert v["port"] == 18001 and v["vllm_bin"] == "/opt/vllm-b/bin/vllm" and v["vllm_version_expected"] is None
    assert v["tensor_parallel_size"] == 2
    assert host_variables(cfg, "a6000", "mtp")["port"] == 8000
    assert host_variables(cfg, "gpu-x", "mtp")["model"] == "/data/models/x"


@pytest.mark.parametrize(("groups", "said"), [
    ("  a6000s: [a6000, a6000-c]\n",
     r"specops\.yaml:\d+: groups\.a6000s: unknown host 'a6000-c' \(did you mean 'a6000-b'\?\); "
     r"known: a6000, a6000-b, gpu-x"),
    ("  a6000: [a6000-b]\n", r"groups\.a6000: a group cannot have the name of a host"),
    ("  empty: []\n", r"groups\.empty: no hosts: a group lists at least one"),
    ("  twice: [a6000, gpu-x, a6000]\n", r"groups\.twice: 'a6000' is listed twice"),
    ("  'bad name!': [a6000]\n", r"groups: name 'bad name!' must be letters, digits"),
])
def test_bad_groups_are_said_with_their_place(tmp_path: Path, groups: str, said: str) -> None:
    text = re.sub(r"groups:\n(  .*\n|    .*\n)+", "groups:\n" + groups, CONFIG)
    assert re.search(said, problems(tmp_path, text)), problems(tmp_path, text)


def test_every_bad_group_is_said_at_once(tmp_path: Path) -> None:
    text = CONFIG.replace("  a6000s: [a6000, a6000-b]\n", "  a6000s: [a6000, x]\n  none: []\n")
    said = problems(tmp_path, text)
    assert "2 problem(s)" in said and "groups.a6000s: unknown host 'x'" in said and "groups.none: no hosts" in said


def test_bad_overrides_are_said_with_their_place(tmp_path: Path) -> None:
    text = CONFIG.replace("      port: 18001\n", "      port: 80\n      colour: red\n      modle: /m\n") \
        .replace("vllm: {bin: /opt/vllm-b/bin/vllm}", "vllm: {bin: /x, verison: '1'}")
    said = problems(tmp_path, text)
    lines = {m.group(1): m.group(2) for m in re.finditer(r"specops\.yaml:(\d+): (hosts\.a6000-b\.overrides\.\S+)",
                                                          said)}
    assert set(lines.values()) == {"hosts.a6000-b.overrides.port:", "hosts.a6000-b.overrides.colour:",
                                   "hosts.a6000-b.overrides.modle:", "hosts.a6000-b.overrides.vllm.verison:"}, said
    assert "overrides.port: Input should be greater than or equal to 1024" in said
    assert "overrides.modle: not a profile field (did you mean 'model'?); an override sets one of: playbook, " \
           "device, model," in said
    assert "overrides.colour: not a profile field; an override sets one of:" in said
    assert "overrides.vllm.verison: unknown key (did you mean 'version'?)" in said


def test_config_check_reports_them_from_the_command_line(tmp_path: Path) -> None:
    bad = CONFIG.replace("  a6000s: [a6000, a6000-b]\n", "  a6000s: [a6000, a6000-c]\n") \
        .replace("      port: 18001\n", "      port: 70000\n      colour: red\n")
    path = write(tmp_path, bad)
    p = subprocess.run([sys.executable, "-m", "bot", "--config", str(path), "config", "check"], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    out = p.stdout + p.stderr
    assert p.returncode == 2, out
    assert "Traceback" not in out
    assert re.search(r"specops\.yaml:\d+: groups\.a6000s: unknown host 'a6000-c'", out), out
    assert re.search(r"specops\.yaml:7: hosts\.a6000-b\.overrides\.port: Input should be less than or equal to 65535",
                     out), out
    assert re.search(r"specops\.yaml:8: hosts\.a6000-b\.overrides\.colour: not a profile field", out), out


def test_config_check_warns_of_a_profile_a_hosts_overrides_break(tmp_path: Path) -> None:
    text = CONFIG.replace("overrides: {model: /data/models/x, tensor_parallel_size: 1}", "overrides: {method: dflash}")
    result = check(write(tmp_path, text))
    assert result.ok, result.problems
    said = [w for w in result.warnings if "overrides" in w]  # beside the known_hosts files not there yet
    assert len(said) == 1 and re.search(r"specops\.yaml:12: hosts\.gpu-x\.overrides: profile 'mtp' on host 'gpu-x': "
                                        r"method dflash needs a drafter$", said[0]), said


def test_the_example_configs_commented_groups_and_overrides_hold(tmp_path: Path) -> None:
    """What deploy/specops.example.yaml documents, uncommented, loads and means what its comments say."""
    text = EXAMPLE.read_text(encoding="utf-8")
    start, end = text.index("    # overrides:"), text.index("\nprofiles:")
    block = "\n".join(re.sub(r"^(\s*)# ", r"\1", line) for line in text[start:end].splitlines())
    cfg = load_config(write(tmp_path, text[:start] + block + text[end:]))
    assert cfg.groups == {"a6000s": ["a6000", "a6000-b"]}
    assert cfg.select_hosts("a6000s") == ["a6000", "a6000-b"]
    a = cfg.profile_for("dflash", "a6000")
    assert (a.port, a.model, a.tensor_parallel_size, a.drafter) == (18001, "/data/models/Qwen3.6-27B", 1,
                                                                   "/models/Qwen3.6-27B-DFlash")
    assert cfg.profile_for("mtp", "a6000-b").port == 18001
    assert not any(cfg.profile_problems(p, h) for p in cfg.profiles for h in cfg.hosts)
