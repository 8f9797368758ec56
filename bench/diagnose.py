"""Benchmark: one whole diagnosis (read + parse + the failure table + triage + report) per log shape.

    python bench/diagnose.py [--repeat 5]

Side by side in one run, on the same machine, page cache warm: `diagnose_offline` in process and the
whole `specops diagnose --log FILE --format json` command (interpreter start included), for logs of
1 MB and 10 MB in three shapes:
  - access: HTTP access lines, SpecDecoding + Engine pairs every ~2 MB and 50 at the end (a busy server);
  - engine: only Engine lines and SpecDecoding lines (a server that logs nothing else);
  - crash:  access lines, then a traceback at the end (a launch or runtime failure; every line of the
            traceback goes through the failure table);
  - unknown: access lines, then a real refusal no knowledge-base entry knows (vLLM 0.32.0's own output,
            tests/fixtures/atlas/): the message atlas is loaded and places it (the whole command pays the load);
  - frames: access lines, then a real traceback of a built-in exception (an IndexError in a model's __init__,
            tests/cases-sixth/): the frames are read first, with the code's history and the switches (issue 35).
Goal (issue 10): every diagnosis of a log under 10 MB under 0.5 s; issue 35: under 0.5 s in process.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.tail import ACCESS, ENGINE, HEAD, SPEC  # noqa: E402
from bench.timing import median  # noqa: E402
from bot.app.diagnosis.diagnose import DiagnoseRequest, diagnose_offline  # noqa: E402
from bot.core.triage.context import Flags  # noqa: E402

TRACEBACK = (
    "(EngineCore_DP0 pid=286) ERROR 03-05 05:40:33 [core.py:1102] EngineCore encountered a fatal error.\n"
    "(EngineCore_DP0 pid=286) ERROR 03-05 05:40:33 [core.py:1102] Traceback (most recent call last):\n"
    + "(EngineCore_DP0 pid=286) ERROR 03-05 05:40:33 [core.py:1102]   File \"/vllm/v1/engine/core.py\", line 1, "
      "in run_busy_loop\n" * 30
    + "(EngineCore_DP0 pid=286) ERROR 03-05 05:40:33 [core.py:1102] ValueError: No available memory for the cache "
      "blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n")


UNKNOWN = (ROOT / "tests" / "fixtures" / "atlas" / "vllm-0.32.0-tp-does-not-divide-heads.log").read_text()
FRAMES = (ROOT / "tests" / "cases-sixth" / "vllm-40000-v0190-step35-flash-mtp-layer-types-indexerror-worked-0181"
          / "log.txt").read_text()


def make(path: Path, shape: str, size: int) -> None:
    with open(path, "wb") as f:
        f.write(HEAD.encode())
        if shape == "engine":
            unit = (ENGINE * 9 + ENGINE + SPEC).encode()
            f.write(unit * (size // len(unit)))
            return
        block = (ACCESS * 20_000 + ENGINE + SPEC).encode()
        written = 0
        while written + len(block) < size:
            f.write(block)
            written += len(block)
        f.write(ACCESS.encode() * max(0, (size - written) // len(ACCESS)))
        tail = {"access": (ENGINE + SPEC) * 50, "crash": TRACEBACK, "unknown": UNKNOWN, "frames": FRAMES}[shape]
        f.write(tail.encode())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    flags = Flags(method="mtp", vllm_version="0.20.1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in ("access", "engine", "crash", "unknown", "frames"):
            for mb in (1, 10):
                path = Path(tmp) / f"{shape}-{mb}.log"
                make(path, shape, mb << 20)
                report = diagnose_offline(DiagnoseRequest(log=path, flags=flags))
                t_in = median(lambda p=path: diagnose_offline(DiagnoseRequest(log=p, flags=flags)), args.repeat)
                cmd = [sys.executable, "-m", "bot", "diagnose", "--log", str(path), "--method", "mtp",
                       "--vllm-version", "0.20.1", "--format", "json"]
                t_cli = median(lambda c=cmd: subprocess.run(c, capture_output=True, cwd=ROOT), args.repeat)
                rows.append((shape, mb, t_in, t_cli, report.verdict, report.findings[0].id if report.findings else "-"))
    print("| log | size | in process | whole command | verdict | top finding |")
    print("|---|---|---|---|---|---|")
    for shape, mb, t_in, t_cli, verdict, top in rows:
        print(f"| {shape} | {mb} MB | {t_in * 1000:.0f} ms | {t_cli * 1000:.0f} ms | {verdict} | {top} |")
    print(f"\nworst in process: {max(r[2] for r in rows):.2f} s (goal < 0.5 s); "
          f"worst whole command: {max(r[3] for r in rows):.2f} s")


if __name__ == "__main__":
    main()
