"""`specops eval DIR`: the diagnosis scored on real cases (a log, its context, what its thread established).

A case is a folder with `log.txt` (the log as quoted), `context.json` (the facts the thread gives: method,
vllm_version, num_speculative_tokens, drafter, model, drafter_config) and `expect.json` (tests/CASES.md).

The score is strict: a problem case is right only when the report claims the cause (`cause`: the part, owner or
input at fault) **and** the fix (`fix`: the flag, variable, release, package or host change) its thread
established, in a warning or critical finding or in the plan, with the thread's verdict; a family tag never
counts as the cause. A healthy case is right only with the verdict healthy; anything worse is a false alarm.
Every warning or critical finding is a claim at its confidence, right when it names the case's cause or fix:
the table of right/claimed per confidence level says how far "high" can be trusted. The old loose rule (any one
tag of `expect_any`, a family alone enough) is scored beside it.

Each case is also split by whether the knowledge base cites its thread (a source URL or an upstream
reference of an entry): a case whose thread the rules were written beside says less about the next
failure than one they were never shown.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bot.app.diagnosis.diagnose import diagnose_text
from bot.core.kb import KB, load_kb
from bot.core.report import Report
from bot.core.triage.context import Flags
from bot.core.triage.findings import Finding
from bot.errors import InputError

HYPOTHESIS_FAMILY = {
    "dflash-layer-offset": "acceptance-bug", "dflash-layer-offset-double": "acceptance-bug",
    "dflash-swa-full-attention": "acceptance-bug", "dflash-swa-needs-v2": "interface-refusal",
    "zero-acceptance": "acceptance-bug", "self-drafter-collapse": "acceptance-bug",
    "method-not-in-release": "interface-refusal", "gpu-too-old": "platform", "env-var-collision": "process",
    "missing-attribute": "runtime-crash",
}
MAX_LOG = 4 << 20


@dataclass(frozen=True)
class Claim:
    """One warning or critical finding of a report, at its confidence: right when it names the case's cause or fix."""

    finding: str
    confidence: str
    right: bool


@dataclass
class CaseResult:
    name: str
    expected_verdict: str | None
    verdict: str
    expect_any: list[str]
    must_not: list[str]
    named: list[str]
    passed: bool  # the loose rule: any one tag of expect_any (a family alone is enough)
    why: str
    healthy_case: bool
    source: str = ""
    cited: bool = False  # the knowledge base cites this case's thread
    strict: bool = False  # the strict rule: the cause and the fix claimed (tests/CASES.md)
    strict_why: str = ""
    claims: list[Claim] = field(default_factory=list)


CONFIDENCES = ("high", "medium", "low")


@dataclass
class EvalResult:
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(1 for c in self.cases if c.passed)

    @property
    def strict_passed(self) -> int:
        return sum(1 for c in self.cases if c.strict)

    @property
    def healthy(self) -> list[CaseResult]:
        return [c for c in self.cases if c.healthy_case]

    @property
    def problems(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.healthy_case]

    @property
    def false_alarms(self) -> int:
        """Healthy cases called degraded or failing ('unknown' is a miss, not an alarm)."""
        return sum(1 for c in self.healthy if c.verdict in ("degraded", "failing"))

    @property
    def score(self) -> float:
        """The strict share: the cause and the fix claimed (a healthy case: the verdict healthy)."""
        return self.strict_passed / len(self.cases) if self.cases else 0.0

    @property
    def loose_score(self) -> float:
        return self.passed / len(self.cases) if self.cases else 0.0

    def confidence_table(self) -> dict[str, dict[str, int]]:
        """Right/claimed per confidence level, over every warning or critical finding of every case."""
        claims = [k for c in self.cases for k in c.claims]
        return {level: {"right": sum(1 for k in claims if k.confidence == level and k.right),
                        "claimed": sum(1 for k in claims if k.confidence == level)} for level in CONFIDENCES}

    def split(self) -> dict[str, dict[str, int]]:
        """Right (strict) per group: threads the knowledge base cites vs not, and of the latter problems vs healthy."""
        groups: dict[str, list[CaseResult]] = {
            "cited": [c for c in self.cases if c.cited],
            "not cited": [c for c in self.cases if not c.cited],
            "not cited, problems": [c for c in self.cases if not c.cited and not c.healthy_case],
            "not cited, healthy": [c for c in self.cases if not c.cited and c.healthy_case],
        }
        return {name: {"passed": sum(1 for c in cs if c.strict), "total": len(cs)} for name, cs in groups.items()}

    def as_json(self) -> dict[str, Any]:
        return {"cases": [asdict(c) for c in self.cases], "passed": self.strict_passed, "total": len(self.cases),
                "score": round(self.score, 3), "loose_passed": self.passed, "loose_score": round(self.loose_score, 3),
                "problems": len(self.problems), "problems_passed": sum(1 for c in self.problems if c.strict),
                "healthy_cases": len(self.healthy), "false_alarms": self.false_alarms,
                "confidence": self.confidence_table(), "split": self.split()}


