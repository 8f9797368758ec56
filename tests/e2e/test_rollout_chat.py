"""`/specops rollout` through the real bot (`specops serve --http`) and the Slack emulator, over three simulated
hosts (bot/sim/fleet.py): a deployer's rollout is planned (the batches, the canary first, and the gate), confirmed,
followed in its progress message host by host and step by step, and reported in the thread with each host's gate
verdict; anyone else is refused; a Cancel pressed mid-batch restores the hosts it changed; a bad target is told
which hosts and groups there are. A chat rollout takes the command line's --canary, --soak, --requests and
--concurrency (a demanding user wants a short soak)."""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.config import Config, Settings
from bot.sim.fleet import SimFleet
from tests.support.fleet_hosts import HOSTS, serve_everywhere, serving, stop_everywhere
from tests.support.served import Served, bot_config, wait_for
from tests.support.slack_emulator import SlackEmulator

FAST = "--soak 1s --requests 2 --concurrency 1"


@pytest.fixture(scope="module")
def fleet() -> Iterator[SimFleet]:
    sims = SimFleet(3, stats_interval=0.5, startup_seconds=0.5, max_request_seconds=0.5).start()
    try:
        yield sims
    finally:
        sims.cleanup()


@pytest.fixture(scope="module")
def emu() -> Iterator[SlackEmulator]:
    slack = SlackEmulator().start()
    try:
        yield slack
    finally:
        slack.stop()


@pytest.fixture
def served(fleet: SimFleet, emu: SlackEmulator, tmp_path: Path) -> Iterator[tuple[Served, Config]]:
    """The bot over the fleet, with a state of the test's own; the hosts serve `mtp` when it starts."""
    config = bot_config(fleet.config())
    # an edit at most every 0.5 s (the default is 2): each step of a host, a second or more on the simulated
    # hosts, gets one of its own
    config.slack = config.slack.model_copy(update={"progress_interval": 0.5})
    config.settings = Settings(state=tmp_path / "specops.db")
    path = tmp_path / "specops.json"
    path.write_text(config.model_dump_json())
    serve_everywhere(config, "mtp")
    emu.reset()
    bot = Served(tmp_path, path, emu)
    try:
        yield bot, config
    finally:
        if bot.proc.poll() is None:
            bot.kill(15)
        stop_everywhere(config)






def _ack(resp: httpx.Response) -> str:
    assert resp.status_code == 200, resp.text
    if resp.headers.get("content-type", "").startswith("application/json"):
        return str(resp.json().get("text", ""))
    return resp.text


def _as(bot: Served, user: str, text: str) -> httpx.Response:
    """`/specops TEXT` typed by `user` (Served.command is always the deployer)."""
    return bot.signed(urllib.parse.urlencode({"team_id": "T0TEST", "channel_id": "C1", "user_id": user,
                                              "command": "/specops", "text": text,
                                              "trigger_id": f"{time.time_ns()}.{bot.port}"}),
                      "application/x-www-form-urlencoded")


def _all_text(m: dict[str, Any]) -> str:
    blocks, attachments = (json.dumps(m.get(k) or "", ensure_ascii=False) for k in ("blocks", "attachments"))
    return f"{m.get('text')} {blocks} {attachments}"


def _first(emu: SlackEmulator, what: str, action: str) -> dict[str, Any]:
    """The first message with the button `action`."""
    found: dict[str, Any] = wait_for(what, lambda: next((m for m in emu.messages()
                                                         if action in str(m.get("blocks"))), None), 60)
    return found


def _plan(emu: SlackEmulator) -> dict[str, Any]:
    return _first(emu, "the plan", "plan_confirm")


def _progress(emu: SlackEmulator) -> dict[str, Any]:
    """The job's progress message, with its Cancel button."""
    return _first(emu, "the progress message", "job_cancel")


def _updates(emu: SlackEmulator, ts: str) -> list[str]:
    """Every text the progress message `ts` was edited to, in order."""
    return [str(c.args.get("text")) for c in emu.calls_to("chat.update") if str(c.args.get("ts")) == ts]


def _report(emu: SlackEmulator, ts: str, timeout: float) -> dict[str, Any]:
    """The rollout's report: the reply in the progress message's thread that names the rollout."""
    found: dict[str, Any] = wait_for("the report in the thread", lambda: next(
        (m for m in emu.thread(ts) if "Rollout of" in _all_text(m)), None), timeout)
    return found


