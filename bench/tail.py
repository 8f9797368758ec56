"""Benchmark: reading vLLM logs of every shape and size. Not a test; run it and paste the tables into
bench/RESULTS.md.

    python bench/tail.py [--sizes 10,100,1024] [--repeat 5] [--lines-3m] [--keep] [--dir DIR]

Three shapes of log, each at 10 MB, 100 MB and 1 GB, generated once, page cache warm for every
contender, side by side in one run:
  access  HTTP access lines, the brief's failing DFlash metrics line (and its Engine line) at the end
  engine  `Engine 000:` lines, one SpecDecoding line at each end
  pairs   access lines with an Engine + SpecDecoding pair every ~2 MB and 50 pairs at the end
Contenders per file: `grep 'SpecDecoding metrics' FILE | tail -3`; the whole `specops diagnose --log
FILE --format json` command, interpreter start included, default and `--all` (with their peak
resident memory); the default read in process (`read_log`); the same read over SFTP from the
simulated host (a real OpenSSH sshd on 127.0.0.1, `SSHSession.random_reader` + `read_tail`).
`--lines-3m` adds `--all` on a log of 3 M matching lines (1.5 M Engine + SpecDecoding pairs).
`--all-vs-grep` runs only the whole-log scan against `grep -c` on one 1 GB log of access lines with 3,000
metrics lines spread through it (1,500 Engine + SpecDecoding pairs) and a short traceback every ~100 MB, side
by side, and prints the ratio (issue 19: `--all` within 2x of `grep -c`), with `diagnose` on a one-line log
beside it (the cost before any log is read); medians, then the fastest and slowest run. With several
`--checkout` trees every round runs each tree in turn, so the trees see the same machine load.

The command is run as `python -m bot` with the interpreter itself (not a pyenv shim, which adds its
own ~50 ms), its modules byte-compiled first as `pip install` does.
"""

from __future__ import annotations

import argparse
import compileall
import json
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
from bot.app.diagnosis.logfile import read_log  # noqa: E402

ACCESS = '(APIServer pid=13026) INFO:     127.0.0.1:49754 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
HEAD = (
    "(APIServer pid=13026) INFO 05-08 09:00:00 [api_server.py:1] vLLM server version 0.20.1, serving model "
    "Qwen/Qwen3.6-27B\n"
    "(APIServer pid=13026) INFO 05-08 09:00:00 [utils.py:1] non-default args: {'model': 'Qwen/Qwen3.6-27B', "
    "'tensor_parallel_size': 2, 'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 6}}\n"
)
DFLASH_HEAD = (
    "(APIServer pid=13026) INFO 05-08 09:00:00 [api_server.py:1] vLLM server version 0.20.1, serving model "
    "Qwen/Qwen3.6-27B\n"
    "(APIServer pid=13026) INFO 05-08 09:00:00 [utils.py:1] non-default args: {'model': 'Qwen/Qwen3.6-27B', "
    "'tensor_parallel_size': 2, 'speculative_config': {'method': 'dflash', 'model': 'z-lab/Qwen3.6-27B-DFlash', "
    "'num_speculative_tokens': 15}}\n"
)
ENGINE = ("(APIServer pid=13026) INFO 05-08 16:26:29 [loggers.py:271] Engine 000: Avg prompt throughput: 5.0 tokens/s, "
          "Avg generation throughput: 124.5 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 7.4%, "
          "Prefix cache hit rate: 0.0%\n")
SPEC = ("(APIServer pid=13026) INFO 05-08 16:26:29 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
        "4.74, Accepted throughput: 98.70 tokens/s, Drafted throughput: 158.40 tokens/s, Accepted: 987 tokens, "
        "Drafted: 1584 tokens, Per-position acceptance rate: 0.917, 0.837, 0.648, 0.538, 0.451, 0.348, Avg Draft "
        "acceptance rate: 62.3%\n")
# the brief's failing DFlash line (shared/reference/vllm-logs.md), in vLLM 0.20.1's form: 181 drafts of 15
BRIEF = ("(APIServer pid=13026) INFO 05-08 16:26:29 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
         "1.18, Accepted throughput: 3.30 tokens/s, Drafted throughput: 271.50 tokens/s, Accepted: 33 tokens, "
         "Drafted: 2715 tokens, Per-position acceptance rate: 0.166, 0.017, " + ", ".join(["0.000"] * 13)
         + ", Avg Draft acceptance rate: 1.2%\n")

SHAPES = ("access", "engine", "pairs")
MB = 1 << 20


