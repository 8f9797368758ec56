"""Benchmark: `specops fleet` over 1,000 and 10,000 instances, side by side in one run (issue 23).

    python3 bench/fleet.py [--sizes 1000,10000] [--repeat 3] [--checkout DIR ...]

A stand-in of Prometheus' query API (tests/support/prometheus_api.py: `GET /api/v1/query` on 127.0.0.1, the real
JSON shape — vector results with metric labels — for N instances of mixed health: healthy, slow, useless
acceptance, restarted inside the window, down, not speculating) runs in this process; what is measured runs in a
child process, so the stand-in's memory and threads are not counted:
  - in process: the real code path of the verb — `bot.app.fleet.fleet` (the queries, the parsing, every instance's
    triage) then `bot.present.render.render` — wall time (median), the peak of Python's allocations
    (tracemalloc, a separate run: tracing slows it) and the child's peak RSS (getrusage);
  - the whole command: `specops fleet --prometheus URL ...` as a user runs it (interpreter start, the CLI, the
    output's redaction), wall time and peak RSS (wait4: the largest of the process and any it forked), in
    the text format, in Markdown (the default when the output is not a terminal), with `--limit 50`, with
    `--only-problems`, and in `--format json`.
"workers' RSS" is the largest forked worker's peak, for a tree that forks them (before issue 39's re-measure).
`--checkout DIR` measures another tree the same way (e.g. `git archive 0039de1 | tar -x -C /tmp/before`); a tree
whose per-answer cap (MAX_SERIES) refuses the fleet has it lifted in the child, so the old code can be timed.
`--checkouts-only` leaves this checkout out (measure `git archive HEAD` instead when others edit the tree).
Goal (issue 23): 10,000 instances in < 5 s and < 200 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.prometheus_api import PrometheusAPI  # noqa: E402

# the child: run in the measured tree (its own sys.path), print one JSON line
CHILD = r"""
import json, resource, sys, time, tracemalloc
tree, url, mode, traced = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
sys.path.insert(0, tree)
import bot.app.prometheus.source as ps
if ps.MAX_SERIES < 10**6 and not hasattr(ps, "MAX_POSITIONS"):
    ps.MAX_SERIES = 10**9  # the old tree refuses a fleet this big: lifted, to time its code
from bot.app.fleet import fleet
from bot.config import PrometheusSettings
from bot.present.render import render
kw = {"limit": 50} if mode == "limit" else {"only_problems": True} if mode == "problems" else {}
if traced:
    tracemalloc.start()
