"""Benchmark: /healthz latency of a served bot, idle and while hostile pastes are diagnosed (issue 36).

    python bench/healthz.py [--pastes 4] [--polls 40]

`specops serve --http` runs as a user runs it (tests.support.served), with the Slack Web API emulator of the
tests on 127.0.0.1; the pastes are the ones tests/adapters/slack/test_bot_health.py sends (a line built to make
a matcher backtrack, an escaped secret on every line, a long unbroken value). Side by side in one run: the same
number of /healthz polls with nothing to diagnose, then while the pastes are diagnosed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.config import Config, HostConfig, Profile, Settings  # noqa: E402
from tests.support.served import Served, bot_config  # noqa: E402
from tests.support.slack_emulator import SlackEmulator  # noqa: E402


def _paste() -> str:
    eplb = "Model: a with config " + "x " * 400 + "mismatch with new model b"
    lines = [eplb, "ERROR password=" + "y" * 3000, '{"token": "ab\\u002d' + "z" * 2000 + '"}'] * 8
    return "\n".join(lines)[:38_000]


def _poll(url: str, n: int, until: Callable[[], bool] | None = None, deadline_s: float = 300) -> list[float]:
    took: list[float] = []
    deadline = time.monotonic() + deadline_s
    while len(took) < n or (until is not None and not until()):
        assert time.monotonic() < deadline, "the pastes were not answered in time"
        t0 = time.perf_counter()
        r = httpx.get(f"{url}/healthz", timeout=30, trust_env=False)
        took.append(time.perf_counter() - t0)
        assert r.status_code == 200, r.text
        time.sleep(0.05)
    return took


def _row(what: str, took: list[float]) -> str:
    took = sorted(took)
    p50 = statistics.median(took)
    return f"| {what} | {len(took)} | {p50 * 1000:.1f} ms | {took[-1] * 1000:.1f} ms |"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pastes", type=int, default=4)
    ap.add_argument("--polls", type=int, default=40)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="specops-bench-healthz-"))
    (work / "kh").write_text("")
    cfg = Config(hosts={"a6000": HostConfig(address="127.0.0.1", port=9, user="x", known_hosts=work / "kh",
                                            connect_timeout=2)},
                 profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3)},
                 settings=Settings(state=work / "specops.db"))
    path = work / "specops.json"
    path.write_text(bot_config(cfg).model_dump_json())
    emu = SlackEmulator().start()
    bot = Served(work, path, emu)
    try:
        idle = _poll(bot.url, args.polls)
        paste = _paste()
        sent = []
        for n in range(args.pastes):
            ts = f"1700000{n}00.000100"
            event = {"type": "app_mention", "user": "UMEMBER", "text": f"<@U0BOT> diagnose ```{paste}```",
                     "ts": ts, "channel": "C1", "event_ts": ts, "team": "T0TEST"}
            body = json.dumps({"token": "legacy", "team_id": "T0TEST", "api_app_id": "A0TEST",
                               "type": "event_callback", "event_id": f"Ev{n}{time.time_ns()}",
                               "event_time": int(time.time()), "event": event})
            assert bot.signed(body, "application/json").status_code == 200
            sent.append(ts)
        t0 = time.perf_counter()
        busy = _poll(bot.url, 1, until=lambda: all(emu.thread(ts) for ts in sent))
        diagnosed = time.perf_counter() - t0
    finally:
        bot.kill(15)
        emu.stop()
    print(f"# bench/healthz.py — {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} cores, "
          f"{args.pastes} pastes of {len(paste)} characters, `specops serve --http` on loopback")
    print()
    print("| /healthz | polls | p50 | max |")
    print("|---|---:|---:|---:|")
    print(_row("idle", idle))
    print(_row(f"while the pastes are diagnosed ({diagnosed:.1f} s)", busy))


if __name__ == "__main__":
    main()
