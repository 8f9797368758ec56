"""The knowledge base's compiled form: fresh in the repository, and the same knowledge as the YAML."""

from __future__ import annotations

import pytest

from bot.core import kb
from bot.core.failures import build_table, entry_needles


def test_the_compiled_form_is_fresh() -> None:
    assert kb.compiled_is_fresh(), "run `specops kb compile` after editing the knowledge base's YAML"


def test_the_compiled_form_holds_what_the_yaml_says() -> None:
    from_yaml, facts = kb._from_yaml(kb._sources())
    assert kb.load_kb() == from_yaml
    from bot.core.triage.knowledge import KnowledgeBase, load_knowledge

    assert load_knowledge() == KnowledgeBase.model_validate(facts)  # JSON's string keys validate to the same
    assert kb.compiled_needles() == {e.id: entry_needles(e) for e in from_yaml.entries if e.patterns}


def test_a_stale_compiled_form_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    kb._loaded.cache_clear()
    monkeypatch.setattr(kb, "digest", lambda sources: "not-the-digest")
    try:
        loaded, _facts, needles = kb._loaded()
        assert needles is None and len(loaded.entries) == len(kb._from_yaml(kb._sources())[0].entries)
        table = build_table(loaded, needles)  # derived from the patterns, the same table
        assert table.needles
    finally:
        kb._loaded.cache_clear()
