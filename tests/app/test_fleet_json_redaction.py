"""The fleet's JSON is redacted part by part (bot/redact.py `Vouched`): the renderer vouches for the contract's keys,
the numbers and the fixed words, and every string from outside — the Prometheus URL, an instance, its labels, a
headline — is redacted on its own. A secret planted in a label, a label's name, an instance, a sample's value or the
Prometheus URL never reaches the output: through `specops fleet` as a user runs it, against a real HTTP server on
127.0.0.1 answering Prometheus' query API."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.app.fleet import fleet
from bot.config import PrometheusSettings
from bot.present.render import render
from bot.redact import MASK, Redactor, Vouched
from tests.app.test_fleet_bounds import FakePrometheus, healthy, series, vector
from tests.support.prometheus_api import PrometheusAPI

ROOT = Path(__file__).resolve().parents[2]

# what a careless exporter could put in a label: each is a shape the redactor knows
API_KEY = "Zq8vT3mW9xK2pL7rN4sB6yD1"  # under a label named api_key
SLACK = "xoxb-2048-4096-ZQ8VT3MW9XK2PL7RNXQ"  # a Slack bot token as a label value
HF = "hf_Zq8vT3mW9xK2pL7rN4sB6yD1Qa"  # a Hugging Face token inside an instance's name
GITHUB = "ghp_Zq8vT3mW9xK2pL7rN4sB6yD1Qa5cE0fH2"  # a sample value that is no number
PASSWORD = "Pr0m-S3cret-pass"  # the Prometheus URL's password
SECRETS = (API_KEY, SLACK, HF, GITHUB, PASSWORD)
PLANTED = f"127.0.0.1:9?{HF}"


def planted(query: str) -> Any:
    """One healthy instance whose labels carry secrets, one plain instance whose name does, and a value that is a
    token instead of a number."""
    answer = healthy(query)
    if "num_requests_running" in query:
        answer = vector([series("2", job="vllm", model_name=SLACK, api_key=API_KEY),
                         series("1", instance=PLANTED, job="vllm", model_name="m")])
    elif "num_requests_waiting" in query:
        answer = vector([series(GITHUB)])
    return answer


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    p = FakePrometheus()
    p.answer = planted
    try:
        yield p
    finally:
        p.close()


def with_password(url: str) -> str:
    return url.replace("http://", f"http://ops:{PASSWORD}@")


def test_a_secret_from_prometheus_never_reaches_the_json(prom: FakePrometheus, tmp_path: Path) -> None:
    for fmt in ("json", "md", "text", "slack"):
        p = subprocess.run([sys.executable, "-m", "bot", "fleet", "--prometheus", with_password(prom.url), "--since",
                            "60s", "--format", fmt], capture_output=True, text=True, timeout=60, cwd=ROOT,
                           env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)})
        assert p.returncode == 0, p.stderr
        for secret in SECRETS:
            assert secret not in p.stdout and secret not in p.stderr, (fmt, secret, p.stdout[:3000])
        if fmt == "json":
            doc = json.loads(p.stdout)
            assert doc["totals"]["instances"] == 2, doc
            labels = next(line["labels"] for line in doc["instances"] if "api_key" in line["labels"])
            assert labels["api_key"] == MASK and labels["job"] == "vllm", labels  # the label kept, its value not
            assert SLACK[:5] not in p.stdout, labels
            assert "127.0.0.1:9?" in p.stdout  # the planted instance is listed, its token masked
            assert doc["prometheus"].startswith("http://ops:") and "@127.0.0.1:" in doc["prometheus"]


def test_every_string_from_outside_is_a_part_the_redactor_redacts(prom: FakePrometheus) -> None:
    """What the renderer vouches for holds nothing from outside: the label names and values, the instances and the
    URL are outside parts; the part-by-part redaction says what the whole-text one says of the same text."""
    result = fleet(None, PrometheusSettings(url=with_password(prom.url)), "", 60.0)
    text = render(result, "json").text
    assert isinstance(text, Vouched)
    assert text == json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n"
    # what the redactor must catch is in the rendering (the token sent as a value is no number: skipped, unshown)
    assert all(secret in text for secret in (API_KEY, SLACK, HF, PASSWORD)) and GITHUB not in text
    vouched = "".join(part for part, ok in text.parts if ok)
    for outside in (*SECRETS, "api_key", "model_name", "vllm", "127.0.0.1:9", "ops:"):
        assert outside not in vouched, outside
    redactor = Redactor()
    redactor.learn_url(with_password(prom.url))
    clean = redactor.text(text)
    assert not any(secret in clean for secret in SECRETS), clean
    assert clean == redactor.text(str(text))  # a plain copy goes through the whole-text rules: the same output


def test_the_stand_in_fleet_redacts_as_the_whole_text_did() -> None:
    with PrometheusAPI(120) as api:
        result = fleet(None, PrometheusSettings(url=api.url), "", 3600.0)
    text = render(result, "json").text
    assert isinstance(text, Vouched) and text.parts
    assert Redactor().text(text) == Redactor().text(str(text)) == text  # nothing in it is a secret


def test_a_vouched_text_changed_in_any_way_is_redacted_whole() -> None:
    """Only the very object is trusted: a copy, a slice or a concatenation is a plain str and goes through every
    rule (here a token in a part wrongly vouched for, which the part-by-part pass leaves alone by design)."""
    wrong = Vouched([(f'{{"token": "{GITHUB}"', True), ("}", True)])
    assert Redactor().text(wrong) == wrong  # vouched: left as it is
    for derived in (str(wrong), wrong + "\n", wrong[:], wrong.replace("x", "x"), "".join([wrong])):
        assert type(derived) is str
        assert GITHUB not in Redactor().text(derived), derived

    class Sub(Vouched):
        pass
    assert GITHUB not in Redactor().text(Sub([(GITHUB, True)]))  # only Vouched itself, never a subclass
