"""`specops init` never writes through a symbolic link: a dangling one would create its target outside the
config folder (issue 21, item 9)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _init(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    env.pop("SPECOPS_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "bot", "init", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=60)


def test_init_refuses_a_dangling_symlink_and_creates_nothing(tmp_path: Path) -> None:
    outside = tmp_path / "outside" / "planted.yaml"
    outside.parent.mkdir()
    link = tmp_path / "config.yaml"
    link.symlink_to(outside)
    for extra in ((), ("--force",)):
        done = _init("--path", str(link), *extra, home=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "symbolic link" in done.stderr and "Traceback" not in done.stderr
        assert not outside.exists()


def test_init_deploy_files_refuse_a_symlinked_file(tmp_path: Path) -> None:
    folder = tmp_path / "deploy"
    folder.mkdir()
    outside = tmp_path / "elsewhere.service"
    (folder / "specops.service").symlink_to(outside)
    done = _init("--deploy-files", str(folder), "--force", home=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "symbolic link" in done.stderr and not outside.exists()


def test_init_still_writes_a_plain_path(tmp_path: Path) -> None:
    target = tmp_path / "conf" / "config.yaml"
    done = _init("--path", str(target), home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert target.is_file() and not target.is_symlink() and (target.stat().st_mode & 0o777) == 0o600