def test_a_deployers_rollout_is_planned_confirmed_followed_and_reported(
        served: tuple[Served, Config], emu: SlackEmulator) -> None:
    bot, config = served
    before = serving(config)
    assert {p for p, _ in before.values()} == {"mtp"}
    # a gate in quotes, as Slack sends it (`>` escaped as `&gt;`, the quotes curled by the client)
    gate = "“bugs == 0 and tps_ratio &gt;= 0.5 and acceptance_ratio &gt;= 0.9”"
    said = _ack(bot.command(f"rollout dflash a6000s {FAST} --gate {gate}"))
    assert "Preparing the plan" in said, said

    plan = _plan(emu)
    shown = _all_text(plan)
    assert "canary" in shown and "bugs == 0 and tps_ratio &gt;= 0.5 and acceptance_ratio &gt;= 0.9" in shown, shown
    for batch, host in (("canary", "a6000"), ("batch 1", "a6000-b"), ("batch 2", "a6000-c")):  # the canary first
        assert f"*{batch}*: {host} (serves mtp)" in shown, shown
    assert "soak: 1 s" in shown, shown  # the chat's --soak, not the default 5 min
    actions = [e["action_id"] for b in plan["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert "plan_confirm" in actions and "plan_cancel" in actions, actions
    assert serving(config) == before  # a plan changes nothing

    bot.confirm(plan)
    progress = _progress(emu)
    report = _report(emu, progress["ts"], 150)
    text = _all_text(report)
    assert "all 3 host(s) passed the gate" in text, text
    for host in HOSTS:
        assert f"{host}* (served mtp before): gate passed" in text, text
    final = wait_for("the progress message's last edit",
                     lambda: "report in the thread" in emu.message(progress["ts"])["text"] and
                     emu.message(progress["ts"]), 30)
    assert "job_cancel" not in str(final["blocks"])  # over: no Cancel any more

    lines = [ln for u in _updates(emu, progress["ts"]) for ln in u.splitlines()]
    for host, batch in zip(HOSTS, ("canary", "batch 1", "batch 2"), strict=True):  # each host, each step
        for step in ("measuring what it serves now (mtp)", "deploying dflash", "driving the workload for 1 s",
                     "— ok (", "gate passed: bugs 0 == 0; tps_ratio", ">= 0.5 (tok/s"):
            assert any(f"{host} ({batch}) — " in ln and step in ln for ln in lines), \
                (host, step, [ln for ln in lines if f"{host} ({batch})" in ln])
    after = serving(config)
    assert {p for p, _ in after.values()} == {"dflash"}, after
    assert all(after[h][1] != before[h][1] for h in HOSTS)  # each deployed anew


def test_anyone_but_a_deployer_is_refused_and_no_plan_is_posted(
        served: tuple[Served, Config], emu: SlackEmulator) -> None:
    bot, config = served
    before = serving(config)
    said = _ack(_as(bot, "UNOBODY", f"rollout dflash a6000s {FAST}"))
    assert "not allowed to `rollout`" in said, said
    time.sleep(1.0)  # a plan, if one were coming, is posted within this
    assert not [m for m in emu.messages() if "plan_confirm" in str(m.get("blocks"))], emu.messages()
    assert serving(config) == before


def test_cancel_mid_batch_restores_the_canary_and_leaves_the_rest(
        served: tuple[Served, Config], emu: SlackEmulator) -> None:
    bot, config = served
    before = serving(config)
    said = _ack(bot.command("rollout dflash a6000s --canary 2 --soak 60s --requests 2 --concurrency 1"))
    assert "Preparing the plan" in said, said
    plan = _plan(emu)
    assert "soak: 60 s" in _all_text(plan), _all_text(plan)
    bot.confirm(plan)
    progress = _progress(emu)

    def soaking() -> str | None:  # the message as it is now: both canary hosts, side by side, in their soak
        now = str(emu.message(progress["ts"])["text"])
        lines = now.splitlines()
        return now if all(any(f"{host} (canary) — running" in ln and "driving the workload for 60 s" in ln
                              for ln in lines) for host in HOSTS[:2]) else None
    shown = wait_for("both canary hosts to soak", soaking, 90)
    assert "a6000-c" not in shown, shown  # the next batch waits
    t0 = time.monotonic()
    bot.press(progress, "job_cancel")

    report = _report(emu, progress["ts"], 90)
    assert time.monotonic() - t0 < 60  # the soak was cut short, not waited out
    text = _all_text(report)
    assert "cancelled: every host it changed was restored" in text, text
    assert text.count("restored: mtp serving again") == 2 and "*batch 1* · a6000-c: not reached" in text, text
    final = emu.message(progress["ts"])
    assert "cancelled" in final["text"], final["text"]
    after = serving(config)
    assert {p for p, _ in after.values()} == {"mtp"}, after
    for host in HOSTS[:2]:
        assert after[host][1] != before[host][1]  # deployed, then restored: a new row serves mtp
    assert after["a6000-c"] == before["a6000-c"]  # untouched: the same row serves


def test_a_bad_target_is_told_the_hosts_and_groups(served: tuple[Served, Config], emu: SlackEmulator) -> None:
    bot, _ = served
    said = _ack(bot.command("rollout dflash nope"))
    assert "unknown host or group 'nope'" in said, said
    assert "a6000-b" in said and "a6000s" in said, said  # the hosts and groups there are
    assert "Traceback" not in said and len(said) < 400, said
    bad = _ack(bot.command("rollout dflash a6000s --soak"))
    assert "needs a value" in bad and "Traceback" not in bad, bad
    unknown = _ack(bot.command("rollout dflash a6000s --prompts /etc/passwd"))
    assert "unknown option `--prompts`" in unknown and "--soak" in unknown, unknown  # a file there: the CLI's only
    soon = _ack(bot.command("rollout dflash a6000s --soak soon"))  # checked as the CLI does, before a plan
    assert "--soak 'soon': give a duration such as 90s, 5m or 1h" in soon and len(soon) < 400, soon
    call = _ack(bot.command('rollout dflash a6000s --gate "tps_ratio &gt;= os.system(1)"'))
    assert "gate:" in call and "function call" in call and "Traceback" not in call, call
    unclosed = _ack(bot.command('rollout dflash a6000s --gate "bugs == 0'))
    assert "not closed" in unclosed, unclosed
    helped = _ack(bot.command("help"))
    assert all(f"`--{o}" in helped for o in ("canary", "batch", "soak", "concurrency", "requests", "gate")), helped
    time.sleep(0.5)  # a plan, if one were coming for the refused ones, is posted within this
    assert not [m for m in emu.messages() if "plan_confirm" in str(m.get("blocks"))], emu.messages()
    assert not [m for m in emu.messages() if "plan_confirm" in str(m.get("blocks"))]
