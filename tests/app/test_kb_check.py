"""`specops kb check`: every knowledge-base entry is sourced and matched by its real fixture line, and a broken
fixture is reported (moved from tests/core: the check reads the fixture files, so it is app)."""

from __future__ import annotations

import pytest

from bot.app.evaluation import kb as kb_app


def test_every_entry_is_sourced_and_its_fixtures_match_it_and_no_other() -> None:
    result = kb_app.check()
    assert result.entries >= 80
    assert result.fixtures >= result.entries
    assert result.problems == []


def test_a_broken_fixture_is_reported(tmp_path: pytest.TempPathFactory) -> None:
    folder = tmp_path  # type: ignore[assignment]
    (folder / "no-available-memory-cache-blocks.txt").write_text(  # type: ignore[operator]
        "# source: https://github.com/vllm-project/vllm/issues/10439\nsomething else entirely\n")
    problems = kb_app.check(folder).problems  # type: ignore[arg-type]
    assert any("no-available-memory-cache-blocks.txt: no line matches" in p for p in problems)
    assert any(p.endswith("no fixture (tests/fixtures/kb/address-in-use.txt)") for p in problems)
