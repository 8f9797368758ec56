"""An attachment's name is redacted before it is escaped for Slack (issue 36): escaping `_` first turned
`hf_….log` into `hf?….log`, which no rule matches, and the token was posted."""

from __future__ import annotations

from bot.adapters.slack.files import _name
from bot.redact import Redactor

TOKEN = "hf" + "_" + "Q7xK2mV9pL4nR8tW3yZ6bC1d"  # assembled: no complete token in the source


def test_a_token_in_a_file_name_is_never_shown() -> None:
    for name in (f"{TOKEN}.log", f"server-{TOKEN}_2026.txt", f"gh{'p_'}{'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8'}.log"):
        shown = _name({"name": name}, Redactor())
        assert "(redacted)" in shown and TOKEN[3:] not in shown and "A1b2C3d4E5f6G7h8I9j0" not in shown, shown


def test_a_configured_secret_in_a_name_is_redacted_too() -> None:
    shown = _name({"name": "dump-Sup3rSecretValue.log"}, Redactor(["Sup3rSecretValue"]))
    assert "Sup3rSecretValue" not in shown


def test_an_ordinary_name_keeps_its_words() -> None:
    assert _name({"name": "vllm-server.log"}, Redactor()) == "vllm-server.log"
