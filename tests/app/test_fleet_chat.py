"""`fleet --limit N` and `fleet --only-problems` in chat, with the command line's meaning and bounds: through the
chat dispatcher (parse, audit, run) against a stand-in of Prometheus' query API on 127.0.0.1, the result rendered
for Slack as the bot posts it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.chat import ChatDispatcher, Who
from bot.app.services import Services, build_services
from bot.app.verbs.fleet import CHAT_LIMIT
from bot.config import Config, PrometheusSettings, Settings
from bot.core.results.fleet import FleetReport
from bot.present.render import render
from tests.support.prometheus_api import PrometheusAPI

WHO = Who("slash", "U1", "T0", "C0")
N = 80  # a quarter of the stand-in's fleet is not healthy: 20 problems, fewer than a Slack message lists


@pytest.fixture(scope="module")
def api() -> Iterator[PrometheusAPI]:
    with PrometheusAPI(N) as server:
        yield server


@pytest.fixture
def svc(api: PrometheusAPI, tmp_path: Path) -> Iterator[Services]:
    services = build_services(Config(hosts={}, profiles={}, prometheus=PrometheusSettings(url=api.url),
                                     settings=Settings(state=tmp_path / "specops.db")))
    try:
        yield services
    finally:
        services.store.close()


def ran(chat: ChatDispatcher, text: str) -> FleetReport:
    decision = chat.decide(text, WHO)
    assert decision.next == "run" and decision.command is not None, decision.text
    result = chat.run(decision.command, decision.audit, "U1 via test")
    assert isinstance(result, FleetReport)
    return result


def listed(result: FleetReport) -> list[dict[str, object]]:
    blocks = json.loads(render(result, "slack").text)["blocks"]
    return [b for b in blocks if b["type"] == "section"]


def test_limit_lists_the_worst_n_and_counts_the_rest(svc: Services) -> None:
    chat = ChatDispatcher(svc)
    whole = ran(chat, "fleet")
    assert len(whole.lines) == CHAT_LIMIT and whole.totals.instances == N  # the default: what one message holds
    three = ran(chat, "fleet --limit 3")
    assert [line.instance for line in three.lines] == [line.instance for line in whole.lines[:3]]  # worst first
    assert three.totals == whole.totals and three.omitted.instances == N - 3
    assert len(listed(three)) == 3
    blocks = json.loads(render(three, "slack").text)["blocks"]
    assert blocks[-1]["elements"][0]["text"].startswith(f"… and {N - 3} more (healthy: ")
    assert ran(chat, "fleet --limit=0").lines == ()
    assert len(ran(chat, f"fleet --limit {N * 10}").lines) == CHAT_LIMIT  # never more than a message holds


def test_only_problems_lists_none_that_is_healthy(svc: Services) -> None:
    chat = ChatDispatcher(svc)
    problems = ran(chat, 'fleet job="vllm" --only-problems')
    assert problems.lines and all(line.verdict != "healthy" for line in problems.lines)
    healthy = problems.totals.by_verdict["healthy"]
    assert len(problems.lines) == N - healthy and problems.omitted.by_verdict == {"healthy": healthy}
    both = ran(chat, "fleet --only-problems --limit 2")
    assert [line.instance for line in both.lines] == [line.instance for line in problems.lines[:2]]
    assert both.omitted.instances == N - 2


def test_the_audit_row_says_the_options(svc: Services) -> None:
    chat = ChatDispatcher(svc)
    ran(chat, 'fleet job="vllm" --limit=4 --only-problems')
    entry = svc.store.audit.recent(1)[0]
    assert entry.detail.startswith('fleet job="vllm" --limit 4 --only-problems: Fleet:'), entry.detail


@pytest.mark.parametrize(("text", "message"), [
    ("fleet --limit -3", "`--limit -3`: give a whole number, 0 or more"),
    ("fleet --limit x", "`--limit x`: give a whole number, 0 or more"),
    ("fleet --limit 2.5", "`--limit 2.5`: give a whole number, 0 or more"),
    ("fleet --limit", "`--limit` needs a value"),
    ("fleet --limit 2 --limit 3", "`--limit` is given twice"),
    ("fleet --only-problems=yes", "`--only-problems` takes no value"),
    ("fleet --top 5", "unknown option `--top` for `fleet`; options: --since, --limit, --only-problems"),
])
def test_a_bad_option_gets_a_short_answer_and_runs_nothing(svc: Services, text: str, message: str) -> None:
    chat = ChatDispatcher(svc)
    decision = chat.decide(text, WHO)
    assert decision.next == "reply" and decision.text.startswith(message), decision.text
    assert len(decision.text) < 200 and "Traceback" not in decision.text
    entry = svc.store.audit.recent(1)[0]
    assert entry.result == "usage" and entry.finished_at


def test_a_dash_inside_a_quoted_label_value_is_the_selectors(svc: Services) -> None:
    decision = ChatDispatcher(svc).decide('fleet model_name="a --limit b" --limit 1', WHO)
    assert decision.command is not None, decision.text
    assert decision.command.selector == 'model_name="a --limit b"' and decision.command.args().limit == 1


def test_help_lists_the_options(svc: Services) -> None:
    text = ChatDispatcher(svc).decide("help", WHO).text
    line = next(line for line in text.splitlines() if "`fleet" in line)
    assert "`--limit N` lists at most N" in line and "`--only-problems`" in line, line
