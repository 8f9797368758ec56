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


# issue 21, item 1: each of these went through the hand patterns verbatim
FG_PAT = "github" + "_pat_11" + "ABCDEFGHIJ0123456789_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789aBcDeFgHiJkLmNoPqRsTuVw"
WEBHOOK_PATH = "T0123ABCD/B0123ABCDEF/" + "aBcDeFgHiJkLmNoPqRsTuVwX"


@pytest.mark.parametrize(("line", "secret"), [
    (f"ERROR push refused for {FG_PAT}", FG_PAT),
    (f"posting to https://hooks.slack.com/services/{WEBHOOK_PATH} failed", WEBHOOK_PATH),
    ("cookie " + "xo" + "xc-1234567890-aBcDeFgHiJkLmNoPqRsT", "aBcDeFgHiJkLmNoPqRsT"),
    ("GET https://bob:pa/ss99word@127.0.0.1/x", "ss99word"),
    ("could not connect to postgres://admin:p@ss@word99@db:5432/app", "word99"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGXyZ0123abcdefgh\n-----END PGP PRIVATE KEY BLOCK-----",
     "lQOYBGXyZ0123abcdefgh"),
    ("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=Zm9vYmFyYmF6cXV4+/Zm9vYmFy==;EndpointSuffix=x",
     "Zm9vYmFyYmF6cXV4"),
    ("machine 127.0.0.1 login bob password N3trcPassw0rd", "N3trcPassw0rd"),
    ("  password N3trcOnItsOwn", "N3trcOnItsOwn"),
])
def test_the_shapes_that_leaked_before(line: str, secret: str) -> None:
    out = Redactor().text(line)
    assert secret not in out and "(redacted" in out, out


def test_url_passwords_run_to_the_last_at_of_the_authority() -> None:
    r = Redactor()
    assert r.text("https://bob:pa/ss99word@127.0.0.1/") == f"https://bob:{MASK}@127.0.0.1/"
    assert r.text("postgres://admin:p@ss@word99@db") == f"postgres://admin:{MASK}@db"


def test_go_regexes_are_translated() -> None:
    import re

    from bot.redact import translate_go_regex

    assert re.fullmatch(translate_go_regex(r"ab(?i)cd"), "abCD")
    assert not re.fullmatch(translate_go_regex(r"ab(?i)cd"), "ABcd")  # the flag starts where RE2 puts it
    assert re.fullmatch(translate_go_regex(r"(x(?i)y|z)w"), "xYw")
    assert not re.fullmatch(translate_go_regex(r"(x(?i)y|z)w"), "xyW")  # ... and ends with its group
    assert re.search(translate_go_regex(r"end\z"), "the end")
    assert re.fullmatch(translate_go_regex(r"[[:alnum:]]+"), "aZ9")
    assert re.fullmatch(translate_go_regex(r"[[a]+"), "[a[")


def test_the_rule_set_is_built_once() -> None:
    from bot.redact import rule_set

    assert rule_set() is rule_set()


def test_a_secret_name_with_no_value_is_left_as_it_is() -> None:
    # vLLM's own argument dump prints `hf_token=None`: no value is no secret
    r = Redactor()
    dump = "config_format='auto', hf_token=None, hf_overrides={}"
    assert r.text(dump) == dump
    assert r.text("api_key=null") == "api_key=null"
    assert "(redacted)" in r.text("hf_token=Nonesuch12345") and "(redacted)" in r.text("token=nullify99x")
    # nor is a header a client built from a missing key (`Bearer None`); a credential there still is one
    header = "{'Authorization': 'Bearer None'}"
    assert r.text(header) == header and r.text("Authorization: null") == "Authorization: null"
    assert "(redacted)" in r.text("Authorization: Bearer Nonesuch12345") and "None" not in r.text(
        "Authorization: Bearer Nonesuch12345")
