"""`specops kb`: list, show, search and check the knowledge base (bot/core/knowledge/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.core.failures import check_signatures, compiled_kb_text
from bot.core.kb import COMPILED, FAMILY_TITLES, KB, Entry, Fixture, compiled_is_fresh, load_kb, parse_fixture
from bot.errors import InputError
from bot.paths import repo_root


def fixtures_dir(given: Path | None = None) -> Path | None:
    """The real lines each entry is tested on: tests/fixtures/kb/ of a checkout (not shipped in the wheel)."""
    if given is not None:
        if not given.is_dir():
            raise InputError(f"{given} is not a folder of fixtures")
        return given
    root = repo_root()
    candidate = root / "tests" / "fixtures" / "kb" if root else None
    return candidate if candidate is not None and candidate.is_dir() else None


def load_fixtures(folder: Path) -> dict[str, list[Fixture]]:
    out: dict[str, list[Fixture]] = {}
    for path in sorted(folder.glob("*.txt")):
        entry_id = path.name.split(".")[0]
        out.setdefault(entry_id, []).append(parse_fixture(path.name, path.read_text(encoding="utf-8")))
    return out


def entry_summary(e: Entry, fixtures: dict[str, list[Fixture]] | None = None) -> dict[str, Any]:
    return {
        "id": e.id, "kind": e.kind, "family": e.family, "title": e.title, "severity": e.severity,
        "sources": list(e.sources),
        "fixtures": [f"tests/fixtures/kb/{f.name}" for f in (fixtures or {}).get(e.id, [])],
        "upstream": [f"{u.repo}#{u.number}" for u in e.upstream], "fixed_in": e.fixed_in,
    }


def entries(kb: KB | None = None) -> list[Entry]:
    return list((kb or load_kb()).entries)


def show(entry_id: str) -> Entry:
    kb = load_kb()
    e = kb.get(entry_id)
    if e is None:
        import difflib

        close = difflib.get_close_matches(entry_id, [x.id for x in kb.entries], n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `specops kb list` lists them"
        raise InputError(f"no knowledge-base entry {entry_id!r}{hint}")
    return e


def search(text: str) -> list[Entry]:
    if not text.strip():
        raise InputError("search for what? give a log line or words")
    return load_kb().search(text)


def atlas(line: str, version: str | None = None, platform: str | None = None) -> dict[str, Any]:
    """Where vLLM's released source prints or raises LINE: site, release range, condition, knobs, link."""
    from bot.core.atlas import load_atlas
    from bot.core.triage.atlas_findings import explain_line
    from bot.core.triage.context import parse_version

    if not line.strip():
        raise InputError("explain which line? paste one line of a vLLM log (quote it in the shell)")
    if version is not None and parse_version(version) is None:
        raise InputError(f"--vllm-version {version!r} is not a version (e.g. 0.20.1)")
    found = explain_line(line, version, platform)
    m = found.match
    # what the knowledge base knows of the line comes first: its cause and fix are what an operator acts on
    known = [{"id": e.id, "title": e.title} for e in load_kb().search(line) if not e.catch_all][:3]
    out: dict[str, Any] = {"line": found.message, "exception": found.exception, "level": found.level,
                           "printed_at": found.source, "found": m is not None, "knowledge_base": known}
    if m is None:
        releases = load_atlas().releases
        out["why"] = (f"no call site of the {len(releases)} vLLM releases the atlas holds prints this message "
                      f"({releases[0]}–{releases[-1]}): it comes from another library, a plugin, or a build "
                      "with its own patches" if releases else "the atlas holds no release")
        return out
    site = m.site
    out |= {
        "package": site.package, "part": site.part, "file": site.file, "function": site.function,
        "line_no": m.line, "kind": site.kind, "exception_class": site.exc, "log_level": site.level,
        "template": site.template, "releases": [site.first, site.last], "linked_release": m.release,
        "url": m.url, "exact": m.exact, "holes": m.holes, "condition": site.condition,
        "condition_text": m.condition_text, "in_your_release": m.in_release, "gone_after": m.gone_after,
        "fixed_in": m.fixed_in, "compare_url": m.compare_url, "also_raised_in": list(m.rivals),
        "knobs": [{"flag": k.flag, "key": k.key, "field": k.field, "help": k.help} for k in m.knobs],
    }
    return out


def compile_now() -> Path:
    """Write compiled.json for the YAML as it is now; the path written."""
    from importlib import resources

    target = Path(str(resources.files("bot.core") / "knowledge" / COMPILED))
    text = compiled_kb_text()
    tmp = target.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(target)
    return target


@dataclass
class CheckResult:
    entries: int
    fixtures: int
    problems: list[str] = field(default_factory=list)
    by_family: dict[str, int] = field(default_factory=dict)


def check(folder: Path | None = None) -> CheckResult:
    """Every entry validates (done by loading), has a sourced fixture its patterns match and no other entry
    claims first; an acceptance entry's fixture, diagnosed, gives the finding it names."""
    kb = load_kb()
    where = fixtures_dir(folder)
    by_family: dict[str, int] = {}
    for e in kb.entries:
        by_family[e.family] = by_family.get(e.family, 0) + 1
    if where is None:
        return CheckResult(len(kb.entries), 0, ["no fixtures folder (tests/fixtures/kb/ of a checkout, or --fixtures "
                                                "DIR): only the entries were validated"], by_family)
    fixtures = load_fixtures(where)
    problems = check_signatures(kb, fixtures)
    known = {e.id for e in kb.entries}
    problems += [f"{name}: no entry {name!r}" for name in sorted(set(fixtures) - known)]
    problems += _check_acceptance(kb, fixtures)
    if not compiled_is_fresh():
        problems.append("bot/core/knowledge/compiled.json is older than the YAML: run `specops kb compile` "
                        "(diagnoses read the YAML meanwhile: right, but slower)")
    return CheckResult(len(kb.entries), sum(len(v) for v in fixtures.values()), problems, by_family)


def _check_acceptance(kb: KB, fixtures: dict[str, list[Fixture]]) -> list[str]:
    from bot.app.diagnosis.diagnose import diagnose_text
    from bot.core.triage.context import Flags

    problems: list[str] = []
    for e in kb.entries:
        if e.patterns or e.hypothesis is None:
            if not e.patterns and e.hypothesis is None:
                problems.append(f"{e.id}: an acceptance entry needs `hypothesis:` (the finding its fixture gives)")
            continue
        method = next((m for m in e.affected.methods if m != "any"), None)
        for f in fixtures.get(e.id, []):
            report = diagnose_text("\n".join(f.lines), Flags(method=method))
            found = [x.id for x in report.findings]
            if e.hypothesis not in found:
                problems.append(f"{f.name}: diagnosed as {found or ['nothing']}, not {e.hypothesis}")
    return problems


# FAMILY_TITLES is handed on: the front doors may not import the core's knowledge base
__all__ = [
    "FAMILY_TITLES", "CheckResult", "atlas", "check", "entries", "entry_summary", "fixtures_dir", "load_fixtures",
    "search", "show",
]
