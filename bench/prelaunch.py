"""Benchmark: `specops check` over SSH on the simulated host (issue 37 asks < 3 s), beside a bare SSH session
running `true`, so the ratio says what the checks cost over connecting at all (each check opens one session, as
each verb does).

    python bench/prelaunch.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.app.operations.prelaunch import prelaunch
from bot.engine.hosts import HostPool
from bot.sim.host import SimHost
from bot.sim.ports import free_port


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    sim = SimHost(stats_interval=1.0, startup_seconds=1.0).start()
    try:
        cfg = sim.config(port=free_port())
        pool = HostPool(cfg)
        rtt = []
        for _ in range(args.runs):
            t = time.monotonic()
            with pool.session("a6000") as s:
                s.run(["true"], timeout=30)
            rtt.append(time.monotonic() - t)
        base = statistics.median(rtt)
        print(f"an SSH session running `true`: median {base * 1000:.0f} ms")
        for profile in cfg.profiles:
            times = []
            for _ in range(args.runs):
                t = time.monotonic()
                report = prelaunch(cfg, profile, "a6000", hosts=pool)
                times.append(time.monotonic() - t)
            med = statistics.median(times)
            print(f"check {profile:<14} {report.status:<7} median {med:.2f} s, max {max(times):.2f} s "
                  f"({med / base:.1f}x the bare session; {len(report.checks)} checks)")
    finally:
        sim.cleanup()


if __name__ == "__main__":
    main()
