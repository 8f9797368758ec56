"""Where the system config lives (issue 22, item 5): the unit, the Containerfile and deploy/README name
`/etc/specops/specops.yaml`, and discovery finds that file; the old name `/etc/specops/config.yaml` is
still read, with a one-line deprecation warning; a command that reads the store without any config says
which store it read instead of silently reading an empty default one.

Through the CLI, with the system config folder moved into the test's tmp (SPECOPS_SYSTEM_CONFIG_DIR,
for tests only): nothing is written to the real /etc."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A fake machine: an empty HOME and XDG config folder, and an /etc/specops of its own."""
    for d in ("home", "xdg", "etc/specops"):
        (tmp_path / d).mkdir(parents=True)
    return tmp_path


def specops(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_")}
    env.update(HOME=str(root / "home"), XDG_CONFIG_HOME=str(root / "xdg"),
               SPECOPS_SYSTEM_CONFIG_DIR=str(root / "etc" / "specops"))
    return subprocess.run([sys.executable, "-m", "bot", *args], capture_output=True, text=True, cwd=root / "home",
                          env=env, timeout=120)


def _system_config(root: Path, name: str) -> Path:
    """The shipped example, with its store in the fake machine (as the unit's comment says to do)."""
    data = yaml.safe_load((ROOT / "deploy" / "specops.example.yaml").read_text(encoding="utf-8"))
    data["settings"]["state"] = str(root / "var" / "specops.db")
    path = root / "etc" / "specops" / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_the_shipped_system_config_name_is_found(root: Path) -> None:
    path = _system_config(root, "specops.yaml")
    check = specops(root, "config", "check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.startswith(f"{path}: ok"), check.stdout
    assert "deprecated" not in check.stderr
    where = specops(root, "config", "path")
    assert where.stdout.strip() == str(path), where.stdout + where.stderr
    # the store the config names is the one read, and no other
    listed = specops(root, "incidents")
    assert listed.returncode == 0, listed.stderr
    assert "no config found" not in listed.stderr
    assert (root / "var" / "specops.db").is_file()
    assert not (root / "home" / ".local" / "share" / "specops" / "specops.db").exists()


def test_the_shipped_files_name_the_file_discovery_finds() -> None:
    """The systemd unit, the Containerfile and deploy/README all say the same path as discovery does."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_")}
    found = subprocess.run([sys.executable, "-c", "from bot.config import config_candidates as c; print(c()[1])"],
                           capture_output=True, text=True, cwd=ROOT, env=env, timeout=60, check=True).stdout.strip()
    assert found == "/etc/specops/specops.yaml"
    for name in ("specops.service", "Containerfile", "README.md"):
        text = (ROOT / "deploy" / name).read_text(encoding="utf-8")
        # the README may name the old one only as that
        old = re.sub(r"old name\s+`/etc/specops/config\.yaml`", "", text)
        assert found in text and "/etc/specops/config.yaml" not in old, name


def test_the_old_name_is_still_read_with_one_deprecation_warning(root: Path) -> None:
    old = _system_config(root, "config.yaml")
    check = specops(root, "config", "check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.startswith(f"{old}: ok"), check.stdout
    warned = [line for line in check.stderr.splitlines() if "deprecated" in line]
    assert len(warned) == 1, check.stderr
    assert str(old) in warned[0] and str(root / "etc" / "specops" / "specops.yaml") in warned[0]
    # both there: the new name wins, and nothing is said about the old one
    new = _system_config(root, "specops.yaml")
    check = specops(root, "config", "check")
    assert check.stdout.startswith(f"{new}: ok") and "deprecated" not in check.stderr, check.stdout + check.stderr


@pytest.mark.parametrize("command", [("incidents",), ("audit",)])
def test_no_config_says_which_store_it_reads(root: Path, command: tuple[str, ...]) -> None:
    done = specops(root, *command)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "no config found" in line]
    assert len(notes) == 1, done.stderr
    note = notes[0]
    for looked in (root / "xdg" / "specops" / "config.yaml", root / "etc" / "specops" / "specops.yaml"):
        assert str(looked) in note, note
    assert f"using the default store at {root / 'home' / '.local' / 'share' / 'specops' / 'specops.db'}" in note
    assert "Traceback" not in done.stderr
    quiet = specops(root, "-q", *command)  # -q: errors only
    assert "no config found" not in quiet.stderr, quiet.stderr
