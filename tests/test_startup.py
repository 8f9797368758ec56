"""What an offline diagnosis loads: no SSH, Slack, scheduler or database library, no YAML parser (the
knowledge base comes compiled), no Prometheus parser without a scrape. Speed itself is measured in
bench/tail.py; this only keeps the heavy imports off the path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE = ("(APIServer pid=1) INFO 05-08 16:26:29 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
        "2.00, Accepted: 100 tokens, Drafted: 200 tokens, Per-position acceptance rate: 0.600, 0.400, "
        "Avg Draft acceptance rate: 50.0%\n")


def test_an_offline_diagnosis_imports_no_heavy_library(tmp_path: Path) -> None:
    log = tmp_path / "one.log"
    log.write_text(LINE)
    probe = (
        "import sys, runpy\n"
        f"sys.argv = ['specops', 'diagnose', '--log', {str(log)!r}, '--format', 'json']\n"
        "try:\n    runpy.run_module('bot', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "heavy = ('paramiko', 'slack_bolt', 'slack_sdk', 'apscheduler', 'sqlalchemy', 'sqlite3', 'yaml', "
        "'prometheus_client', 'matplotlib', 'httpx')\n"
        "print('LOADED', [m for m in heavy if m in sys.modules], file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert json.loads(out.stdout)["verdict"]
    loaded = [line for line in out.stderr.splitlines() if line.startswith("LOADED")]
    assert loaded == ["LOADED []"], out.stderr[-2000:]
