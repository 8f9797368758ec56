"""`specops history` as a user runs it (a subprocess) against a store holding a few watches: `--chart PATH` like
every other command that draws, `--out` kept as a deprecated alias, and a chart even from one watch."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.redact import Redactor
from bot.store.facade import Store

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    store = Store(tmp_path / "state.db", Redactor())
    now = time.time()
    for i in range(3):  # three watches a minute apart: what a fresh scheduler has after a few minutes
        store.samples.add("a6000", True, {"profile": "mtp", "mean": 2.5 + i / 10, "gen_tps": 70.0 + i},
                          at=now - 60 * (3 - i))
    store.samples.add("h100", True, {"profile": "mtp", "mean": 2.9, "gen_tps": 90.0}, at=now - 30)  # one watch
    store.close()
    path = tmp_path / "c.yaml"
    path.write_text(f"settings:\n  state: {tmp_path / 'state.db'}\n")
    return path


def history(cfg: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot", "--config", str(cfg), "history", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def test_history_takes_chart_like_the_other_commands(cfg: Path, tmp_path: Path) -> None:
    out = tmp_path / "charts" / "a6000.png"
    p = history(cfg, "a6000", "--hours", "1", "--chart", str(out))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes()[:8] == PNG
    assert f"chart written to {out}" in p.stdout
    assert "deprecated" not in p.stderr
    assert "last 1 h" in p.stdout  # the window the chart spans, said


def test_out_still_works_and_says_it_is_deprecated(cfg: Path, tmp_path: Path) -> None:
    out = tmp_path / "h.png"
    p = history(cfg, "a6000", "--hours", "1", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes()[:8] == PNG
    [line] = [ln for ln in p.stderr.splitlines() if "deprecated" in ln]
    assert "--out" in line and "--chart" in line
    assert "--out" not in history(cfg, "--help").stdout  # hidden: the help shows one way


def test_one_watch_is_charted_over_the_window_asked(cfg: Path, tmp_path: Path) -> None:
    out = tmp_path / "one.png"
    p = history(cfg, "h100", "--hours", "1", "--chart", str(out))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes()[:8] == PNG and "h100: 1 watch in the last 1 h" in p.stdout


def test_no_watch_is_one_clear_line(cfg: Path, tmp_path: Path) -> None:
    p = history(cfg, "nosuch", "--hours", "1", "--chart", str(tmp_path / "x.png"))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "no watches of nosuch" in p.stderr
    assert not (tmp_path / "x.png").exists()


def test_without_chart_the_file_has_the_name_slack_gives_it(cfg: Path, tmp_path: Path) -> None:
    p = history(cfg, "a6000", "--hours", "1", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "history-a6000.png").read_bytes()[:8] == PNG  # as the health report's upload is named
    assert "chart written to history-a6000.png" in p.stdout
