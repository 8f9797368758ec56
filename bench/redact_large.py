"""Benchmark: the redactor on large texts (issue 36) — a realistic vLLM log of ~100 MB as one string, and a
pasted single line of 19 MB (`password=` and 19 million characters), and the log as a container runtime's JSON
lines (every line escaped) — each in a process of its own: seconds,
the process's peak RSS (the input itself included), and the longest time another thread waited for the GIL
while the text was redacted (what an acknowledgement in the bot would wait).

    python bench/redact_large.py [--mb 100] [--line-mb 19]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import json, resource, sys, threading, time
sys.path.insert(0, {root!r}); sys.path.insert(0, {bench!r})
from bench_redact import vllm_log
from bot.redact import Redactor, rule_set
kind, mb = sys.argv[1], float(sys.argv[2])
if kind in ("log", "json"):
    lines = vllm_log(20_000)
    if kind == "json":  # as a container runtime writes it: one JSON object a line, the line escaped inside
        lines = [json.dumps({{"log": line + "\n", "stream": "stdout"}}) for line in lines]
    block = "\n".join(lines) + "\n"
    text = block * max(1, round(mb * 1e6 / len(block)))
    del block, lines
else:
    text = "password=" + "x" * int(mb * 1e6)
rule_set()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
stalls, done = [0.0], threading.Event()
def ticker():
    last = time.perf_counter()
    while not done.is_set():
        time.sleep(0.005)
        now = time.perf_counter()
        stalls[0] = max(stalls[0], now - last - 0.005)
        last = now
t = threading.Thread(target=ticker, daemon=True); t.start()
begun = time.perf_counter(); out = Redactor().text(text); took = time.perf_counter() - begun
done.set(); t.join()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"chars": len(text), "seconds": took, "peak_mb": peak, "input_mb": len(text) / 2**20,
                  "longest_gil_wait_s": stalls[0], "masked": "(redacted)" in out}}))
"""


def run(kind: str, mb: float) -> dict[str, float]:
    code = _CHILD.format(root=str(ROOT), bench=str(ROOT / "bench"))
    out = subprocess.run([sys.executable, "-c", code, kind, str(mb)], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--line-mb", type=float, default=19.0)
    a = ap.parse_args()
    print("text                               seconds  peak RSS (MB)  input (MB)  longest GIL wait (s)  masked")
    for label, kind, mb in ((f"vLLM log, ~{a.mb:g} MB, one string", "log", a.mb),
                            (f"the same as JSON lines, ~{a.mb:g} MB", "json", a.mb),
                            (f"one line password=x..., {a.line_mb:g} MB", "line", a.line_mb)):
        r = run(kind, mb)
        print(f"{label:34} {r['seconds']:7.2f}  {r['peak_mb']:13.0f}  {r['input_mb']:10.0f}  "
              f"{r['longest_gil_wait_s']:20.3f}  {r['masked']}")


if __name__ == "__main__":
    main()
