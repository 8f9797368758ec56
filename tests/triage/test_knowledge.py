"""The knowledge base: it loads, covers every failure kind, and cites only threads we checked."""

from __future__ import annotations

import re

import pytest

from bot.core.logparse import FAILURE_PATTERNS
from bot.core.triage.knowledge import load_knowledge
from tests.conftest import SHARED


def test_knowledge_base_loads_and_covers_every_failure_kind() -> None:
    kb = load_knowledge()
    assert {p.kind for p in FAILURE_PATTERNS} <= set(kb.failures)
    for facts in kb.failures.values():
        assert facts.severity in ("critical", "warning", "info")
        assert facts.issue is None or facts.issue in kb.issues


def test_upstream_facts_match_the_checked_reference() -> None:
    ref = SHARED / "upstream.md"
    if not ref.exists():
        pytest.skip(f"{ref} is not beside this checkout")
    text = ref.read_text()
    kb = load_knowledge()
    refs = [u for i in kb.issues.values() for u in i.upstream] + [u for f in kb.failures.values() for u in f.upstream]
    assert refs
    for u in refs:
        assert re.search(rf"#{u.number}\b", text), f"{u.repo}#{u.number} is not in upstream.md"
        if u.first_release:
            # the first release named in the reference for this thread
            chunk = text[text.index(f"#{u.number}"):][:600]
            assert u.first_release in chunk, (u.number, u.first_release)
    assert kb.issues["dflash-layer-offset"].upstream[0].first_release == "0.22.0"
    assert kb.issues["dflash-swa-full-attention"].upstream[1].first_release == "0.25.0"
