"""The object graph: one per process, built in app/services.py; two graphs share nothing, and the one redactor
knows every secret — the config's, the Slack app's, the Alertmanager token — before anything reaches SQLite."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bot.app.chat import ChatDispatcher, Who
from bot.app.services import build_services
from bot.config import Config, HostConfig, Profile, Settings


def _config(tmp_path: Path, name: str) -> Config:
    (tmp_path / f"{name}.kh").write_text("")
    return Config(hosts={"a6000": HostConfig(address="127.0.0.1", port=9, user="x",
                                             known_hosts=tmp_path / f"{name}.kh",
                                             vllm_env={"HF_TOKEN": "hf-config-secret-0123"})},
                  profiles={"mtp": Profile(model="/m", method="mtp", num_speculative_tokens=3)},
                  settings=Settings(state=tmp_path / f"{name}.db"))


def _rows(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [" ".join(str(c) for c in row) for row in db.execute("SELECT text, detail FROM audit")]
    finally:
        db.close()


def test_a_secret_of_the_slack_app_is_masked_in_the_sqlite_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    signing = "8f14e45fceea167a5a36dedd4bea2543"  # a signing secret: no pattern knows it, only its value does
    monkeypatch.setenv("SLACK_SIGNING_SECRET", signing)
    monkeypatch.setenv("SPECOPS_ALERTMANAGER_TOKEN", "am-token-4f9c2e71")
    svc = build_services(_config(tmp_path, "a"))
    chat = ChatDispatcher(svc)
    decision = chat.decide(f"status {signing} am-token-4f9c2e71 hf-config-secret-0123", Who("slash", "U1"))
    chat.end(decision.audit, "error", f"echoed {signing} and am-token-4f9c2e71 and hf-config-secret-0123")
    svc.store.audit.flush()
    svc.close()
    [row] = _rows(tmp_path / "a.db")
    for secret in (signing, "am-token-4f9c2e71", "hf-config-secret-0123"):
        assert secret not in row
    assert "(redacted)" in row


def test_two_graphs_side_by_side_share_nothing(tmp_path: Path) -> None:
    a, b = build_services(_config(tmp_path, "a")), build_services(_config(tmp_path, "b"))
    try:
        assert a.redactor is not b.redactor and a.store is not b.store and a.hosts is not b.hosts
        assert a.manager is not b.manager and a.watches is not b.watches
        a.redactor.add_secret("only-a-knows-this-one")
        assert b.redactor.text("only-a-knows-this-one") == "only-a-knows-this-one"
        a.store.locks.acquire("a6000", "owner-a", "deploy mtp")
        assert b.store.locks.holder("a6000") is None  # its own database
        assert a.store.locks.holder("a6000") is not None
    finally:
        a.close()
        b.close()


def test_a_graph_opens_no_database_until_a_use_case_needs_one(tmp_path: Path) -> None:
    svc = build_services(_config(tmp_path, "c"))
    assert not (tmp_path / "c.db").exists()  # `diagnose --log` with a config never touches the state
    svc.close()