_FLAG_RE = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)+|(?<![\w-])--[a-z]{3,}\b")
# an environment variable a remedy tells to set: vLLM's, NCCL's, CUDA's, PyTorch's and the like
_ENV_RE = re.compile(r"(?<![\w$])((?:VLLM|NCCL|CUDA|TORCH|PYTORCH|HF|TRANSFORMERS|RAY|OMP|NVIDIA|LD|TRITON|"
                     r"FLASHINFER|XFORMERS|HIP|ROCM|ASCEND|HCCL|MKL|KMP|GLOO|TP)_[A-Z0-9_]*[A-Z0-9])\b")
_UPGRADE_RE = re.compile(r"\bupgrad", re.IGNORECASE)
# specops' own flags in a remedy's command (`specops deploy PROFILE --host a6000`) are not what to change in vLLM
_SPECOPS_FLAGS = frozenset({"--host", "--format", "--log", "--method", "--vllm-version", "--drafter", "--methods",
                            "--num-speculative-tokens", "--concurrency", "--requests", "--chart", "--dry-run",
                            "--query-gpu", "--hosts", "--prometheus"})


# the owners tests/CASES.md names; a report's owner outside them (`aiter`, `xgrammar`) is the vocabulary's `other`
_CASE_OWNERS = frozenset({"vllm", "plugin", "transformers", "huggingface_hub", "torch", "triton", "flashinfer",
                          "xformers", "flash-attn", "nccl", "cuda-runtime", "driver", "loader", "container-runtime",
                          "user-script", "ray", "numpy", "other"})


def finding_tags(f: Finding, kb: KB | None = None) -> list[str]:
    """What one finding names: its id, family, upstream threads, the part, owner and inputs at fault, and the
    fix — the flags and variables it tells to change, the kinds of remedy, the packages and host changes."""
    tags = [f"finding:{f.id}"]
    entry = (kb or load_kb()).get(f.id)
    family = entry.family if entry else HYPOTHESIS_FAMILY.get(f.id.split(":", 1)[0])
    if family:
        tags.append(f"family:{family}")
    tags += [f"upstream:{u.number}" for u in f.upstream if u.repo == "vllm-project/vllm"]
    if f.part:
        tags.append(f"part:{f.part}")
    if f.owner:
        tags.append(f"owner:{f.owner}")
        if f.owner not in _CASE_OWNERS and f.owner not in ("python", "debugger"):
            tags.append("owner:other")  # a library the cases' vocabulary does not list by name (tests/CASES.md)
    tags += [f"input:{i}" for i in f.inputs]
    # a flag or variable the report tells the reader to change: named as a knob, or written in its remedy
    tags += [f"knob:{k}" for k in f.knobs]
    tags += [f"knob:{k}" for r in f.remediation for k in _FLAG_RE.findall(r) if k not in _SPECOPS_FLAGS]
    tags += [f"knob:{k}" for r in f.remediation for k in _ENV_RE.findall(r)]
    tags += [f"advice:{a}" for a in f.advice]
    if any(_UPGRADE_RE.search(r) for r in f.remediation):
        tags.append("advice:upgrade")
    tags += [f"dep:{d}" for d in f.deps]
    tags += [f"host:{h}" for h in f.host]
    return list(dict.fromkeys(tags))


def plan_tags(report: Report) -> list[str]:
    return list(dict.fromkeys([f"knob:{k}" for p in report.plan for k in (*_FLAG_RE.findall(p), *_ENV_RE.findall(p))
                               if k not in _SPECOPS_FLAGS]))


def tags_of(report: Report) -> list[str]:
    """Everything the report claims: the tags of its warning and critical findings and of its plan (an
    informational finding names only its id)."""
    kb = load_kb()
    tags: list[str] = [f"verdict:{report.verdict}"]
    for f in report.findings:
        tags += finding_tags(f, kb) if f.severity in ("critical", "warning") else [f"finding:{f.id}"]
    tags += plan_tags(report)
    return list(dict.fromkeys(tags))


def _keys(tags: list[str]) -> set[str]:
    """Tags as compared: a package by its normalized name (PEP 503: `deep_gemm`, `deep-gemm` and `Deep.GEMM` are
    one package to pip)."""
    return {f"dep:{re.sub(r'[-_.]+', '-', t[4:]).lower()}" if t.startswith("dep:") else t for t in tags}


def claims_of(report: Report, cause: list[str], fix: list[str], healthy: bool) -> list[Claim]:
    wanted = _keys([*cause, *fix])
    kb = load_kb()
    return [Claim(f.id, f.confidence, not healthy and bool(wanted & _keys(finding_tags(f, kb))))
            for f in report.findings if f.severity in ("critical", "warning")]


