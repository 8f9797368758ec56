"""Benchmark: each speed device of `specops fleet` against its plain version, side by side in one run (issue 39).

    python3 bench/speed_devices.py [--instances 10000] [--repeat 3]

Three devices were added for a measured number; each is timed here as built and with that one device swapped for
the plain code it replaced, the rest unchanged, as the whole command a user runs (`specops fleet --prometheus URL
--since 1h --format F`, interpreter start and the output's redaction included) against the stand-in of
Prometheus' query API (tests/support/prometheus_api.py, on 127.0.0.1):
  - forked workers (bot/app/fleet.py `_judge_all`): plain is one process (`SPECOPS_FLEET_WORKERS=1`);
  - the fleet's JSON writer (bot/present/fleet.py `_json`, a `Vouched` text whose own parts the redactor skips):
    plain is `json.dumps(result.as_json(), indent=2, ensure_ascii=False)`, redacted whole;
  - the fleet's summary of a diagnosis (the rounding and headline without a Report): plain is `build_report`'s Report
    read back — what bot/app/fleet.py `_summary` is since this re-measure, so two trees side by side
    (`--tree BEFORE --tree .`) measure it: "as built" in each, with the forks left out of the older one.
A device stays when it pays more than 20% on the number it was added for (the whole command at 10,000 instances).
`--tree DIR` (repeatable) measures other trees in the same run, interleaved (e.g. `git archive ec371ed | tar -x -C
/tmp/before`, the tree that still had all three); in a tree without a device its variant runs the same code as "as
built". In text, the plain JSON variant runs the same code as "as built" too: the spread between them is the noise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.prometheus_api import PrometheusAPI  # noqa: E402

# the whole command, with one device swapped for its plain version before it runs
COMMAND = r"""
import sys
variant = sys.argv[1]
if variant == "plain-json":
    import json
    import bot.present.fleet as pf
    pf._json = lambda result: json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n"
from bot.adapters.cli import main
sys.argv = ["specops", *sys.argv[2:]]
main()
"""

VARIANTS = {
    "as built": ("as-built", {}),
    "one process (no forked workers)": ("as-built", {"SPECOPS_FLEET_WORKERS": "1"}),
    "plain JSON (json.dumps, redacted whole)": ("plain-json", {}),
}


def command(tree: Path, variant: str, extra: dict[str, str], url: str, fmt: str, home: str) -> tuple[float, bytes]:
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "PYTHONPATH": str(tree), **extra}  # an empty home: no config
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", COMMAND, variant, "fleet", "--prometheus", url, "--since", "1h",
                        "--format", fmt], capture_output=True, env=env, cwd=tree, timeout=900)
    took = time.perf_counter() - t
    if p.returncode not in (0, 1):
        raise SystemExit(f"{variant} {fmt}: exit {p.returncode}: {p.stderr.decode()[-2000:]}")
    return took, p.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--formats", default="text,json")
    ap.add_argument("--tree", type=Path, action="append", default=[],
                    help="a tree to measure (repeatable; default: this checkout)")
    args = ap.parse_args()
    formats = args.formats.split(",")
    trees: list[Path] = args.tree or [ROOT]
    with PrometheusAPI(args.instances) as server, tempfile.TemporaryDirectory() as home:
        times: dict[tuple[Path, str, str], list[float]] = {}
        outputs: dict[tuple[Path, str, str], bytes] = {}
        for _ in range(args.repeat):  # interleaved: a slow moment of the machine falls on every variant alike
            for tree in trees:
                for name, (variant, extra) in VARIANTS.items():
                    for fmt in formats:
                        took, out = command(tree, variant, extra, server.url, fmt, home)
                        times.setdefault((tree, name, fmt), []).append(took)
                        outputs[(tree, name, fmt)] = out
    for tree in trees:
        _table(tree, args.instances, args.repeat, formats, times, outputs)


def _table(tree: Path, instances: int, repeat: int, formats: list[str],
           times: dict[tuple[Path, str, str], list[float]], outputs: dict[tuple[Path, str, str], bytes]) -> None:
    print(f"`specops fleet` over {instances:,} instances, whole command, median of {repeat} "
          f"(interleaved), {os.cpu_count()} cores, tree {tree}")
    print()
    print("| variant | " + " | ".join(f"--format {f} (s)" for f in formats) + " | " +
          " | ".join(f"{f}: device's gain" for f in formats) + " | same output (last run) |")
    print("|---|" + "---:|" * (2 * len(formats)) + "---|")
    base = {f: statistics.median(times[(tree, "as built", f)]) for f in formats}
    for name in VARIANTS:
        med = {f: statistics.median(times[(tree, name, f)]) for f in formats}
        gains = [("—" if name == "as built" else f"{(med[f] - base[f]) / med[f]:+.0%}") for f in formats]
        same = all(outputs[(tree, name, f)] == outputs[(tree, "as built", f)] for f in formats)
        print(f"| {name} | " + " | ".join(f"{med[f]:.2f}" for f in formats) + " | " + " | ".join(gains)
              + f" | {'yes' if same else 'NO'} |")
    print()
    print("A device's gain: the share of the plain version's time the device saves (positive: the device is faster).")
    print()


if __name__ == "__main__":
    main()
