"""A new user's first steps from a wheel, away from the checkout: the installed package must carry
its example config, deploy files, playbooks and templates (nothing read from a source tree)."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("hatchling", reason="the wheel is built offline with hatchling (pip install '.[test]')")
    base = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    str(ROOT), "-w", str(base / "dist")], check=True, capture_output=True, timeout=300)
    wheel = next((base / "dist").glob("specops-*.whl"))
    # the venv sees this interpreter's packages for the dependencies (no index at test time);
    # specops itself comes from the wheel, ahead of any editable checkout on the path.
    # system_site_packages alone only reaches the *base* interpreter's packages: when the tests run
    # inside a virtualenv, the dependencies live in that venv, so a .pth names its site-packages too.
    venv.create(base / "venv", system_site_packages=True, with_pip=False)
    py = base / "venv" / "bin" / "python"
    inner = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                           capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    # appended after the inner site-packages, so the wheel's copy still wins over an editable install
    (Path(inner) / "zz_outer_env.pth").write_text(
        "".join(f"{d}\n" for d in [*site.getsitepackages(), site.getusersitepackages()] if os.path.isdir(d)))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True, timeout=300)
    return base / "venv" / "bin"


def test_init_check_and_dry_run_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECOPS_")}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "xdg"))

    def specops(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(installed / "specops"), *args], capture_output=True, text=True, cwd=empty,
                              env=env, timeout=120)

    where = subprocess.run([str(installed / "python"), "-c", "import bot; print(bot.__file__)"],
                           capture_output=True, text=True, cwd=empty, env=env, check=True).stdout
    assert str(installed.parent) in where, where  # the wheel's copy, not the checkout
    assert specops("init").returncode == 0
    assert (tmp_path / "xdg" / "specops" / "config.yaml").is_file()
    check = specops("config", "check")
    assert check.returncode == 0, check.stderr
    plan = specops("deploy", "dflash-0.20.1", "--host", "a6000", "--dry-run")
    assert plan.returncode == 0 and "nothing ran" in plan.stdout, plan.stderr
    files = specops("init", "--deploy-files", str(tmp_path / "deploy"))
    assert files.returncode == 0, files.stderr
    for name in ("slack-manifest.socket-mode.yaml", "specops.service", "Containerfile", "prometheus-rules.yml"):
        assert (tmp_path / "deploy" / name).stat().st_size > 0
    assert list(empty.iterdir()) == []  # nothing written where the user stood
