"""Benchmark: two `specops serve` replicas on one PostgreSQL against one on SQLite (issue 23), in one run.

    python bench/replicas.py [--concurrency 50] [--rounds 5] [--trials 3] [--leases 30,6]

1. Ack latency, as bench/ack.py measures it (a separate process sends `--concurrency` signed `/specops`
   commands at once, half `help`, half `status h1`; latency is request sent -> ack received), for (a) one
   replica on a SQLite file and (b) two replicas on one PostgreSQL with the commands spread over both
   (pairs round-robin: each replica gets half of each kind). The rounds of (a) and (b) alternate, so a change
   of the machine's load falls on both. Every command carries its own trigger id (ack.py's constant "t"
   would make all but the first a replay on PostgreSQL, where commands are deduped across replicas).
2. Failover: two replicas on a fresh PostgreSQL database per trial with `settings.lease_seconds` L and a
   watch every 2 s on a host at a closed 127.0.0.1 port; once the leader has written samples, it is SIGKILLed
   at a point of the standby's try cycle (it tries the seat every L/3): trial t of n at (t + 1/2)/n of it, so
   the trials span the cycle; measured: seconds until the standby's /healthz says "role": "leader", and until
   the first sample written after the kill appears in the `samples` table.

Real parts: `specops serve --http` subprocesses (tests/support/served.py), the Slack Web API emulator, a
PostgreSQL started here in a temporary directory (tests/support/postgres.py) and stopped at the end. 127.0.0.1
only; every process is stopped by its PID / process group.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from slack_sdk.signature import SignatureVerifier  # noqa: E402

from bot.config import Config, HostConfig, Profile, Settings  # noqa: E402
from tests.support.postgres import Postgres, missing_reason  # noqa: E402
from tests.support.served import Served, bot_config  # noqa: E402
from tests.support.slack_emulator import TEAM_ID, SlackEmulator  # noqa: E402
from tests.support.sshd import free_port  # noqa: E402

WATCH_INTERVAL = 2.0
T = TypeVar("T")


# --- the load, in its own process (as Slack's requests would come: the bots' CPU is what we measure) -----

def load(ports: list[int], concurrency: int, response_url: str) -> dict[str, Any]:
    verifier = SignatureVerifier(Served.secret)

    def one(i: int) -> tuple[float, str]:
        port = ports[(i // 2) % len(ports)]  # pairs round-robin: every replica gets both kinds
        body = urllib.parse.urlencode({
            "team_id": TEAM_ID, "channel_id": "C1", "user_id": f"U{i}", "command": "/specops",
            "text": "status h1" if i % 2 else "help", "response_url": response_url,
            "trigger_id": f"{time.time_ns()}.{os.getpid()}.{i}"})
        ts = str(int(time.time()))
        headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": ts,
                   "X-Slack-Signature": str(verifier.generate_signature(timestamp=ts, body=body))}
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        t0 = time.perf_counter()
        conn.request("POST", "/slack/events", body=body.encode(), headers=headers)
        resp = conn.getresponse()
        text = resp.read().decode(errors="replace")
        took = time.perf_counter() - t0
        conn.close()
        bad = ""
        if resp.status != 200:
            bad = f"HTTP {resp.status}"
        elif "already being handled" in text or "state store unavailable" in text:
            bad = text[:200]
        return took, bad

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for k in range(len(ports)):  # warm up each replica once
            one(2 * k)
        results = list(pool.map(one, range(concurrency)))
    return {"latencies": [r[0] for r in results], "bad": [r[1] for r in results if r[1]],
            "sent": concurrency + len(ports)}


def run_load(ports: list[int], concurrency: int, response_url: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--load", ",".join(map(str, ports)), "--concurrency",
                          str(concurrency), "--response-url", response_url],
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"the load process failed: {out.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


# --- helpers --------------------------------------------------------------------------------------------

def poll(cond: Callable[[], T | None], timeout: float, every: float = 0.05) -> T | None:
    """`cond()`'s first truthy value, or None after `timeout` s (a bench reports what it saw, never asserts)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(every)


