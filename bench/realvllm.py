"""Benchmark: a real vLLM 0.32.0 (CPU build) deployed and diagnosed over a real sshd on 127.0.0.1.

    python tests/support/realvllm.py && python bench/realvllm.py [--fixtures]

Measures, in one run: time to /health, time from the first request to the first SpecDecoding line,
the server's peak memory (all processes of its group), and specops' own overhead for deploy and
diagnose against the same work done by hand with `ssh` (upload the config, start vllm under setsid,
poll /health with curl, send a request, read the log). With --fixtures it also writes short excerpts
of the real log and a /metrics scrape to tests/fixtures/ (committed once, read by the triage tests).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bot.app.operations import ops  # noqa: E402
from bot.config import Config, Profile, VllmInstall  # noqa: E402
from tests.support import realvllm as prepare  # noqa: E402
from tests.support.graph import graph  # noqa: E402
from tests.support.sshd import Sshd, free_port  # noqa: E402

REPETITIVE = " ".join(["one two three four five six seven eight"] * 12)


def group_rss_mib(pgid: int) -> float:
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", action="store_true", help="write log and /metrics excerpts to tests/fixtures/")
    args = ap.parse_args()
    st = prepare.status()
    if not st.get("ready"):
        sys.exit(f"real vLLM not prepared: {st.get('reason')}")
    root = Path(tempfile.mkdtemp(prefix="specops-bench-realvllm-"))
    sshd = Sshd(root / "sshd").start()
    for d in ("srv", "cache", "tmp", "hand"):
        (root / d).mkdir()
    models = Path(str(st["models"]))
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_NO_USAGE_STATS": "1", "VLLM_CACHE_ROOT": str(root / "cache"), "TMPDIR": str(root / "tmp"),
           "VLLM_LOG_STATS_INTERVAL": "2"}
    port = free_port()
    profile = Profile(model=str(models / "tiny-a"), served_model_name="tiny", device="cpu", port=port,
                      vllm=VllmInstall(bin=str(prepare.vllm_bin()), version="0.32.0"),
                      extra_args={"max-model-len": 512, "dtype": "bfloat16", "enforce-eager": True}, env=env,
                      startup_timeout=300, probe_max_tokens=96, probe_prompt=REPETITIVE, method="ngram",
                      num_speculative_tokens=3, speculative_extra={"prompt_lookup_max": 4, "prompt_lookup_min": 2})
    host = {"address": "127.0.0.1", "port": sshd.port, "user": sshd.user, "key": sshd.client_key,
            "known_hosts": sshd.known_hosts, "workdir": str(root / "srv")}
    cfg = Config.model_validate({"hosts": {"cpu": host}, "profiles": {"ngram-cpu": profile.model_dump()},
                                 "settings": {"state": str(root / "specops.db")}})
    ssh = ["ssh", "-p", str(sshd.port), "-i", str(sshd.client_key), "-o", f"UserKnownHostsFile={sshd.known_hosts}",
           "-o", "BatchMode=yes", f"{sshd.user}@127.0.0.1"]
    results: dict[str, float] = {}
    try:
        # --- a first deploy: cold caches (what a new host sees) ------------------------------------------
        t0 = time.monotonic()
        report = ops.deploy(ops.HostRequest(cfg, "cpu", "ngram-cpu", **graph(cfg)))
        results["specops_deploy_cold"] = time.monotonic() - t0
        assert report.operation is not None and report.operation.status == "changed", report.headline
        results["time_to_health_cold"] = {s.name: s.duration for s in report.operation.steps}["wait for /health"]
        if args.fixtures:
            time.sleep(5)
            httpx.post(f"http://127.0.0.1:{port}/v1/completions", timeout=60, json={
                "model": "tiny", "prompt": REPETITIVE, "max_tokens": 64, "temperature": 0, "ignore_eos": True})
            time.sleep(4)
            write_fixtures(root / "srv" / "server.log", port)
        ops.stop(ops.HostRequest(cfg, "cpu", **graph(cfg)))
        # --- deploy by hand over ssh (warm) -------------------------------------------------------------
        hand = root / "hand"
        (hand / "server.yaml").write_text((root / "srv" / "server.yaml").read_text())
        envs = " ".join(f"{k}={v}" for k, v in env.items())
        body = shlex.quote(json.dumps({"model": "tiny", "prompt": REPETITIVE, "max_tokens": 96, "temperature": 0,
                                       "ignore_eos": True}))
        t4 = time.monotonic()
        subprocess.run(["scp", "-q", "-P", str(sshd.port), "-i", str(sshd.client_key), "-o",
                        f"UserKnownHostsFile={sshd.known_hosts}", str(hand / "server.yaml"),
                        f"{sshd.user}@127.0.0.1:{hand}/uploaded.yaml"], check=True)
        subprocess.run([*ssh, f"cd {hand} && setsid -f sh -c 'echo $$ > pid; exec env {envs} {prepare.vllm_bin()} "
                              f"serve {models / 'tiny-a'} --config {hand}/uploaded.yaml > log 2>&1 < /dev/null' "
                              f"> /dev/null 2>&1 < /dev/null"], check=True)
        while subprocess.run([*ssh, f"curl -fsS http://127.0.0.1:{port}/health"], capture_output=True).returncode:
            time.sleep(1)
        subprocess.run([*ssh, f"curl -fsS http://127.0.0.1:{port}/v1/completions -H 'Content-Type: application/json'"
                              f" -d {body}"], check=True, capture_output=True)
        while subprocess.run([*ssh, f"grep -q 'SpecDecoding metrics' {hand}/log"]).returncode != 0:
            time.sleep(0.5)
        results["hand_deploy"] = time.monotonic() - t4
        os.killpg(int((hand / "pid").read_text()), 15)  # the session the hand-started server runs in
        while group_rss_mib(int((hand / "pid").read_text())) > 0:
            time.sleep(0.2)
        # --- specops deploy (warm) ------------------------------------------------------------------------
        t0 = time.monotonic()
        report = ops.deploy(ops.HostRequest(cfg, "cpu", "ngram-cpu", **graph(cfg)))
        results["specops_deploy"] = time.monotonic() - t0
        assert report.operation is not None and report.operation.status == "changed", report.headline
        steps = {s.name: s.duration for s in report.operation.steps}
        results["time_to_health"] = steps["wait for /health"]
        pid = int((root / "srv" / "server.pid").read_text())
        log = root / "srv" / "server.log"
        # first request -> first SpecDecoding line (a fresh request after an idle period)
        time.sleep(3)
        before = log.read_text().count("SpecDecoding metrics")
        t1 = time.monotonic()
        httpx.post(f"http://127.0.0.1:{port}/v1/completions", timeout=60,
                   json={"model": "tiny", "prompt": REPETITIVE, "max_tokens": 64, "temperature": 0, "ignore_eos": True})
        while log.read_text().count("SpecDecoding metrics") == before and time.monotonic() - t1 < 30:
            time.sleep(0.05)
        results["first_request_to_metrics_line"] = time.monotonic() - t1
        results["server_rss_mib"] = group_rss_mib(pid)
        # --- diagnose: specops, then by hand over ssh ------------------------------------------------------
        t2 = time.monotonic()
        diag = ops.diagnose_host(ops.HostRequest(cfg, "cpu", **graph(cfg)))
        results["specops_diagnose"] = time.monotonic() - t2
        results["server_rss_mib"] = max(results["server_rss_mib"], group_rss_mib(pid))
        assert diag.metrics.mean_acceptance_length is not None
        t3 = time.monotonic()
        for cmd in (f"curl -fsS http://127.0.0.1:{port}/health", f"curl -fsS http://127.0.0.1:{port}/metrics",
                    f"curl -fsS http://127.0.0.1:{port}/v1/completions -H 'Content-Type: application/json' -d {body}",
                    "sleep 2.5", f"curl -fsS http://127.0.0.1:{port}/metrics",
                    f"grep 'SpecDecoding metrics' {log} | tail -3", f"{prepare.vllm_bin()} --version"):
            subprocess.run([*ssh, cmd], check=True, capture_output=True)
        results["hand_diagnose"] = time.monotonic() - t3
    finally:
        try:
            ops.stop(ops.HostRequest(cfg, "cpu", **graph(cfg)))
        finally:
            sshd.stop()
    print(f"# bench/realvllm.py — {time.strftime('%Y-%m-%d %H:%M')} UTC, {os.cpu_count()} cores, vLLM "
          f"{st.get('vllm')} (CPU build), tiny Llama, ngram 3 tokens, real sshd on 127.0.0.1")
    print()
    print("| what | seconds / MiB |")
    print("|---|---:|")
    print(f"| time to /health, first start on the machine (cold caches) | {results['time_to_health_cold']:.1f} s |")
    print(f"| time to /health (vllm serve start -> 200, warm) | {results['time_to_health']:.1f} s |")
    print(f"| first request -> first SpecDecoding line | {results['first_request_to_metrics_line']:.1f} s |")
    print(f"| server resident memory, all its processes | {results['server_rss_mib']:.0f} MiB |")
    print(f"| `deploy` with specops, cold (the first deploy) | {results['specops_deploy_cold']:.1f} s |")
    print(f"| `deploy` with specops, warm (pre-flight, config, start, /health, probe, metrics, triage) | "
          f"{results['specops_deploy']:.1f} s |")
    print(f"| the same by hand over ssh, warm (scp, setsid, curl /health loop, a request, the metrics line) | "
          f"{results['hand_deploy']:.1f} s |")
    print(f"| `diagnose` with specops (one pass, with a probe) | {results['specops_diagnose']:.1f} s |")
    print(f"| the same by hand over ssh (7 commands) | {results['hand_diagnose']:.1f} s |")


def write_fixtures(log: Path, port: int) -> None:
    lines = log.read_text(errors="replace").splitlines()
    keep = [ln for ln in lines if any(k in ln for k in ("non-default args", "Initializing a V1 LLM engine",
                                                         "Starting vLLM", "Application startup complete",
                                                         "Engine 000:", "SpecDecoding metrics"))]
    head = [ln for ln in keep if "Engine 000" not in ln and "SpecDecoding" not in ln][:4]
    tail = [ln for ln in keep if "Engine 000" in ln or "SpecDecoding" in ln][-6:]
    out = ROOT / "tests" / "fixtures"
    (out / "real-vllm-0.32.0-ngram.log").write_text("\n".join(head + tail) + "\n")
    metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    spec = [ln for ln in metrics.splitlines() if "spec_decode" in ln]
    (out / "real-vllm-0.32.0.prom").write_text("\n".join(spec) + "\n")


if __name__ == "__main__":
    main()