def strict_judgement(report: Report, named: list[str], expect: dict[str, Any]) -> tuple[bool, str]:
    """The cause and the fix its thread established, both claimed; a healthy case: the verdict healthy."""
    verdict = expect.get("verdict")
    if verdict == "healthy":
        return (report.verdict == "healthy", "" if report.verdict == "healthy" else f"verdict {report.verdict}")
    problems = []
    if verdict and report.verdict != verdict:
        problems.append(f"verdict {report.verdict}, not {verdict}")
    cause = [t for t in expect.get("cause") or [] if not str(t).startswith("family:")]
    fix = [str(t) for t in expect.get("fix") or []]
    if not cause or not fix:
        problems.append("the case names no " + " and no ".join(w for w, g in (("cause", cause), ("fix", fix)) if not g))
    else:
        if not _keys(cause) & _keys(named):
            problems.append("no cause (" + ", ".join(cause) + ")")
        if not _keys(fix) & _keys(named):
            problems.append("no fix (" + ", ".join(fix) + ")")
    wrong = sorted(t for t in (str(t) for t in expect.get("must_not") or []) if _keys([t]) & _keys(named))
    if wrong:
        problems.append(f"names {', '.join(wrong)}")
    return not problems, "; ".join(problems)


_THREAD_RE = re.compile(r"github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull|discussions)/(\d+)")


def _thread(url: str) -> tuple[str, int] | None:
    m = _THREAD_RE.search(url)
    return (m[1].lower(), int(m[2])) if m else None


def cited_threads() -> tuple[set[tuple[str, int]], set[str]]:
    """Every thread the knowledge base cites: its entries' sources and upstream references."""
    kb = load_kb()
    threads: set[tuple[str, int]] = set()
    urls: set[str] = set()
    for e in kb.entries:
        for src in e.sources:
            urls.add(src.rstrip("/").lower())
            t = _thread(src)
            if t:
                threads.add(t)
        threads |= {(u.repo.lower(), u.number) for u in e.upstream}
    return threads, urls


def is_cited(source: str, cited: tuple[set[tuple[str, int]], set[str]] | None = None) -> bool:
    threads, urls = cited or cited_threads()
    t = _thread(source)
    return (t in threads) if t else source.rstrip("/").lower() in urls


def flags_of(context: dict[str, Any]) -> Flags:
    known = {"method", "vllm_version", "num_speculative_tokens", "drafter", "drafter_config", "baseline_tps", "gpu"}
    args: dict[str, Any] = {k: v for k, v in context.items() if k in known and v is not None}
    if context.get("model"):
        args["target_model"] = context["model"]
    if context.get("speculative_method") and "method" not in args:
        args["method"] = context["speculative_method"]  # the collectors' name for it (the CLI's `--method`)
    if isinstance(args.get("vllm_version"), int | float):
        args["vllm_version"] = str(args["vllm_version"])
    return Flags(**args)


def run_case(folder: Path, cited: tuple[set[tuple[str, int]], set[str]] | None = None) -> CaseResult:
    log = folder / "log.txt"
    if not log.is_file():
        raise InputError(f"{folder}: no log.txt")
    if log.stat().st_size > MAX_LOG:
        raise InputError(f"{folder}: log.txt is over {MAX_LOG >> 20} MiB")
    context = _json(folder / "context.json", required=False)
    expect = _json(folder / "expect.json", required=True)
    report = diagnose_text(log.read_text(encoding="utf-8", errors="replace"), flags_of(context),
                           source=str(log))
    return score_case(folder.name, report, expect, cited)


def score_case(name: str, report: Report, expect: dict[str, Any],
               cited: tuple[set[tuple[str, int]], set[str]] | None = None) -> CaseResult:
    """One report against what its thread established: the loose rule, the strict rule and its claims."""
    named = tags_of(report)
    expected_verdict = expect.get("verdict")
    expect_any = [str(t) for t in expect.get("expect_any") or []]
    expect_all = [str(t) for t in expect.get("expect_all") or []]
    must_not = [str(t) for t in expect.get("must_not") or []]
    problems = []
    if expected_verdict and report.verdict != expected_verdict:
        problems.append(f"verdict {report.verdict}, not {expected_verdict}")
    if expect_any and not set(expect_any) & set(named):
        problems.append(f"names none of {', '.join(expect_any)}")
    missing = [t for t in expect_all if t not in named]
    if missing:
        problems.append(f"does not name {', '.join(missing)}")
    wrong = sorted(set(must_not) & set(named))
    if wrong:
        problems.append(f"names {', '.join(wrong)}")
    strict, strict_why = strict_judgement(report, named, expect)
    healthy = expected_verdict == "healthy"
    claims = claims_of(report, [str(t) for t in expect.get("cause") or []], [str(t) for t in expect.get("fix") or []],
                       healthy)
    return CaseResult(name, expected_verdict, report.verdict, expect_any, must_not,
                      [t for t in named if not t.startswith("verdict:")], not problems, "; ".join(problems),
                      healthy, str(expect.get("source", "")), is_cited(str(expect.get("source", "")), cited),
                      strict=strict, strict_why=strict_why, claims=claims)


def run(directory: Path) -> EvalResult:
    if not directory.is_dir():
        raise InputError(f"{directory} is not a folder of cases")
    folders = sorted(p for p in directory.iterdir() if p.is_dir() and (p / "expect.json").exists())
    if not folders:
        raise InputError(f"{directory} holds no case (a folder with log.txt, context.json, expect.json)")
    cited = cited_threads()
    return EvalResult([run_case(f, cited) for f in folders])


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
