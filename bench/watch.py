"""Benchmark: 16 simulated hosts watched every 10 s for 10 minutes.

    python bench/watch.py [--hosts 16] [--interval 10] [--minutes 10]

Three processes, so that each is measured alone: the fleet (16 simulated A6000 hosts, each with its
in-process SSH server and a running fake vLLM, plus a little traffic), and the bot's scheduler,
whose CPU time and resident memory are read from /proc. Goals: no missed run, the scheduler under
5% of one core on average, resident memory growing less than 5% from minute 2 to minute 10.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bot.redact import Redactor
from tests.support.graph import graph

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def fleet(n: int, interval: float, out: Path) -> None:
    """Process A: the simulated hosts, each with a deployed fake vLLM and some traffic."""
    import httpx

    from bot.app.operations import ops
    from bot.config import Config, Settings, WatchSettings
    from bot.sim.host import SimHost
    from tests.support.sshd import free_port

    sims = [SimHost(stats_interval=5.0, startup_seconds=0.3, max_request_seconds=0.2).start() for _ in range(n)]
    hosts, profiles = {}, {}
    state = out.parent / "specops.db"
    for i, sim in enumerate(sims):
        port = free_port()
        cfg = sim.config(host_name=f"h{i:02d}", port=port)
        profile = cfg.profiles["mtp"].model_copy(deep=True)
        hosts[f"h{i:02d}"] = cfg.hosts[f"h{i:02d}"]
        profiles[f"mtp-{i:02d}"] = profile
        one = Config(hosts={f"h{i:02d}": cfg.hosts[f"h{i:02d}"]}, profiles={f"mtp-{i:02d}": profile},
                     settings=Settings(state=out.parent / f"deploy-{i}.db"))
        rep = ops.deploy(ops.HostRequest(one, f"h{i:02d}", f"mtp-{i:02d}", probe=False, **graph(one)))
        assert rep.operation is not None and rep.operation.status == "changed", rep.headline
    cfg = Config(hosts=hosts, profiles=profiles, settings=Settings(state=state),
                 watch=WatchSettings(interval=interval, report_cron=None))
    out.write_text(cfg.model_dump_json())
    stop = threading.Event()

    def traffic() -> None:
        while not stop.is_set():
            for p in profiles.values():
                try:
                    httpx.post(f"http://127.0.0.1:{p.port}/v1/completions", timeout=10,
                               json={"model": p.served_model_name, "prompt": "hi", "max_tokens": 16})
                except httpx.HTTPError:
                    pass
            stop.wait(5)

    threading.Thread(target=traffic, daemon=True).start()
    print("ready", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    for sim in sims:
        pid_file = sim.root / "srv/specops/server.pid"
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
        sim.cleanup()


def bot_scheduler(config_path: Path, minutes: float, out: Path) -> None:
    """Process B: the scheduler with one watch job per host, as `specops serve` runs it."""
    from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MISSED

    from bot.adapters import scheduler
    from bot.adapters.print_notifier import PrintNotifier
    from bot.config import load_config

    cfg = load_config(config_path)
    from bot.app.services import build_services

    scheduler.install(build_services(cfg, notifier=PrintNotifier(say=lambda *_: None)))
    counts = {"executed": 0, "missed": 0, "error": 0}

    def listen(event: object) -> None:
        code = getattr(event, "code", 0)
        key = "executed" if code == EVENT_JOB_EXECUTED else "missed" if code == EVENT_JOB_MISSED else "error"
        counts[key] += 1

    sched = scheduler.Scheduler(cfg)
    sched.scheduler.add_listener(listen, EVENT_JOB_EXECUTED | EVENT_JOB_MISSED | EVENT_JOB_ERROR)
    sched.start()

    def cpu() -> float:
        t = os.times()
        return t.user + t.system

    def rss() -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    t0, c0 = time.monotonic(), cpu()
    marks: dict[str, float] = {}
    while (elapsed := time.monotonic() - t0) < minutes * 60:
        if "rss2" not in marks and elapsed >= min(120.0, minutes * 60 * 0.2):
            marks["rss2"] = rss()
        time.sleep(1)
    c1 = cpu()
    marks["rss_end"] = rss()
    sched.shutdown()
    out.write_text(json.dumps({"counts": counts, "cpu_seconds": c1 - c0, "wall": time.monotonic() - t0, **marks}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=16)
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--role", choices=["main", "fleet", "scheduler"], default="main", help=argparse.SUPPRESS)
    ap.add_argument("--file", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role == "fleet":
        fleet(args.hosts, args.interval, args.file)
        return
    if args.role == "scheduler":
        bot_scheduler(args.file, args.minutes, args.out)
        return
    work = Path(tempfile.mkdtemp(prefix="specops-bench-watch-"))
    cfg_file, result = work / "fleet.json", work / "result.json"
    fleet_proc = subprocess.Popen([sys.executable, __file__, "--role", "fleet", "--hosts", str(args.hosts),
                                   "--interval", str(args.interval), "--file", str(cfg_file)], cwd=ROOT,
                                  stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert fleet_proc.stdout is not None and fleet_proc.stdout.readline().strip() == "ready"
        subprocess.run([sys.executable, __file__, "--role", "scheduler", "--minutes", str(args.minutes),
                        "--file", str(cfg_file), "--out", str(result)], cwd=ROOT, check=True)
    finally:
        os.killpg(fleet_proc.pid, signal.SIGTERM)  # the fleet's own session: its hosts and fake vLLMs
        try:
            fleet_proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(fleet_proc.pid, signal.SIGKILL)
    data = json.loads(result.read_text())
    from bot.store.facade import Store

    store = Store(work / "specops.db", Redactor())
    per_host = [len(store.samples.for_host(f"h{i:02d}")) for i in range(args.hosts)]
    expected = int(args.minutes * 60 / args.interval) * args.hosts
    cpu_pct = 100 * data["cpu_seconds"] / data["wall"]
    growth = 100 * (data["rss_end"] - data["rss2"]) / data["rss2"]
    print(f"# bench/watch.py — {time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores, {args.hosts} simulated "
          f"hosts, a watch every {args.interval:g} s for {args.minutes:g} min")
    print()
    print("| what | value |")
    print("|---|---:|")
    print(f"| watch runs executed / expected | {data['counts']['executed']} / ~{expected} |")
    print(f"| missed runs (goal 0) | {data['counts']['missed']} |")
    print(f"| failed runs | {data['counts']['error']} |")
    print(f"| samples stored per host (min–max) | {min(per_host)}–{max(per_host)} |")
    print(f"| scheduler CPU, average (goal < 5% of one core) | {cpu_pct:.2f}% |")
    print(f"| resident memory at minute 2 → end | {data['rss2']:.1f} → {data['rss_end']:.1f} MiB |")
    print(f"| growth (goal < 5%) | {growth:+.2f}% |")


if __name__ == "__main__":
    main()
