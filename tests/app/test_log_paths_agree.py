"""A short log gets the same report whichever way it arrives (issue 35): read from a file (`diagnose --log`, a
host's tail) or pasted in chat — what `specops eval` scores is what the command line says. Over a quarter of the
real cases (every fourth, all folders), the verdict and every warning or critical claim agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.app.diagnosis.diagnose import DiagnoseRequest, diagnose_offline, diagnose_text
from bot.app.evaluation.evaluate import flags_of
from bot.core.report import Report

ROOT = Path(__file__).resolve().parents[2]
CASES = sorted(p for d in ROOT.glob("tests/cases*") if d.is_dir() for p in d.iterdir() if (p / "log.txt").is_file())


@pytest.mark.parametrize("case", CASES[::4], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_short_log_read_from_a_file_is_judged_as_when_pasted(case: Path) -> None:
    context = json.loads((case / "context.json").read_text()) if (case / "context.json").exists() else {}
    flags = flags_of(context)
    pasted = diagnose_text((case / "log.txt").read_text(errors="replace"), flags, source="pasted")
    read = diagnose_offline(DiagnoseRequest(log=case / "log.txt", metrics=[], flags=flags, samples=30, full=False,
                                            log_label=None))

    assert (read.verdict, claims(read)) == (pasted.verdict, claims(pasted))


def claims(r: Report) -> set[str]:
    return {f.id for f in r.findings if f.severity in ("critical", "warning")}


def test_a_bind_refused_in_a_named_thread_is_read_the_same_from_a_file(tmp_path: Path) -> None:
    # the thread's line and the exception are near in lines, far in bytes: nearness is counted in lines either way
    filler = "".join(f"INFO 01-01 00:00:{i % 60:02d} [core.py:1] {'x' * 200}\n" for i in range(20))
    text = (filler + "Exception in thread nixl_handshake_listener:\n"
            "zmq.error.ZMQError: Cannot assign requested address (addr='tcp://node-a:34762')\n")
    log = tmp_path / "bind.log"
    log.write_text(text)
    flags = flags_of({"vllm_version": "0.10.2"})
    pasted = diagnose_text(text, flags, source="pasted")
    read = diagnose_offline(DiagnoseRequest(log=log, metrics=[], flags=flags, samples=30, full=False, log_label=None))
    assert any(f.id.startswith("bind-address:") for f in pasted.findings)
    assert (read.verdict, claims(read)) == (pasted.verdict, claims(pasted))