t = time.perf_counter()
result = fleet(None, PrometheusSettings(url=url), "", 3600.0, **kw)
out = render(result, mode if mode in ("json", "md") else "text")
took = time.perf_counter() - t
peak = tracemalloc.get_traced_memory()[1] if traced else 0
print(json.dumps({"s": took, "traced_mb": peak / 2**20, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                  / 1024, "workers_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "lines": len(result.lines), "instances": result.totals.instances}))
"""

# the whole command in the measured tree (the old tree's cap lifted the same way)
COMMAND = r"""
import sys
tree = sys.argv[1]
sys.path.insert(0, tree)
import bot.app.prometheus.source as ps
if ps.MAX_SERIES < 10**6 and not hasattr(ps, "MAX_POSITIONS"):
    ps.MAX_SERIES = 10**9
from bot.adapters.cli import main
sys.argv = ["specops", *sys.argv[2:]]
main()
"""

MODES = {"text": ("--format", "text"), "md": ("--format", "md"), "limit": ("--format", "text", "--limit", "50"),
         "problems": ("--format", "text", "--only-problems"), "json": ("--format", "json")}


def in_process(tree: Path, url: str, mode: str, repeat: int) -> dict[str, float]:
    runs = [_child(tree, url, mode, traced=False) for _ in range(repeat)]
    traced = _child(tree, url, mode, traced=True)
    return {"s": statistics.median(r["s"] for r in runs), "traced_mb": traced["traced_mb"],
            "rss_mb": max(r["rss_mb"] for r in runs), "workers_mb": max(r["workers_mb"] for r in runs),
            "lines": runs[0]["lines"]}


def _child(tree: Path, url: str, mode: str, traced: bool) -> dict[str, float]:
    p = subprocess.run([sys.executable, "-c", CHILD, str(tree), url, mode, "1" if traced else "0"],
                       capture_output=True, text=True, timeout=600, cwd=tree)
    if p.returncode != 0:
        raise SystemExit(f"{tree} {mode}: {p.stderr.strip()[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def command(tree: Path, url: str, mode: str, repeat: int) -> tuple[float, float, int]:
    """The whole command: median wall time, peak RSS (MB) and its exit code."""
    times, rss, code = [], 0.0, 0
    for _ in range(repeat):
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": str(tree)}
        t = time.perf_counter()
        with open(os.devnull, "wb") as null:
            proc = subprocess.Popen([sys.executable, "-c", COMMAND, str(tree), "fleet", "--prometheus", url,
                                     "--since", "1h", *MODES[mode]], stdout=null, stderr=subprocess.PIPE, env=env,
                                    cwd=tree)
            _, status, usage = os.wait4(proc.pid, 0)
        times.append(time.perf_counter() - t)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.stderr:
            proc.stderr.close()
        code = proc.returncode
        if code not in (0, 1):
            raise SystemExit(f"{tree} {mode}: exit {code}: {err[-2000:]}")
        rss = max(rss, usage.ru_maxrss / 1024)
    return statistics.median(times), rss, code


def _modes(tree: Path, modes: list[str]) -> list[str]:
    """A tree from before --limit and --only-problems is measured in the formats alone."""
    if "--only-problems" in (tree / "bot" / "app" / "verbs" / "fleet.py").read_text():
        return modes
    return [m for m in modes if m in ("text", "md", "json")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--checkout", action="append", type=Path, default=[],
                    help="another tree to measure beside this one (e.g. the one before the change)")
    ap.add_argument("--modes", default="text,md,limit,problems,json")
    ap.add_argument("--checkouts-only", action="store_true",
                    help="measure the --checkout trees only (e.g. `git archive HEAD`: a tree nobody edits meanwhile)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = args.modes.split(",")
    trees = [*args.checkout] + ([] if args.checkouts_only else [ROOT])
    with ExitStack() as stack:
        servers = {n: stack.enter_context(PrometheusAPI(n)) for n in sizes}
        print("| tree | instances | mode | fleet() + render (s) | traced peak (MB) | child RSS (MB) | "
              "workers' RSS (MB) | lines | command (s) | command RSS (MB) |")
        print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        table: dict[tuple[str, str, int], float] = {}
        for tree in trees:
            name = "this tree" if tree == ROOT else str(tree)
            for mode in _modes(tree, modes):
                for n in sizes:
                    url = servers[n].url
                    inner = in_process(tree, url, mode, args.repeat)
                    whole, rss, _ = command(tree, url, mode, args.repeat)
                    table[(name, mode, n)] = whole
                    print(f"| {name} | {n:,} | {mode} | {inner['s']:.2f} | {inner['traced_mb']:.0f} | "
                          f"{inner['rss_mb']:.0f} | {inner['workers_mb']:.0f} | {inner['lines']:.0f} | {whole:.2f} | "
                          f"{rss:.0f} |", flush=True)
        print()
        print("| tree | mode | command, " + " / ".join(f"{n:,}" for n in sizes) + " | ratio |")
        print("|---|---|---|---:|")
        for tree in trees:
            name = "this tree" if tree == ROOT else str(tree)
            for mode in _modes(tree, modes):
                times = [table[(name, mode, n)] for n in sizes]
                print(f"| {name} | {mode} | " + " / ".join(f"{t:.2f} s" for t in times)
                      + f" | {times[-1] / times[0]:.1f}x |")


if __name__ == "__main__":
    main()
