"""A config is bounded input: YAML aliases (a "billion laughs" of 450 bytes) and oversized files are refused
before they expand (issue 21, item 6)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.config import MAX_CONFIG_BYTES, load_config, load_settings
from bot.errors import ConfigError

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")

ROOT = Path(__file__).resolve().parents[1]
BOMB = "a: &a [" + ",".join(['"lol"'] * 9) + "]\n" + "".join(
    f"{n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True))


def test_an_alias_bomb_is_refused_fast_and_small(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    assert len(BOMB) < 450
    started = time.monotonic()
    with pytest.raises(ConfigError, match="aliases"):
        load_config(path)
    assert time.monotonic() - started < 1.0
    # `config check` (what `serve` runs at start) in its own process: refused, < 1 s, < 100 MB resident. The peak
    # is the process's own VmHWM: getrusage's ru_maxrss keeps the forking parent's (pytest's) peak across exec
    probe = ("import runpy, sys; sys.argv = ['specops', 'config', 'check', '--config', sys.argv[1]]\n"
             "try:\n    runpy.run_module('bot', run_name='__main__')\nexcept SystemExit as e:\n    code = e.code\n"
             "hwm = next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
             "print(code, hwm, file=sys.stderr)")
    p = subprocess.run([sys.executable, "-c", probe, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=30)
    code, hwm_kib = p.stderr.strip().splitlines()[-1].split()
    assert code == "2" and "aliases" in p.stderr and int(hwm_kib) < 100 * 1024, p.stderr


def test_an_oversized_config_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    with pytest.raises(ConfigError, match="at most"):
        load_config(path)
    with pytest.raises(ConfigError, match="at most"):
        load_settings(path)


@pytest.mark.parametrize("text", ["hosts: " + "[" * 1000 + "]" * 1000 + "\n",
                                  "hosts:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 1000))],
                         ids=["flow", "block"])
def test_yaml_nested_a_thousand_deep_is_a_clear_refusal_not_a_crash(tmp_path: Path, text: str) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="nested more than"):
        load_config(path)
    p = subprocess.run([sys.executable, "-m", "bot", "config", "check", "--config", str(path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "nested more than" in p.stdout + p.stderr and "internal error" not in p.stderr