def health(bot: Served) -> dict[str, Any]:
    try:
        return dict(httpx.get(f"{bot.url}/healthz", timeout=2, trust_env=False).json())
    except (httpx.HTTPError, ValueError):
        return {}


def config(work: Path, name: str, state: str, lease: float | None = None, interval: float = 0) -> Path:
    (work / "kh").touch()
    settings = Settings(state=state) if lease is None else Settings(state=state, lease_seconds=lease)
    cfg = Config(hosts={"h1": HostConfig(address="127.0.0.1", port=free_port(), user="x",  # nothing listens
                                         known_hosts=work / "kh", connect_timeout=2)},
                 profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3)},
                 settings=settings)
    path = work / f"{name}.json"
    path.write_text(bot_config(cfg, interval=interval).model_dump_json())
    return path


def stop(bots: list[Served]) -> None:
    """SIGTERM each still running bot's process group, SIGKILL the ones that do not go."""
    for bot in bots:
        if bot.proc.poll() is None:
            try:
                bot.kill(signal.SIGTERM)
            except subprocess.TimeoutExpired:
                os.killpg(bot.proc.pid, signal.SIGKILL)  # the session Served started
                bot.proc.wait(timeout=10)
        if not bot.log.closed:
            bot.log.close()
    bots.clear()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # as bench/ack.py


def scalar(engine: sa.Engine, sql: str) -> Any:
    with engine.connect() as db:
        return db.execute(sa.text(sql)).scalar()


def spread(values: list[float]) -> str:
    if not values:
        return "—"
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


# --- 1. ack latency ---------------------------------------------------------------------------------------

def bench_ack(pg: Postgres, emu: SlackEmulator, work: Path, concurrency: int, rounds: int,
              bots: list[Served]) -> list[str]:
    sqlite_cfg = config(work, "ack-sqlite", str(work / "specops.db"))
    pg_url = pg.create_database("bench_ack")
    pg_cfg = config(work, "ack-pg", pg_url)
    one = Served(work, sqlite_cfg, emu)
    bots.append(one)
    first = Served(work, pg_cfg, emu)
    bots.append(first)
    if poll(lambda: health(first).get("role") == "leader", 30) is None:
        raise RuntimeError(f"the first PostgreSQL replica did not lead within 30 s: {health(first)}")
    second = Served(work, pg_cfg, emu)
    bots.append(second)
    setups = {"a": [one.port], "b": [first.port, second.port]}
    latencies: dict[str, list[float]] = {"a": [], "b": []}
    bad: dict[str, list[str]] = {"a": [], "b": []}
    sent = {"a": 0, "b": 0}
    round_p99: dict[str, list[float]] = {"a": [], "b": []}
    for r in range(rounds):
        for key in ("a", "b") if r % 2 == 0 else ("b", "a"):
            got = run_load(setups[key], concurrency, emu.root_url + "r")
            latencies[key] += got["latencies"]
            bad[key] += got["bad"]
            sent[key] += got["sent"]
            round_p99[key].append(pct(got["latencies"], 0.99))
    # each command of (b) ran once: one audit row per command across the two replicas
    engine = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    try:
        rows = poll(lambda: (n := scalar(engine, "SELECT count(*) FROM audit WHERE source = 'slash'")) >= sent["b"]
                    and n, 30)
        audit_b = rows if rows is not None else scalar(engine, "SELECT count(*) FROM audit WHERE source = 'slash'")
    finally:
        engine.dispose()
    stop(bots)

    a, b = latencies["a"], latencies["b"]
    p50a, p99a, p50b, p99b = pct(a, 0.5), pct(a, 0.99), pct(b, 0.5), pct(b, 0.99)
    lines = [f"### Ack latency: {rounds} rounds of {concurrency} concurrent signed slash commands each "
             "(half `help`, half `status h1`), rounds of (a) and (b) alternating", "",
             "| setup | commands timed | p50 | p99 | max | p99 per round | answered wrongly |",
             "|---|---:|---:|---:|---:|---|---:|"]
    for key, label in (("a", "(a) one replica, SQLite"), ("b", "(b) two replicas, one PostgreSQL, round-robin")):
        vals = latencies[key]
        lines.append(f"| {label} | {len(vals)} | {pct(vals, 0.5) * 1000:.1f} ms | {pct(vals, 0.99) * 1000:.1f} ms "
                     f"| {max(vals) * 1000:.1f} ms | {', '.join(f'{p * 1000:.0f}' for p in round_p99[key])} ms "
                     f"| {len(bad[key])} |")
    lines.append(f"| ratio (b)/(a) | | {p50b / p50a:.2f}x | {p99b / p99a:.2f}x | {max(b) / max(a):.2f}x | | |")
    lines += ["", f"(b) audit rows for slash commands in PostgreSQL: {audit_b} of {sent['b']} sent "
              "(warm-ups included): each ran once, on one replica."]
    for key in ("a", "b"):
        if bad[key]:
            lines.append(f"({key}) wrong answers, first: {bad[key][0]!r}")
    return lines


