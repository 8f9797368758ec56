"""What a file posted in Slack is called: by what it is and for whom (`acceptance-a6000-dflash-20261203T1820.png`,
`tune-a6000-mtp.png`), never one `acceptance.png` for every chart — through the bot and the Slack emulator,
which records the name each upload asked for."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator

import pytest

from bot.app.operations import ops
from tests.adapters.slack.test_bot import CHANNEL, Harness, ack_text, harness
from tests.present.test_results import tune_result
from tests.support.graph import graph
from tests.support.served import wait_for

SAFE = re.compile(r"[A-Za-z0-9._-]+")


@pytest.fixture
def h() -> Iterator[Harness]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(var, None)
    yield from harness()


def uploaded_names(h: Harness) -> list[str]:
    return [f["name"] for up in h.emu.completed_uploads for f in up["files"]]


def test_a_diagnosis_chart_is_named_for_its_host_method_and_time(h: Harness) -> None:
    ops.deploy(ops.HostRequest(h.cfg, "a6000", "dflash-0.20.1", force=True, **graph(h.cfg)))
    ack_text(h.command("diagnose a6000", user="USOMEONE"))
    wait_for("the chart upload", lambda: h.emu.completed_uploads, timeout=60)
    [name] = [n for n in uploaded_names(h) if n.endswith(".png")]
    assert re.fullmatch(r"acceptance-a6000-dflash-\d{8}T\d{4}\.png", name), name
    assert [f["filename"] for f in h.emu.files.values()] == uploaded_names(h)  # as files.getUploadURLExternal had it


def test_a_tune_chart_is_named_for_its_host_and_profile(h: Harness) -> None:
    h.bot.post_report(tune_result(), CHANNEL, None)
    wait_for("the chart upload", lambda: h.emu.completed_uploads, timeout=30)
    assert uploaded_names(h) == ["tune-a6000-mtp.png"]


def test_names_keep_to_safe_characters(h: Harness) -> None:
    h.bot.post_report(tune_result(host="gpu box/1", profile="mtp <k=2> & more"), CHANNEL, None)
    wait_for("the chart upload", lambda: h.emu.completed_uploads, timeout=30)
    [name] = uploaded_names(h)
    assert SAFE.fullmatch(name) and name.startswith("tune-gpu-box-1-mtp-k-2-more") and name.endswith(".png"), name
    assert json.dumps(name).strip('"') == name


def test_the_health_reports_trend_is_named_for_its_host(h: Harness) -> None:
    from bot.app.watching.health import health_report
    from bot.present.charts import trend_chart

    store = h.bot.services.store
    for i in range(3):
        store.samples.add("a6000", True, {"profile": "mtp", "mean": 2.5, "gen_tps": 70.0}, at=time.time() - 60 * i)
    report, png = health_report(h.cfg, store, "a6000", chart=trend_chart)
    assert png is not None
    h.bot.post_report(report, CHANNEL, None, chart_png=png)
    wait_for("the chart upload", lambda: h.emu.completed_uploads, timeout=30)
    assert "history-a6000.png" in uploaded_names(h)
