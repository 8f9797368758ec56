"""Benchmark: the redactor on gitleaks' rule set (bot/redact.py) against the hand patterns it replaced, side
by side in one run. Not a test; run it and paste the table into bench/RESULTS.md.

    python bench/bench_redact.py [--lines 10000] [--repeat 5]

Two texts, the way the sinks see them: a realistic vLLM server log (Engine and SpecDecoding metrics lines,
access lines, a traceback, a few secrets), redacted line by line as the log filter and the stored samples do;
and a Slack report (a diagnosis rendered as Block Kit JSON), redacted through `.obj`. Medians of --repeat runs;
the ratio new/old is what to watch (the new one runs ~220 more patterns, only where their keywords occur).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.redact import Redactor, rule_set  # noqa: E402

MASK = "(redacted)"

# The hand patterns of bot/redact.py before issue 21, kept here only as the baseline.
OLD_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S),
     "(redacted private key)"),
    (re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{6,}"), MASK),
    (re.compile(r"\bxapp-[A-Za-z0-9-]{6,}"), MASK),
    (re.compile(r"\bhf_[A-Za-z0-9]{16,}"), MASK),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), MASK),
    (re.compile(r"(?i)(authorization\s*[:=]\s*(?:bearer|basic|token)\s+)[^\s\"',]+"), r"\1" + MASK),
    (re.compile(r"(?i)(?<![a-z0-9])([a-z0-9_]*(?:pass(?:word|wd)?|secret|token|api[_-]?key|access[_-]?key|"
                r"credentials?|auth))(\"?'?\s*[:=]\s*\"?'?)([^\s\"',;}]{3,})"), r"\1\2" + MASK),
    (re.compile(r"(?i)(--[a-z0-9-]*(?:api-key|token|password|secret)[ =])(\S+)"), r"\1" + MASK),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s@/]+@"), r"\1" + MASK + "@"),
    (re.compile(r"\b((?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16})\b"), MASK),
    (re.compile(r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])"
                r"(?=[A-Za-z0-9/+]{0,39}[0-9])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"), MASK),
)


def old_text(value: str) -> str:
    for pattern, repl in OLD_PATTERNS:
        value = pattern.sub(repl, value)
    return value


def old_obj(value: Any) -> Any:
    if isinstance(value, str):
        return old_text(value)
    if isinstance(value, dict):
        return {k: old_obj(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [old_obj(v) for v in value]
    return value


def vllm_log(lines: int) -> list[str]:
    out: list[str] = []
    for i in range(lines):
        ts = f"12-01 10:{i // 60 % 60:02d}:{i % 60:02d}"
        k = i % 10
        if k == 0:
            out.append(f"(APIServer pid=1) INFO {ts} [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
                       f"2.{i % 90:02d}, Accepted throughput: 41.20 tokens/s, Drafted throughput: 98.00 tokens/s, "
                       f"Accepted: 412 tokens, Drafted: 980 tokens, Per-position acceptance rate: 0.811, 0.602, "
                       f"0.433, Avg Draft acceptance rate: 42.0%")
        elif k == 1:
            out.append(f"(APIServer pid=1) INFO {ts} [loggers.py:123] Engine 000: Avg prompt throughput: 812.4 "
                       f"tokens/s, Avg generation throughput: 96.1 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV "
                       f"cache usage: 37.5%, Prefix cache hit rate: 61.2%")
        elif k == 9 and i % 1000 == 9:
            out.append(f"(APIServer pid=1) ERROR {ts} [serving.py:77] upstream https://bob:pa/ss99word@127.0.0.1/x "
                       f"refused; HF_TOKEN=hf_{'Ab1' * 11}")
        elif k == 8 and i % 500 == 8:
            out.append("Traceback (most recent call last):\n  File \"/usr/lib/python3/site-packages/vllm/engine.py\", "
                       "line 412, in step\n    raise RuntimeError(\"CUDA out of memory\")")
        else:
            out.append(f"(APIServer pid=1) INFO:     127.0.0.1:{40000 + i % 20000} - \"POST /v1/chat/completions "
                       f"HTTP/1.1\" 200 OK")
    return out


def slack_report() -> dict[str, Any]:
    text = ("*diagnose a6000:* :large_green_circle: healthy — mean acceptance length 3.37 (z-lab/Qwen3.6-27B-DFlash "
            "on vLLM 0.20.1, num_speculative_tokens 15)\n• per-position acceptance 0.91, 0.82, 0.71, 0.60, 0.49\n"
            "• Accepted throughput 41.2 tokens/s; drafted 98.0 tokens/s; GPU KV cache usage 37.5%\n"
            "• see vllm#40727 and docs/ACCEPTANCE.md; estimated speedup ≈ 2.78×")
    return {"channel": "C0CHAN", "text": text.splitlines()[0], "blocks": [
        {"type": "header", "text": {"type": "plain_text", "text": "Healthy: mean acceptance length 3.37"}},
        *({"type": "section", "text": {"type": "mrkdwn", "text": line}} for line in text.splitlines()),
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "source /srv/specops/server.log · 30 samples"}]}]}


def timed(fn: Callable[[], object], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    start = time.perf_counter()
    rs = rule_set()
    print(f"rule set: {rs.compiled}/{rs.loaded} gitleaks rules compiled (skipped: {', '.join(rs.skipped) or 'none'}),"
          f" {len(rs.rules) - rs.compiled} specops rules; built in {time.perf_counter() - start:.3f} s")
    new = Redactor(["configured-secret-value-1"])
    log, report = vllm_log(args.lines), slack_report()
    assert [new.text(line) for line in log] != log  # the planted secrets are found
    cases = [
        (f"vLLM log, {args.lines} lines, line by line",
         lambda: [old_text(line) for line in log], lambda: [new.text(line) for line in log]),
        (f"vLLM log, {args.lines} lines, one string",
         lambda: old_text("\n".join(log)), lambda: new.text("\n".join(log))),
        ("Slack report (Block Kit), x200",
         lambda: [old_obj(report) for _ in range(200)], lambda: [new.obj(report) for _ in range(200)]),
    ]
    print(f"{'text':<40} {'old (s)':>9} {'new (s)':>9} {'new/old':>8}")
    for name, old_fn, new_fn in cases:
        o, n = timed(old_fn, args.repeat), timed(new_fn, args.repeat)
        print(f"{name:<40} {o:9.4f} {n:9.4f} {n / o:7.2f}x")


if __name__ == "__main__":
    main()