# --- 2. failover ------------------------------------------------------------------------------------------

def failover_trial(pg: Postgres, emu: SlackEmulator, work: Path, lease: float, trial: int,
                   bots: list[Served], phase: float) -> dict[str, Any]:
    url = pg.create_database(f"bench_failover_{int(lease)}_{trial}")
    cfg = config(work, f"failover-{int(lease)}-{trial}", url, lease=lease, interval=WATCH_INTERVAL)
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        leader = Served(work, cfg, emu)
        bots.append(leader)
        if poll(lambda: health(leader).get("role") == "leader", 30) is None:
            return {"error": f"the first replica did not lead within 30 s: {health(leader)}"}
        standby = Served(work, cfg, emu)
        bots.append(standby)
        seen = poll(lambda: (h := health(standby)).get("role") == "standby" and h, 30)
        if not seen:
            return {"error": f"the second replica is not a standby: {health(standby)}"}
        if poll(lambda: scalar(engine, "SELECT count(*) FROM samples WHERE host = 'h1'") >= 2, 30) is None:
            return {"error": "the leader wrote no samples within 30 s"}
        # the kill lands at `phase` of the standby's try cycle (it tries the seat every lease/3, then beats:
        # its heartbeat row says when it last tried), so the trials cover the cycle instead of one spot of it
        cycle = lease / 3
        last_try = float(scalar(engine, f"SELECT heartbeat FROM replicas WHERE id = '{seen['replica']}'"))
        kill_at = last_try + phase * cycle
        while kill_at < time.time() + 0.05:
            kill_at += cycle
        time.sleep(kill_at - time.time())
        last_id = scalar(engine, "SELECT coalesce(max(id), 0) FROM samples")
        killed_at = time.time()
        leader.kill(signal.SIGKILL)
        with ThreadPoolExecutor(2) as watchers:  # both clocks run from the kill, side by side
            leads = watchers.submit(poll, lambda: health(standby).get("role") == "leader" and time.time(),
                                    2 * lease + 15)
            samples = watchers.submit(poll, lambda: scalar(engine, f"SELECT count(*) FROM samples WHERE id > "
                                                                   f"{last_id}") > 0 and time.time(),
                                      3 * lease + 30, 0.05)
            led_at, sampled_at = leads.result(), samples.result()
        out: dict[str, Any] = {"leader": None if led_at is None else led_at - killed_at,
                               "sample": None if sampled_at is None else sampled_at - killed_at}
        if led_at is None:
            out["error"] = f"the standby did not lead within {2 * lease + 15:.0f} s: {health(standby)}"
        return out
    finally:
        stop(bots)
        engine.dispose()


