"""Score cases strictly on the reports of another tree (a frozen commit), with this tree's scoring rules.

    git archive 453cbf3 | tar -x -C /tmp/frozen-453cbf3
    python3 bench/eval_frozen.py --checkout /tmp/frozen-453cbf3 tests/cases-sixth [DIR ...] [--cases-only]

The checkout diagnoses each case's log in a child process (its own `bot` on PYTHONPATH, its own knowledge base and
atlas) and prints each report's JSON; this tree scores them (bot.app.evaluation.evaluate.score_case), so a batch's
first-sight number is what that commit said of it, judged by today's strict rule. Prints the same table as `specops
eval`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_CHILD = r"""
import json, sys
from pathlib import Path
try:
    from bot.app.diagnosis.diagnose import diagnose_text
    from bot.app.evaluation.evaluate import flags_of
except ImportError:  # a tree from before app/ had a sub-package per use case
    from bot.app.diagnose import diagnose_text
    from bot.app.evaluate import flags_of
for folder in sys.argv[1:]:
    f = Path(folder)
    ctx = json.loads((f / "context.json").read_text()) if (f / "context.json").exists() else {}
    log = f / "log.txt"
    report = diagnose_text(log.read_text(encoding="utf-8", errors="replace"), flags_of(ctx), source=str(log))
    print(json.dumps({"folder": folder, "report": report.model_dump(mode="json")}))
"""


def reports_of(checkout: Path, folders: list[Path]) -> dict[str, dict[str, object]]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    out = subprocess.run([sys.executable, "-c", _CHILD, *map(str, folders)], capture_output=True, text=True,
                         env=env, cwd=str(checkout), check=True, timeout=1800).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {str(r["folder"]): r["report"] for r in rows}  # type: ignore[misc]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkout", type=Path, required=True, help="a tree of another commit (git archive | tar -x)")
    ap.add_argument("dirs", type=Path, nargs="+")
    ap.add_argument("--summary", action="store_true", help="only the totals")
    args = ap.parse_args(argv)
    from bot.app.evaluation.evaluate import EvalResult, _json, cited_threads, score_case
    from bot.core.report import Report
    from bot.present.kb import eval_lines

    cited = cited_threads()
    for d in args.dirs:
        folders = sorted(p.resolve() for p in d.iterdir() if p.is_dir() and (p / "expect.json").exists())
        reports = reports_of(args.checkout.resolve(), folders)
        result = EvalResult([score_case(f.name, Report.model_validate(reports[str(f)]),
                                        _json(f / "expect.json", required=True), cited) for f in folders])
        lines = eval_lines(result)
        print(f"== {d} on {args.checkout}")
        print("\n".join(lines[-4:] if args.summary else lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
