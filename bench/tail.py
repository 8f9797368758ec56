"""Benchmark: reading vLLM logs. Not a test; run it and paste the table into bench/RESULTS.md.

    python bench/tail.py [--size-gb 2] [--repeat 5] [--keep]

Side by side in one run, on the same files (page cache warm for every contender):
  1. latest samples of a 2 GB log whose metrics are at the end: `read_log` in process
     vs `grep 'SpecDecoding metrics' FILE | tail -3`  (goal: >= 20x faster)
  2. the same read on a 20 MB log                      (goal: 2 GB within 1.2x of 20 MB)
  3. the whole `specops diagnose --log` command, interpreter start included, vs grep | tail
  4. `specops --help` start time                       (goal: < 0.3 s)
  5. `read_log(..., full=True)` (the `--all` scan) vs `grep -c 'SpecDecoding metrics' FILE` (goal: <= 3x)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.timing import median  # noqa: E402
from bot.app.logfile import read_log  # noqa: E402

ACCESS = '(APIServer pid=13026) INFO:     127.0.0.1:49754 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
HEAD = (
    "(APIServer pid=13026) INFO 05-08 09:00:00 [api_server.py:1] vLLM server version 0.20.1, serving model "
    "Qwen/Qwen3.6-27B\n"
    "(APIServer pid=13026) INFO 05-08 09:00:00 [utils.py:1] non-default args: {'model': 'Qwen/Qwen3.6-27B', "
    "'tensor_parallel_size': 2, 'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 6}}\n"
)
ENGINE = ("(APIServer pid=13026) INFO 05-08 16:26:29 [loggers.py:271] Engine 000: Avg prompt throughput: 5.0 tokens/s, "
          "Avg generation throughput: 124.5 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 7.4%, "
          "Prefix cache hit rate: 0.0%\n")
SPEC = ("(APIServer pid=13026) INFO 05-08 16:26:29 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
        "4.74, Accepted throughput: 98.70 tokens/s, Drafted throughput: 158.40 tokens/s, Accepted: 987 tokens, "
        "Drafted: 1584 tokens, Per-position acceptance rate: 0.917, 0.837, 0.648, 0.538, 0.451, 0.348, Avg Draft "
        "acceptance rate: 62.3%\n")


def make_log(path: Path, size: int) -> None:
    """Access-log filler with a metrics pair every ~2 MB, and the last 50 pairs at the very end."""
    block = (ACCESS * 20_000 + ENGINE + SPEC).encode()
    with open(path, "wb") as f:
        f.write(HEAD.encode())
        written = 0
        while written + len(block) < size:
            f.write(block)
            written += len(block)
        f.write(ACCESS.encode() * max(0, (size - written) // len(ACCESS)))
        f.write(((ENGINE + SPEC) * 50).encode())






def sh(argv: list[str]) -> Callable[[], object]:
    # stdout to a pipe, not /dev/null: GNU grep stops at the first match when it sees /dev/null
    return lambda: subprocess.run(argv, check=False, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the generated logs")
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()

    work = Path(args.dir or tempfile.mkdtemp(prefix="specops-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    big, small = work / "big.log", work / "small.log"
    specops = shutil.which("specops")
    specops_argv = [specops] if specops else [sys.executable, "-m", "bot"]
    try:
        t0 = time.perf_counter()
        if not big.exists() or big.stat().st_size < args.size_gb * 2**30 * 0.99:
            make_log(big, int(args.size_gb * 2**30))
        if not small.exists():
            make_log(small, 20 * 2**20)
        gen = time.perf_counter() - t0
        for p in (big, small):  # warm the page cache for everyone
            subprocess.run(["cat", str(p)], stdout=subprocess.DEVNULL, check=True)
        r = args.repeat
        grep_tail = median(lambda: subprocess.run(
            ["sh", "-c", 'grep "SpecDecoding metrics" "$1" | tail -3', "sh", str(big)],
            stdout=subprocess.PIPE, check=False), r)
        grep_c = median(sh(["grep", "-c", "SpecDecoding metrics", str(big)]), r)
        tail_big = median(lambda: read_log(big, samples=3), r * 4)
        tail_small = median(lambda: read_log(small, samples=3), r * 4)
        got = read_log(big, samples=3)
        assert len(got.parsed.samples) == 3, got
        cli = median(sh([*specops_argv, "diagnose", "--log", str(big), "--format", "md"]), r)
        cli_json = subprocess.run([*specops_argv, "diagnose", "--log", str(big), "--format", "json"],
                                  capture_output=True, text=True, check=True).stdout
        assert '"verdict": "healthy"' in cli_json, cli_json[:400]
        helps = median(sh([*specops_argv, "--help"]), r)
        full = median(lambda: read_log(big, full=True), r)
        n_all = len(read_log(big, full=True).parsed.samples)
        n_grep = int(subprocess.run(["grep", "-c", "SpecDecoding metrics", str(big)], capture_output=True,
                                    text=True).stdout)
        assert n_all == n_grep, (n_all, n_grep)
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(work, ignore_errors=True)

    size_gb = big.stat().st_size / 2**30 if big.exists() else args.size_gb
    rows = [
        ("latest 3 samples, 2 GB log: read_log (in process)", tail_big, None),
        ("  `grep 'SpecDecoding metrics' FILE | tail -3`", grep_tail, f"read_log {grep_tail / tail_big:.0f}x faster "
         f"(goal >= 20x)"),
        ("latest 3 samples, 20 MB log: read_log", tail_small, f"2 GB / 20 MB = {tail_big / tail_small:.2f}x "
         "(goal <= 1.2x)"),
        ("`specops diagnose --log` 2 GB, whole command", cli, f"{grep_tail / cli:.1f}x faster than grep | tail "
         "(goal > 1x)"),
        ("`specops --help`", helps, "goal < 0.3 s"),
        ("--all scan, 2 GB: read_log(full=True)", full, f"{n_all} samples, = grep -c"),
        ("  `grep -c 'SpecDecoding metrics' FILE`", grep_c, f"--all / grep -c = {full / grep_c:.2f}x (goal <= 3x)"),
    ]
    print(f"# bench/tail.py — {time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores, "
          f"log {size_gb:.2f} GiB (generated in {gen:.1f} s), median of {r} runs (x4 for in-process tail reads)")
    print()
    print("| what | seconds | ratio |")
    print("|---|---:|---|")
    for name, secs, note in rows:
        print(f"| {name} | {secs:.4f} | {note or ''} |")


if __name__ == "__main__":
    main()
