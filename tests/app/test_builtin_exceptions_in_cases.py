"""Frames before words, over every real case (issue 35): a built-in exception is never placed by its words alone at a
site its frames contradict, and Python's own words never place it at all."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.app.evaluation.evaluate import flags_of
from bot.core.atlas import load_atlas
from bot.core.logparse import parse_text
from bot.core.parsed_log import ProblemLine
from bot.core.report import build_report
from bot.core.triage import diagnose
from bot.core.triage.evidence import Readings
from bot.core.triage.frames import FRAMES_DECIDE, frames_agree, generic_words

ROOT = Path(__file__).resolve().parents[2]
CASES = sorted(p for d in ROOT.glob("tests/cases*") if d.is_dir() for p in d.iterdir() if (p / "log.txt").is_file())


def _builtin(p: ProblemLine) -> bool:
    return p.kind == "exception" and (p.exception or "").rsplit(".", 1)[-1] in FRAMES_DECIDE


def test_the_cases_hold_built_in_exceptions_to_check() -> None:
    held = [p for case in CASES for p in parse_text((case / "log.txt").read_text(errors="replace")).problems
            if _builtin(p)]
    assert len(held) >= 40


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_built_in_exception_is_placed_where_its_frames_or_its_words_do_not_say(case: Path) -> None:
    text = (case / "log.txt").read_text(errors="replace")
    context = json.loads((case / "context.json").read_text()) if (case / "context.json").exists() else {}
    parsed = parse_text(text)
    builtins = [p for p in parsed.problems if _builtin(p)]
    if not builtins:
        return
    report = build_report(diagnose(Readings(parsed=parsed, flags=flags_of(context))))
    frames_of = {tb: [f for f in parsed.problems if f.kind == "frame" and f.traceback_id == tb]
                 for tb in {p.traceback_id for p in builtins}}
    for f in report.findings:
        if f.site is None or f.severity == "info":
            continue
        for p in builtins:
            if p.origin.where() not in (f.evidence[0] if f.evidence else ""):
                continue
            assert not generic_words(p.exception, p.message), (f.id, p.message)
            frames = frames_of.get(p.traceback_id, []) if p.traceback_id is not None else []
            # a wrapper quoting the original exception by its class (`… original error: RuntimeError('Aborted …')`):
            # what is placed is that inner exception, whose own frames the log does not hold
            quoted = re.search(r"\b([A-Z]\w{0,60}(?:Error|Exception))\(['\"]", p.message)
            inner = quoted is not None and quoted[1] != (p.exception or "").rsplit(".", 1)[-1] \
                and f.title.startswith(quoted[1])
            if frames and not inner and not frames_agree(f.site.file, f.site.function, frames):
                # only a whole-message match of vLLM's own long sentence may stand against the frames
                m = load_atlas().match(p.message, exc=p.exception)
                assert f.confidence != "low" and m is not None and m.exact and len(m.site.template) >= 32, \
                    (f.id, p.message)
