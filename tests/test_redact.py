"""The redactor: what must never leave the process."""

from __future__ import annotations

import logging

import pytest

from bot.redact import MASK, RedactingFilter, Redactor

KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
       "-----END OPENSSH PRIVATE KEY-----")


@pytest.mark.parametrize("secret", [
    "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp",
    "xoxp-1234567890-abcdef",
    "xapp-1-A0123-456789-abcdef0123",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "ghp_0123456789abcdefghijABCDEFGHIJ0123",
])
def test_tokens(secret: str) -> None:
    out = Redactor().text(f"token in text: {secret} end")
    assert secret not in out and MASK in out and out.endswith(" end")


def test_private_key_and_passwords_and_urls() -> None:
    r = Redactor()
    out = r.text(f"key:\n{KEY}\npassword=hunter2 PASSWORD: 'swordfish' api_key=abc123 HF_TOKEN=zzz999")
    for leaked in ("b3BlbnNzaC1rZXkt", "hunter2", "swordfish", "abc123", "zzz999"):
        assert leaked not in out
    assert r.text("https://user:pa55w0rd@host/x") == f"https://user:{MASK}@host/x"
    assert r.text("Authorization: Bearer abc.def.ghi") == f"Authorization: Bearer {MASK}"


def test_configured_secrets_and_structures() -> None:
    r = Redactor(["my-signing-secret-value"])
    data = {"blocks": [{"text": {"text": "sig my-signing-secret-value"}}], "n": 3}
    assert r.obj(data) == {"blocks": [{"text": {"text": f"sig {MASK}"}}], "n": 3}
    assert r.bytes(b"\x89PNG\x00\xff binary") == b"\x89PNG\x00\xff binary"


def test_ordinary_text_is_untouched() -> None:
    text = "Mean acceptance length 1.18 on vLLM 0.20.1; see vllm#40727; token budget 32768 tokens/s"
    assert Redactor().text(text) == text


def test_log_filter(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("specops.test.redact")
    handler_filter = RedactingFilter(Redactor())
    caplog.handler.addFilter(handler_filter)
    try:
        logger.warning("posting with %s", "xoxb-1234567890-secretsecret")
    finally:
        caplog.handler.removeFilter(handler_filter)
    assert "xoxb-1234567890" not in caplog.text and MASK in caplog.text


def test_tracebacks_in_logs_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("specops.test.redact.exc")
    handler_filter = RedactingFilter(Redactor())
    caplog.handler.addFilter(handler_filter)
    try:
        try:
            raise RuntimeError("upload failed with xoxb-1234567890-leakedleaked")
        except RuntimeError:
            logger.exception("job failed")
    finally:
        caplog.handler.removeFilter(handler_filter)
    assert "leakedleaked" not in caplog.text and "RuntimeError" in caplog.text


def test_secret_env_values_of_the_config_are_never_shown(tmp_path: pytest.TempPathFactory) -> None:
    from bot.config import parse_config
    from bot.redact import register_config_secrets

    cfg = parse_config({"hosts": {"h": {"address": "a", "user": "u", "vllm_env": {"HF_HOME": "/srv/hf-cache"}}},
                        "profiles": {"p": {"model": "m", "env": {"WANDB_API_KEY": "wandb-value-123",
                                                                   "VLLM_USE_V2_MODEL_RUNNER": "1"}}}})
    r = Redactor()
    register_config_secrets(cfg, r)
    out = r.text("env VLLM_USE_V2_MODEL_RUNNER=1 WANDB=wandb-value-123 HF_HOME=/srv/hf-cache")
    assert "wandb-value-123" not in out and "/srv/hf-cache" in out and "=1" in out