def _fill(f: object, line: str, until: int, written: int) -> int:
    assert hasattr(f, "write")
    block = (line * max(1, (4 * MB) // len(line))).encode()
    while written + len(block) < until:
        f.write(block)
        written += len(block)
    one = line.encode()
    while written + len(one) < until:
        f.write(one)
        written += len(one)
    return written


def make_log(path: Path, shape: str, size: int) -> None:
    with open(path, "wb") as f:
        if shape == "access":
            f.write(DFLASH_HEAD.encode())
            _fill(f, ACCESS, size - len(ENGINE) - len(BRIEF), len(DFLASH_HEAD))
            f.write((ENGINE + BRIEF).encode())
        elif shape == "engine":
            f.write((HEAD + ENGINE + SPEC).encode())
            _fill(f, ENGINE, size - len(ENGINE) - len(SPEC), len(HEAD) + len(ENGINE) + len(SPEC))
            f.write((ENGINE + SPEC).encode())
        else:
            f.write(HEAD.encode())
            block = (ACCESS * 20_000 + ENGINE + SPEC).encode()
            tail = ((ENGINE + SPEC) * 50).encode()
            written = len(HEAD)
            while written + len(block) + len(tail) < size:
                f.write(block)
                written += len(block)
            _fill(f, ACCESS, size - len(tail), written)
            f.write(tail)


TRACEBACK = (
    "(EngineCore_DP0 pid=412) ERROR 05-08 16:26:29 [core.py:700] Traceback (most recent call last):\n"
    '(EngineCore_DP0 pid=412) ERROR 05-08 16:26:29 [core.py:700]   File "/usr/lib/python3/site-packages/vllm/v1/'
    'worker/gpu_model_runner.py", line 301, in get_output\n'
    "(EngineCore_DP0 pid=412) ERROR 05-08 16:26:29 [core.py:700] RuntimeError: something nobody explains\n"
)


def make_spread(path: Path, size: int, metrics_lines: int, tracebacks: bool = False) -> None:
    """Access lines with `metrics_lines` metrics lines (Engine + SpecDecoding pairs) spread evenly through them,
    and with `tracebacks` a short traceback every tenth of the way (problem lines: levels, frames, exception)."""
    pairs = max(1, metrics_lines // 2)
    gap = max(1, (size // pairs - len(ENGINE) - len(SPEC)) // len(ACCESS))
    block = (ACCESS * gap + ENGINE + SPEC).encode()
    written = 0
    with open(path, "wb") as f:
        f.write(HEAD.encode())
        written += len(HEAD)
        for i in range(pairs):
            f.write(block)
            written += len(block)
            if tracebacks and i % max(1, pairs // 10) == 0:
                f.write(TRACEBACK.encode())
                written += len(TRACEBACK)
        _fill(f, ACCESS, size, written)


def all_vs_grep(work: Path, repeat: int, metrics_lines: int = 3000, tracebacks: bool = False,
                checkouts: tuple[Path, ...] = ()) -> None:
    path = work / f"spread-1024mb-{metrics_lines}{'-tb' if tracebacks else ''}.log"
    if not path.exists():
        make_spread(path, 1024 * MB, metrics_lines, tracebacks)
    one = work / "one-line.log"  # what the command costs before any log: interpreter, imports, parsing argv
    one.write_text(SPEC)
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # page cache warm
    trees = checkouts or (ROOT,)
    for tree in trees:
        compileall.compile_dir(str(tree / "bot"), quiet=1)
    cmd = [sys.executable, "-m", "bot", "diagnose", "--all", "--log", str(path), "--format", "json"]
    one_cmd = [sys.executable, "-m", "bot", "diagnose", "--log", str(one), "--format", "json"]
    runs: dict[Path, dict[str, list[float]]] = {tree: {"grep": [], "all": [], "one": []} for tree in trees}
    reports: dict[Path, str] = {}
    counted = ""
    for _ in range(repeat):  # interleaved, the trees too: every command sees the same machine load
        for tree in trees:
            t = time.perf_counter()
            out = subprocess.run(["grep", "-c", "SpecDecoding metrics", str(path)], check=False,
                                 stdout=subprocess.PIPE)
            runs[tree]["grep"].append(time.perf_counter() - t)
            counted = out.stdout.decode().strip()
            # `python -m` puts the working directory first on sys.path: run from the tree, or it is not the one timed
            wall, _kb, reports[tree] = run_peak(cmd, cwd=tree)
            runs[tree]["all"].append(wall)
            runs[tree]["one"].append(run_peak(one_cmd, cwd=tree)[0])
    for tree in trees:
        r = runs[tree]
        g, a, o = (sorted(r[k])[len(r[k]) // 2] for k in ("grep", "all", "one"))
        ratios = sorted(x / y for x, y in zip(r["all"], r["grep"], strict=True))
        report = reports[tree]
        verdict = json.loads(report).get("verdict", "?") if report.strip().startswith("{") else "?"
        print(f"| {tree} | {path.name}: {counted} SpecDecoding lines, {metrics_lines} metrics lines | `grep -c` "
              f"{g:.3f} s ({min(r['grep']):.3f}–{max(r['grep']):.3f}) | `diagnose --all` {a:.3f} s "
              f"({min(r['all']):.3f}–{max(r['all']):.3f}) | {a / g:.2f}x (runs {ratios[0]:.2f}–{ratios[-1]:.2f}x) | "
              f"one-line `diagnose` {o:.3f} s ({min(r['one']):.3f}–{max(r['one']):.3f}) | {verdict} |", flush=True)


def make_matching(path: Path, lines: int) -> None:
    pair = (ENGINE + SPEC).encode()
    with open(path, "wb") as f:
        f.write(HEAD.encode())
        chunk = pair * 10_000
        for _ in range(lines // 20_000):
            f.write(chunk)


def run_peak(argv: list[str], cwd: Path | None = None) -> tuple[float, int, str]:
    """Wall time, peak resident KB of the command's largest process (its workers included), stdout."""
    t = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t
        out.seek(0)
        return wall, usage.ru_maxrss, out.read().decode("utf-8", "replace")


def timed_peak(argv: list[str], repeat: int) -> tuple[float, int, str]:
    runs = [run_peak(argv) for _ in range(repeat)]
    walls = sorted(r[0] for r in runs)
    return walls[len(walls) // 2], max(r[1] for r in runs), runs[-1][2]


def sh(argv: list[str]) -> Callable[[], object]:
    # stdout to a pipe, not /dev/null: GNU grep stops at the first match when it sees /dev/null
    return lambda: subprocess.run(argv, check=False, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def grep_tail(path: Path) -> Callable[[], object]:
    return sh(["sh", "-c", 'grep "SpecDecoding metrics" "$1" | tail -3', "sh", str(path)])


class SftpReader:
    """The default read over SFTP through a real sshd on 127.0.0.1 (the simulated host's SSH layer)."""

    def __init__(self, work: Path) -> None:
        from bot.config import HostConfig
        from bot.remote.ssh import SSHSession
        from tests.support.sshd import Sshd

        self.sshd = Sshd(work / "sshd").start()
        host = HostConfig(address="127.0.0.1", port=self.sshd.port, user=self.sshd.user, key=self.sshd.client_key,
                          known_hosts=self.sshd.known_hosts)
        self.session = SSHSession("bench", host).connect()

    def read(self, path: Path) -> object:
        from bot.core.logread import read_tail

        with self.session.random_reader(str(path)) as (size, read_at):
            return read_tail(read_at, size)

    def close(self) -> None:
        self.session.close()
        self.sshd.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,100,1024", help="sizes in MB")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--lines-3m", action="store_true", help="also --all on 3 M matching lines (~860 MB)")
    ap.add_argument("--keep", action="store_true", help="keep the generated logs")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--all-vs-grep", action="store_true", help="only --all vs grep -c on 1 GB, 3,000 metrics lines")
    ap.add_argument("--tracebacks", action="store_true", help="--all-vs-grep: a traceback every 100 MB too")
    ap.add_argument("--checkout", type=Path, action="append", default=[],
                    help="--all-vs-grep: run `python -m bot` from this tree (repeatable; e.g. a `git archive` of HEAD)")
    args = ap.parse_args()
    if args.all_vs_grep:
        work = Path(args.dir or tempfile.mkdtemp(prefix="specops-bench-tail-"))
        work.mkdir(parents=True, exist_ok=True)
        try:
            all_vs_grep(work, args.repeat, tracebacks=args.tracebacks, checkouts=tuple(args.checkout))
        finally:
            if not args.keep and args.dir is None:
                shutil.rmtree(work, ignore_errors=True)
        return
    sizes = [int(x) for x in args.sizes.split(",")]
    r = args.repeat
    work = Path(args.dir or tempfile.mkdtemp(prefix="specops-bench-tail-"))
    work.mkdir(parents=True, exist_ok=True)
    compileall.compile_dir(str(ROOT / "bot"), quiet=1)
    cmd = [sys.executable, "-m", "bot"]
    env_note = os.environ.get("PYTHONDONTWRITEBYTECODE")
    rows: list[dict[str, object]] = []
    sftp = SftpReader(work)
    t0 = time.perf_counter()
    try:
        for shape in SHAPES:
            for mb in sizes:
                path = work / f"{shape}-{mb}mb.log"
                if not path.exists() or abs(path.stat().st_size - mb * MB) > MB:
                    make_log(path, shape, mb * MB)
                subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # page cache warm
                row: dict[str, object] = {"shape": shape, "mb": mb}
                row["grep"] = median(grep_tail(path), r)
                row["default"], row["default_kb"], out = timed_peak([*cmd, "diagnose", "--log", str(path),
                                                                     "--format", "json"], r)
                row["verdict"] = json.loads(out).get("verdict", "?") if out.strip().startswith("{") else "?"
                row["all"], row["all_kb"], _ = timed_peak([*cmd, "diagnose", "--all", "--log", str(path),
                                                           "--format", "json"], min(r, 3))
                read_log(path)
                row["inproc"] = median(lambda p=path: read_log(p), r * 2)  # type: ignore[misc]
                row["read_mb"] = read_log(path).bytes_read / MB
                row["sftp"] = median(lambda p=path: sftp.read(p), r)  # type: ignore[misc]
                rows.append(row)
                print(f"  {shape} {mb} MB done", file=sys.stderr)
        helps = median(sh([*cmd, "--help"]), r)
        one = work / "one-mb.log"
        make_log(one, "pairs", MB)
        small = median(sh([*cmd, "diagnose", "--log", str(one), "--format", "json"]), r)
        many = None
        if args.lines_3m:
            big = work / "matching-3m.log"
            if not big.exists():
                make_matching(big, 3_000_000)
            subprocess.run(["cat", str(big)], stdout=subprocess.DEVNULL, check=True)
            many = run_peak([*cmd, "diagnose", "--all", "--log", str(big), "--format", "json"])
            many_size = big.stat().st_size
    finally:
        sftp.close()
        if not args.keep and args.dir is None:
            shutil.rmtree(work, ignore_errors=True)

    print(f"# bench/tail.py — {time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores, median of {r} "
          f"(--all: of {min(r, 3)}; in process: of {2 * r}); {time.perf_counter() - t0:.0f} s in all"
          + (f"; PYTHONDONTWRITEBYTECODE={env_note}" if env_note else ""))
    print()
    print("| log | size | grep \\| tail -3 | `diagnose --log` | ratio | `--all` | peak RSS default / --all | "
          "read in process | bytes read | over SFTP | verdict |")
    print("|---|---:|---:|---:|---|---:|---|---:|---:|---:|---|")
    for row in rows:
        g, d, a = float(row["grep"]), float(row["default"]), float(row["all"])  # type: ignore[arg-type]
        print(f"| {row['shape']} | {row['mb']} MB | {g:.3f} s | {d:.3f} s | {g / d:.2f}x faster | {a:.3f} s | "
              f"{int(row['default_kb']) // 1024} / {int(row['all_kb']) // 1024} MB | "  # type: ignore[call-overload]
              f"{float(row['inproc']) * 1000:.1f} ms | {float(row['read_mb']):.1f} MB | "  # type: ignore[arg-type]
              f"{float(row['sftp']) * 1000:.1f} ms | {row['verdict']} |")  # type: ignore[arg-type]
    print()
    print("| goal | measured | |")
    print("|---|---|---|")
    biggest = max(sizes)
    smallest = min(sizes)
    for shape in SHAPES:
        by = {int(row["mb"]): row for row in rows if row["shape"] == shape}  # type: ignore[call-overload]
        top, low = by[biggest], by[smallest]
        g, d = float(top["grep"]), float(top["default"])  # type: ignore[arg-type]
        print(f"| {shape}, {biggest} MB: whole command faster than grep \\| tail | {d:.3f} s vs {g:.3f} s | "
              f"{'ok' if d < g else 'MISSED'} |")
        worst = max(float(x["default"]) / float(x["all"]) for x in by.values())  # type: ignore[arg-type]
        print(f"| {shape}: default never slower than --all | worst default / --all = {worst:.2f} | "
              f"{'ok' if worst <= 1 else 'MISSED'} |")
        ratio = float(top["inproc"]) / float(low["inproc"])  # type: ignore[arg-type]
        print(f"| {shape}: default read {biggest} MB within 1.2x of {smallest} MB | {ratio:.2f}x | "
              f"{'ok' if ratio <= 1.2 else 'MISSED'} |")
    if many is not None:
        print(f"| --all on 3 M matching lines ({many_size / MB:.0f} MB) under 200 MB resident | "
              f"{many[1] // 1024} MB peak, {many[0]:.1f} s | {'ok' if many[1] < 200 * 1024 else 'MISSED'} |")
    print(f"| `specops --help` under 0.3 s | {helps:.3f} s | {'ok' if helps < 0.3 else 'MISSED'} |")
    print(f"| `specops diagnose --log` on 1 MB under 0.35 s | {small:.3f} s | {'ok' if small < 0.35 else 'MISSED'} |")


if __name__ == "__main__":
    main()
