"""Benchmark: acknowledgement latency of the Slack bot under concurrent signed slash commands, and
the idle bot's resident memory.

    python bench/ack.py [--concurrency 50] [--rounds 5]

The bot runs in HTTP mode (bolt behind specops' server) with the Slack Web API emulator of the
tests on 127.0.0.1; every request is signed. Half the commands are `status a6000` (they start a
job on the bounded pool), half are `help`; the latency is request sent -> ack received.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from slack_sdk.signature import SignatureVerifier  # noqa: E402

from bot.adapters.slack.bot import SpecopsBot  # noqa: E402
from bot.adapters.slack.http_server import SlackHTTPServer  # noqa: E402
from bot.adapters.slack.settings import SlackSecrets  # noqa: E402
from bot.config import Access, Config, HostConfig, Profile, Settings, SlackSettings  # noqa: E402
from tests.support.slack_emulator import SlackEmulator  # noqa: E402

SECRET = "bench-signing-secret"


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def load(port: int, concurrency: int, rounds: int, response_url: str) -> list[float]:
    verifier = SignatureVerifier(SECRET)

    def one(i: int) -> float:
        body = urllib.parse.urlencode({
            "team_id": "T0", "channel_id": "C0", "user_id": f"U{i}", "command": "/specops",
            "text": "status a6000" if i % 2 else "help", "response_url": response_url, "trigger_id": "t"})
        ts = str(int(time.time()))
        headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": ts,
                   "X-Slack-Signature": verifier.generate_signature(timestamp=ts, body=body)}
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        t0 = time.perf_counter()
        conn.request("POST", "/slack/events", body=body.encode(), headers=headers)
        resp = conn.getresponse()
        resp.read()
        took = time.perf_counter() - t0
        conn.close()
        assert resp.status == 200, resp.status
        return took

    latencies: list[float] = []
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        one(0)  # warm up
        for _ in range(rounds):
            latencies += list(pool.map(one, range(concurrency)))
    return latencies


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--load", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--response-url", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.load is not None:
        print(json.dumps(load(args.load, args.concurrency, args.rounds, args.response_url)))
        return
    work = Path(tempfile.mkdtemp(prefix="specops-bench-ack-"))
    # a host that does not answer quickly: jobs queue up and fail slowly, as on a busy day
    cfg = Config(hosts={"a6000": HostConfig(address="127.0.0.1", port=9, user="x", known_hosts=work / "kh",
                                            connect_timeout=2)},
                 profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3)},
                 settings=Settings(state=work / "specops.db"),
                 slack=SlackSettings(deployers=Access(users=["UDEPLOY"])))
    (work / "kh").write_text("")
    emu = SlackEmulator().start()
    rss_before = rss_mib()
    bot = SpecopsBot(cfg, SlackSecrets(slack_bot_token="xoxb-bench-000000", slack_signing_secret=SECRET,
                                       specops_slack_api_url=emu.base_url))
    server = SlackHTTPServer(bot.app, "127.0.0.1", 0).start()

    try:
        time.sleep(1.0)
        rss_idle = rss_mib()
        # the load comes from another process, as Slack's requests would: the bot's own CPU is what we measure
        out = subprocess.run([sys.executable, __file__, "--load", str(server.port), "--concurrency",
                              str(args.concurrency), "--rounds", str(args.rounds), "--response-url",
                              emu.root_url + "r"], capture_output=True, text=True, check=True, timeout=300)
        latencies = json.loads(out.stdout)
        rss_after = rss_mib()
    finally:
        server.stop()
        bot.shutdown()
        emu.stop()
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"# bench/ack.py — {time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores, "
          f"{args.rounds} rounds of {args.concurrency} concurrent signed slash commands (HTTP mode, loopback)")
    print()
    print("| what | value |")
    print("|---|---:|")
    print(f"| ack latency p50 | {p50 * 1000:.1f} ms |")
    print(f"| ack latency p99 (goal < 100 ms) | {p99 * 1000:.1f} ms |")
    print(f"| ack latency max | {latencies[-1] * 1000:.1f} ms |")
    print(f"| resident memory, process before the bot | {rss_before:.1f} MiB |")
    print(f"| resident memory, idle bot (process total) | {rss_idle:.1f} MiB |")
    print(f"| resident memory after the load | {rss_after:.1f} MiB (peak {peak:.1f} MiB) |")


if __name__ == "__main__":
    main()
