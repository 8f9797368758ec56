"""`specops eval DIR`: the diagnosis scored on real cases (a log, its context, what its thread established).

A case is a folder with `log.txt` (the log as quoted), `context.json` (the facts the thread gives:
method, vllm_version, num_speculative_tokens, drafter, model, drafter_config) and `expect.json`
(`verdict`, `expect_any`: tags any of which a right diagnosis names, `must_not`: tags it must not
name, `source`). Tags: `finding:<id>`, `upstream:<vllm PR or issue number>`, `family:<kb family>`.
Only findings that carry weight (critical or warning) name upstream threads and families; an
informational note never counts as naming a cause. A healthy case passes only with verdict healthy;
anything else there is a false alarm.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.app.diagnose import diagnose_text
from bot.core.kb import load_kb
from bot.core.report import Report
from bot.core.triage.context import Flags
from bot.errors import InputError

HYPOTHESIS_FAMILY = {
    "dflash-layer-offset": "acceptance-bug", "dflash-layer-offset-double": "acceptance-bug",
    "dflash-swa-full-attention": "acceptance-bug", "dflash-swa-needs-v2": "interface-refusal",
    "zero-acceptance": "acceptance-bug", "self-drafter-collapse": "acceptance-bug",
    "method-not-in-release": "interface-refusal",
}
MAX_LOG = 4 << 20


@dataclass
class CaseResult:
    name: str
    expected_verdict: str | None
    verdict: str
    expect_any: list[str]
    must_not: list[str]
    named: list[str]
    passed: bool
    why: str
    healthy_case: bool
    source: str = ""


@dataclass
class EvalResult:
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(1 for c in self.cases if c.passed)

    @property
    def healthy(self) -> list[CaseResult]:
        return [c for c in self.cases if c.healthy_case]

    @property
    def false_alarms(self) -> int:
        """Healthy cases called degraded or failing ('unknown' is a miss, not an alarm)."""
        return sum(1 for c in self.healthy if c.verdict in ("degraded", "failing"))

    @property
    def score(self) -> float:
        return self.passed / len(self.cases) if self.cases else 0.0

    def as_json(self) -> dict[str, Any]:
        return {"cases": [c.__dict__ for c in self.cases], "passed": self.passed, "total": len(self.cases),
                "score": round(self.score, 3), "healthy_cases": len(self.healthy), "false_alarms": self.false_alarms}


def tags_of(report: Report) -> list[str]:
    kb = load_kb()
    tags: list[str] = [f"verdict:{report.verdict}"]
    for f in report.findings:
        tags.append(f"finding:{f.id}")
        if f.severity not in ("critical", "warning"):
            continue
        entry = kb.get(f.id)
        family = entry.family if entry else HYPOTHESIS_FAMILY.get(f.id)
        if family:
            tags.append(f"family:{family}")
        tags += [f"upstream:{u.number}" for u in f.upstream if u.repo == "vllm-project/vllm"]
    return list(dict.fromkeys(tags))


def flags_of(context: dict[str, Any]) -> Flags:
    known = {"method", "vllm_version", "num_speculative_tokens", "drafter", "drafter_config", "baseline_tps"}
    args: dict[str, Any] = {k: v for k, v in context.items() if k in known and v is not None}
    if context.get("model"):
        args["target_model"] = context["model"]
    if isinstance(args.get("vllm_version"), int | float):
        args["vllm_version"] = str(args["vllm_version"])
    return Flags(**args)


def run_case(folder: Path) -> CaseResult:
    log = folder / "log.txt"
    if not log.is_file():
        raise InputError(f"{folder}: no log.txt")
    if log.stat().st_size > MAX_LOG:
        raise InputError(f"{folder}: log.txt is over {MAX_LOG >> 20} MiB")
    context = _json(folder / "context.json", required=False)
    expect = _json(folder / "expect.json", required=True)
    report = diagnose_text(log.read_text(encoding="utf-8", errors="replace"), flags_of(context),
                           source=str(log))
    named = tags_of(report)
    expected_verdict = expect.get("verdict")
    expect_any = [str(t) for t in expect.get("expect_any") or []]
    must_not = [str(t) for t in expect.get("must_not") or []]
    problems = []
    if expected_verdict and report.verdict != expected_verdict:
        problems.append(f"verdict {report.verdict}, not {expected_verdict}")
    if expect_any and not set(expect_any) & set(named):
        problems.append(f"names none of {', '.join(expect_any)}")
    wrong = sorted(set(must_not) & set(named))
    if wrong:
        problems.append(f"names {', '.join(wrong)}")
    return CaseResult(folder.name, expected_verdict, report.verdict, expect_any, must_not,
                      [t for t in named if not t.startswith("verdict:")], not problems, "; ".join(problems),
                      expected_verdict == "healthy", str(expect.get("source", "")))


def run(directory: Path) -> EvalResult:
    if not directory.is_dir():
        raise InputError(f"{directory} is not a folder of cases")
    folders = sorted(p for p in directory.iterdir() if p.is_dir() and (p / "expect.json").exists())
    if not folders:
        raise InputError(f"{directory} holds no case (a folder with log.txt, context.json, expect.json)")
    return EvalResult([run_case(f) for f in folders])


def _json(path: Path, required: bool) -> dict[str, Any]:
    if not path.exists():
        if required:
            raise InputError(f"{path.parent.name}: no {path.name}")
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a JSON object expected")
    return data
