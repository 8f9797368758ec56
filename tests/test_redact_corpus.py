"""The secret corpus through the redactor, every way a sink calls it; and ordinary vLLM text through it unchanged."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from bot.redact import MASK, RedactingFilter, Redactor, rule_set
from tests.support.secret_corpus import SHAPES, Shape

TESTS = Path(__file__).resolve().parent
IDS = [s.name for s in SHAPES]


def leaked(shape: Shape, text: str) -> list[str]:
    return [s for s in shape.secrets if s in text]


def test_the_corpus_is_broad() -> None:
    assert len(SHAPES) >= 40 and len(set(IDS)) == len(IDS)


def test_most_gitleaks_rules_compile() -> None:
    rs = rule_set()
    assert rs.loaded >= 200, "the shipped gitleaks.toml lost its rules"
    assert rs.compiled >= 0.95 * rs.loaded, rs.skipped


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_text(shape: Shape) -> None:
    out = Redactor().text(shape.line)
    assert not leaked(shape, out) and "(redacted" in out, out


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_inside_json(shape: Shape) -> None:
    r = Redactor()
    payload = {"blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": shape.line}}], "n": 1}
    out = r.obj(payload)
    assert not leaked(shape, json.dumps(out)) and out["n"] == 1
    # a JSON document as one string (an audit detail, a stored sample): its escapes must not hide a secret
    assert not leaked(shape, r.text(json.dumps(payload)))


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_bytes(shape: Shape) -> None:
    out = Redactor().bytes(shape.line.encode())
    assert not leaked(shape, out.decode())


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_log_record(shape: Shape, caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("specops.test.corpus")
    flt = RedactingFilter(Redactor())
    caplog.handler.addFilter(flt)
    try:
        logger.warning("server said: %s", shape.line)
        try:
            raise RuntimeError(shape.line)
        except RuntimeError:
            logger.exception("job failed")
    finally:
        caplog.handler.removeFilter(flt)
    assert not leaked(shape, caplog.text) and "RuntimeError" in caplog.text


def test_redaction_is_idempotent() -> None:
    r = Redactor()
    for shape in SHAPES:
        once = r.text(shape.line)
        assert r.text(once) == once, shape.name


def ordinary_lines() -> list[str]:
    files = [*TESTS.glob("fixtures/*.log"), *TESTS.glob("cases*/*/log.txt"), *TESTS.glob("golden/*.md")]
    lines = [line for f in sorted(files) for line in f.read_text(errors="replace").splitlines() if line.strip()]
    assert len(lines) > 500, "the fixtures moved"
    # a real command line that sets a secret-named variable (even to a placeholder), or vLLM's dump of its arguments
    # with the server's API key in it, is masked, rightly
    lines = [line for line in lines if not re.search(r"(?:TOKEN|SECRET|PASSWORD|API_KEY)=|'api_key': '", line)]
    return lines


def test_the_api_key_in_vllms_argument_dump_is_masked() -> None:
    line = ("INFO 08-03 19:16:46 [cli_args.py:309] non-default args: {'api_key': 'qweasdzxc', 'model': 'Qwen3-8B', "
            "'trust_remote_code': True}")
    out = Redactor().text(line)
    assert "qweasdzxc" not in out and "'model': 'Qwen3-8B'" in out


ORDINARY = [
    "INFO 12-01 10:00:00 [metrics.py:467] SpecDecoding metrics: Mean acceptance length: 1.18, Accepted "
    "throughput: 28.50 tokens/s, Drafted throughput: 150.00 tokens/s, Accepted: 2850 tokens, Drafted: 15000 tokens, "
    "Per-position acceptance rate: 0.700, 0.300, Avg Draft acceptance rate: 19.0%",
    "INFO 12-01 10:00:05 [loggers.py:123] Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation "
    "throughput: 96.1 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 37.5%, "
    "Prefix cache hit rate: 61.2%",
    "Mean acceptance length: 1.18",
    "vllm:spec_decode_num_accepted_tokens_total{model_name=\"z-lab/Qwen3.6-27B-DFlash\"} 2850.0",
    "speculative_config={'method': 'dflash', 'model': 'z-lab/Qwen3.6-27B-DFlash', 'num_speculative_tokens': 15}",
    "deploy mtp a6000: changed (vLLM 0.20.1, commit 6904a6b0e2f1c3d4a5b6c7d8e9f00112233445566); see vllm#40727",
    "max_num_batched_tokens=8192 max_model_len=32768 gpu_memory_utilization=0.92 tensor_parallel_size=2",
    "token budget 32768 tokens/s; KV cache key layout NHD; access log /var/log/vllm/access.log",
]


def test_ordinary_text_is_unchanged() -> None:
    r = Redactor()
    changed = [(line, out) for line in [*ORDINARY, *ordinary_lines()] if (out := r.text(line)) != line]
    assert not changed, changed[:5]
    assert MASK not in r.text("\n".join(ORDINARY))


def test_a_python_expression_is_no_secret_and_a_secret_with_brackets_still_is() -> None:
    r = Redactor()
    for code in ("    step_token = step_top_logprobs[token_id]", "token = self.tokenizer.decode(ids)"):
        assert r.text(code) == code
    for secret in ("DB_PASSWORD=Summer[2024]!x", "password=hunter2(abc)", "api_key=Zx9kLmQ2rT(7",
                   "OPENAI_API_KEY=sk_live.abcDEF123[0]", "HF_TOKEN=abcdefghijklmnopqrstu(", "sig=AbC123[",
                   "password=Correct.Horse.Battery(Staple)", 'password="Secr3t(x)"', "DB_PASSWORD = Summer[2024]!x",
                   "api_key = Zx9kLmQ2rT(7"):
        assert MASK in r.text(secret), secret


def test_only_code_shapes_pass_the_redactor() -> None:
    r = Redactor()
    for secret in ("DB_PASSWORD = Welcome[123]", "api_key = Zx9kLmQ2rT(7)",
                   "aws_secret_access_key = wJalrXUtnFEMI(K7MDENG)", "client_secret = Tr0ub4dor[3]",
                   "password = Summer(2024)"):
        out = r.text(secret)
        assert MASK in out and secret.split(" = ")[1] not in out, secret
    for secret in ("token = cfg[sk_live_4eC39HqLyjWDarjtT1zdp7dc]", "token = requests.get(Xk9vQ2mP7rT4wZ8nL3)"):
        assert MASK in r.text(secret), secret


def test_an_operator_after_a_password_is_never_the_secret() -> None:
    """Read as a netrc line, `password = Z` took the `=` for the password and masked it, and printed Z in plain
    sight: the token after an operator is what is masked."""
    r = Redactor()
    for line in ("password = hunter2[abc]", "password := s3cr3tXYZ9", "password => s3cr3tXYZ9",
                 "password == s3cr3tXYZ9", "password - s3cr3tXYZ9", "    passwd = cfg[key]"):
        out = r.text(line)
        value = line.split()[-1]
        assert MASK in out and value not in out, out
    for line in ("machine host login bob password s3cr3t", "password s3cr3t", "passwd :x9fj2kdq"):
        out = r.text(line)
        assert MASK in out and "s3cr3t" not in out and "x9fj2kdq" not in out, out
