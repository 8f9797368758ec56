"""The knowledge base: it loads, its families and needles hold, the facts we checked hold (`kb check` over the
fixture files is app: tests/app/test_kb_check.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.core.failures import default_table
from bot.core.kb import load_kb
from bot.core.triage.knowledge import load_knowledge

# beside the checkout, as tests/conftest.py has it (which imports the simulated host: not for a core test)
SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "reference"


def test_every_family_the_issue_names_has_several_entries() -> None:
    families = {e.family for e in load_kb().entries}
    for family in ("gpu-visibility", "driver-mismatch", "nccl-shm", "spec-config-parse", "cli-config-bug", "kv-memory",
                   "scheduler-budget", "interface-refusal", "drafter-config", "parallelism", "compile-cudagraph",
                   "disaggregation", "platform"):
        n = sum(1 for e in load_kb().entries if e.family == family)
        assert family in families and n >= 2, (family, n)


def test_one_failure_table_finds_each_line_by_its_needle() -> None:
    table = default_table()
    for sig in table.signatures:
        for pattern, needles in zip(sig.patterns, sig.needles, strict=True):
            if needles:  # every needle really is a literal each match contains
                assert all(n == n.lower() and len(n) >= 4 for n in needles), (sig.id, pattern.pattern)


def test_upstream_facts_match_the_checked_reference() -> None:
    ref = SHARED / "upstream.md"
    if not ref.exists():
        pytest.skip(f"{ref} is not beside this checkout")
    text = ref.read_text()
    kb = load_knowledge()
    refs = [u for i in kb.issues.values() for u in i.upstream]
    assert refs
    for u in refs:
        assert re.search(rf"#{u.number}\b", text), f"{u.repo}#{u.number} is not in upstream.md"
        if u.first_release:
            chunk = text[text.index(f"#{u.number}"):][:600]
            assert u.first_release in chunk, (u.number, u.first_release)
    assert kb.issues["dflash-layer-offset"].upstream[0].first_release == "0.22.0"
    assert kb.issues["dflash-swa-full-attention"].upstream[1].first_release == "0.25.0"