def bench_failover(pg: Postgres, emu: SlackEmulator, work: Path, leases: list[float], trials: int,
                   bots: list[Served]) -> list[str]:
    phases = ", ".join(f"{(t + 0.5) / trials:.2f}" for t in range(trials))
    lines = [f"### Failover: SIGKILL of the leader, {trials} trials per lease (watch every "
             f"{WATCH_INTERVAL:.0f} s on a host at a closed port)", "",
             f"The kills land at {phases} of the standby's try cycle (it tries the seat every lease/3), so a "
             "trial's failover is expected near (1 - phase) x lease/3 plus the take; seconds from the SIGKILL:", "",
             "| lease_seconds | try cycle | standby's /healthz says leader: min / median / max (s) | first sample of "
             "the new leader in `samples`: min / median / max (s) | trials (leader s, sample s) |",
             "|---:|---:|---|---|---|"]
    notes: list[str] = []
    for lease in leases:
        got = [failover_trial(pg, emu, work, lease, t, bots, (t + 0.5) / trials) for t in range(trials)]
        led = [g["leader"] for g in got if g.get("leader") is not None]
        sampled = [g["sample"] for g in got if g.get("sample") is not None]
        each = "; ".join("failed" if g.get("leader") is None else
                         f"{g['leader']:.2f}, {g['sample']:.2f}" if g.get("sample") is not None
                         else f"{g['leader']:.2f}, none" for g in got)
        default = " (default)" if lease == Settings().lease_seconds else ""
        lines.append(f"| {lease:g}{default} | {lease / 3:.1f} s | {spread(led)} | {spread(sampled)} | {each} |")
        notes += [f"lease {lease:g}, trial {i + 1}: {g['error']}" for i, g in enumerate(got) if g.get("error")]
    return lines + (["", *notes] if notes else [])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--leases", default="30,6", help="lease_seconds values, comma-separated (3 to 3600)")
    ap.add_argument("--load", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--response-url", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.load is not None:
        print(json.dumps(load([int(p) for p in args.load.split(",")], args.concurrency, args.response_url)))
        return
    try:
        leases = [float(x) for x in args.leases.split(",") if x.strip()]
    except ValueError:
        sys.exit(f"--leases: numbers separated by commas, not {args.leases!r}")
    if not leases or any(not 3 <= x <= 3600 for x in leases):
        sys.exit("--leases: each lease between 3 and 3600 seconds")
    if args.concurrency < 2 or args.rounds < 1 or args.trials < 1:
        sys.exit("--concurrency at least 2, --rounds and --trials at least 1")
    reason = missing_reason()
    if reason is not None:
        sys.exit(f"no PostgreSQL here: {reason}")

    load_before = os.getloadavg()
    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="specops-bench-replicas-"))
    pg = Postgres().start()
    emu = SlackEmulator().start()
    bots: list[Served] = []
    try:
        ack = bench_ack(pg, emu, work, args.concurrency, args.rounds, bots)
        failover = bench_failover(pg, emu, work, leases, args.trials, bots)
    finally:
        stop(bots)
        emu.stop()
        pg.stop()
    load_after = os.getloadavg()
    print(f"# bench/replicas.py — {time.strftime('%Y-%m-%d %H:%M', time.gmtime(started))} UTC, "
          f"{os.cpu_count()} cores, {time.time() - started:.0f} s; load average (1/5/15 min) "
          f"{'/'.join(f'{x:.2f}' for x in load_before)} at the start, "
          f"{'/'.join(f'{x:.2f}' for x in load_after)} at the end")
    print()
    print("\n".join(ack))
    print()
    print("\n".join(failover), flush=True)
    print(f"the bots' logs: {work}", file=sys.stderr)


if __name__ == "__main__":
    main()
